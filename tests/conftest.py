"""Shared fixtures over the ``kubeloop`` pytest plugin's embedded server (``kubeloop.testing``:
its own thread and event loop, so that blocking clients — kubectl, the official client,
requests — and async ones drive it over real HTTPS)."""

from __future__ import annotations

import dataclasses
import http.client
import json
import pathlib
import ssl
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import yaml
from hypothesis import HealthCheck, settings

from kubeloop.apiserver.server import APIServer, ServerOptions
from kubeloop.gcpause import tune_for_serving
from kubeloop.testing import eventually
from kubeloop.testing.serverthread import ServerThread
from kubeloop.testing.serverthread import start_server as start_cluster

__all__ = [
    "ONE_PROCESS_AND_FRONT_END",
    "Client",
    "FrontEndThread",
    "ServerThread",
    "eventually",
    "served_by",
    "start_front_end",
    "start_server",
]

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


class FrontEndThread(ServerThread):
    """A front-end over the store of ``owner`` (what each process but the first of
    ``kubeloop apiserver --workers N`` is: a ``RemoteStore`` following the owner's store over a
    socket, HTTP on a port of its own), run on the owner's loop and thread. Its clients use the
    owner's token and CA, as they do with ``--workers``."""

    def __init__(self, owner: ServerThread, options: ServerOptions) -> None:
        # The owner's loop and thread: not the ones ServerThread.__init__ would make.
        self.owner = owner
        self.options = options
        self.loop = owner.loop
        self.loop_errors = owner.loop_errors
        self._thread = owner._thread
        self.server = APIServer(options, front_end_of=self.call(owner.server.front_end_of()))

    def start(self) -> FrontEndThread:
        self.call(self.server.start())
        return self

    def stop(self) -> None:
        """Stop the front-end; the owner and its loop serve on."""
        if self._thread.is_alive():
            self.call(self.server.stop())

    @property
    def token(self) -> str:
        return self.owner.token

    @property
    def ca_file(self) -> str:
        return self.owner.ca_file

    @property
    def kubeconfig(self) -> pathlib.Path:
        """The owner's kubeconfig with this front-end's address as the cluster's server."""
        port = self.url.rsplit(":", 1)[1]
        path = self.owner.kubeconfig.with_name(f"front-end-{port}.kubeconfig")
        if not path.exists():
            config = yaml.safe_load(self.owner.kubeconfig.read_text())
            for cluster in config["clusters"]:
                cluster["cluster"]["server"] = self.url
            path.write_text(yaml.safe_dump(config))
        return path


def start_front_end(owner: ServerThread) -> FrontEndThread:
    """A started front-end over ``owner``'s store, with the owner's options but its own port,
    as ``kubeloop apiserver --workers N`` gives its front-end processes; see
    :class:`FrontEndThread`."""
    options = dataclasses.replace(owner.options, port=0, workers=1, kubeconfig=None)
    return FrontEndThread(owner, options).start()


#: The servers a module's tests run against, with ``served_by``: one process, and a front-end (as
#: each process but the first of ``kubeloop apiserver --workers N`` is: its own watch cache,
#: following the store, and the store's writes made over a socket).
ONE_PROCESS_AND_FRONT_END = ["one-process", "front-end"]


def served_by(kind: str, server: ServerThread) -> Iterator[ServerThread]:
    """``server`` itself, or (``"front-end"``) a front-end over its store, stopped afterwards;
    for a fixture parametrized over :data:`ONE_PROCESS_AND_FRONT_END`."""
    if kind == "one-process":
        yield server
        return
    front = start_front_end(server)
    try:
        yield front
    finally:
        front.stop()


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
