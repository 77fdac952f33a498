"""Shared fixtures over the ``kubeloop`` pytest plugin's embedded server (``kubeloop.testing``:
its own thread and event loop, so that blocking clients — kubectl, the official client,
requests — and async ones drive it over real HTTPS)."""

from __future__ import annotations

import http.client
import json
import pathlib
import ssl
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, settings

from kubeloop.gcpause import tune_for_serving
from kubeloop.testing import eventually
from kubeloop.testing.serverthread import ServerThread
from kubeloop.testing.serverthread import start_server as start_cluster

__all__ = ["Client", "ServerThread", "eventually", "start_server"]

# No wall-clock limits in the tests: a machine that pauses (two cores shared by three workers and
# the servers they start) must not fail a property. Hypothesis's deadline and its "input
# generation is slow" check are both timed; a test's own @settings may still set others.
settings.register_profile("kubeloop", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kubeloop")


def pytest_configure(config: pytest.Config) -> None:
    """Each test process hosts embedded servers (``ServerThread``) for its whole run, as a serving
    process does: its GC is tuned as ``kubeloop apiserver`` tunes its own (what is loaded by now
    frozen, passes less often: ``gcpause.tune_for_serving``). With CPython's thresholds, GC passes took
    about 10 s of each worker's ~50 s of CPU in tests/apiserver (full passes over the heap the
    servers had built, 220 ms each); 3.5 s tuned (measured with ``gc.callbacks``)."""
    tune_for_serving()


def start_server(data_dir: pathlib.Path | None = None, **overrides: Any) -> ServerThread:
    """``kubeloop.testing.start_server`` for tests of the API server's own semantics: namespaces
    start empty (no ``default`` ServiceAccount or ``kube-root-ca.crt``) unless a test asks for
    them; the shared server and users' servers keep them, as a cluster does."""
    overrides.setdefault("namespace_defaults", False)
    return start_cluster(data_dir, **overrides)


class Client:
    """A small blocking HTTP client for assertions on exact status codes and bodies."""

    def __init__(self, server: ServerThread) -> None:
        self.server = server
        self.session = requests.Session()
        self.session.trust_env = False  # REQUESTS_CA_BUNDLE would override session.verify
        self.session.headers["Authorization"] = f"Bearer {server.token}"
        self.session.verify = server.ca_file

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", 30)
        return self.session.request(method, self.server.url + path, **kwargs)

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> requests.Response:
        return self.request("POST", path, json=body, **kwargs)

    def put(self, path: str, body: Any = None, **kwargs: Any) -> requests.Response:
        return self.request("PUT", path, json=body, **kwargs)

    def patch(self, path: str, body: Any, content_type: str, **kwargs: Any) -> requests.Response:
        import json

        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return self.request("PATCH", path, data=data, headers={"Content-Type": content_type}, **kwargs)

    def delete(self, path: str, body: Any = None, **kwargs: Any) -> requests.Response:
        return self.request("DELETE", path, json=body, **kwargs)


@pytest.fixture(scope="session")
def kube_apiserver() -> Iterator[ServerThread]:
    """The plugin's session server, but with namespaces that start empty: the tests here assert
    exact lists in their namespaces (test_namespace_defaults.py covers what a cluster adds)."""
    server = start_server()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def module_server() -> Iterator[ServerThread]:
    """A server of the test module's own, for tests that install what the whole cluster meets
    (webhook configurations, admission policies, CRDs) and must not meet the other modules."""
    server = start_server()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def shared_server(kube_apiserver: ServerThread) -> ServerThread:
    """One in-memory server for the tests that only add objects of their own (the plugin's)."""
    return kube_apiserver


@pytest.fixture
def api(shared_server: ServerThread) -> Client:
    return Client(shared_server)


_namespace_counter = 0


@pytest.fixture
def namespace(api: Client) -> str:
    """A fresh namespace per test on the shared server."""
    global _namespace_counter
    _namespace_counter += 1
    name = f"t{_namespace_counter}"
    response = api.post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    assert response.status_code == 201, response.text
    return name


def https_get(
    host: str, port: int, path: str, *, context: ssl.SSLContext, token: str | None = None
) -> tuple[int, str, Any]:
    """(status, content type, decoded body) of one GET over TLS with ``context``."""
    connection = http.client.HTTPSConnection(host, port, context=context, timeout=10)
    try:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        body = response.read()
        content_type = response.getheader("Content-Type", "")
        decoded = json.loads(body) if content_type.startswith("application/json") else body.decode()
        return response.status, content_type, decoded
    finally:
        connection.close()
