"""Shared fixtures: an embedded API server running in its own thread and event loop, so that
tests can drive it with blocking clients (kubectl, the official client, requests) as well as
async ones, over real HTTPS."""

from __future__ import annotations

import asyncio
import os
import pathlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest
import requests

from kubeloop.apiserver import protodescriptors
from kubeloop.apiserver.server import APIServer, ServerOptions
from tests.kubectl_finder import oldest_and_newest

# Protobuf bodies are read with the tables of the newest kubectl the tests drive.
if _kubectls := oldest_and_newest():
    os.environ.setdefault(protodescriptors.SOURCE_ENV, str(_kubectls[-1]))


class ServerThread:
    """Runs an APIServer on a private event loop in a daemon thread."""

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self.loop = asyncio.new_event_loop()
        self.server = APIServer(options)
        self._thread = threading.Thread(target=self.loop.run_forever, name="apiserver", daemon=True)

    def start(self) -> ServerThread:
        self._thread.start()
        self.call(self.server.start())
        return self

    def call(self, coro: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout=60)

    def stop(self) -> None:
        try:
            self.call(self.server.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def token(self) -> str:
        assert self.server.credentials is not None
        return self.server.credentials.admin_token

    @property
    def ca_file(self) -> str:
        path = self.server.kubeconfig_path.parent / "ca.crt"
        if not path.exists():
            assert self.server.credentials is not None
            path.write_bytes(self.server.credentials.ca_cert_pem)
        return str(path)

    @property
    def kubeconfig(self) -> pathlib.Path:
        return self.server.kubeconfig_path


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


def start_server(tmp_path: pathlib.Path | None = None, **overrides: Any) -> ServerThread:
    settings: dict[str, Any] = {
        "memory": tmp_path is None,
        "data_dir": tmp_path,
        "port": 0,
        "kubeconfig": (tmp_path / "kubeconfig") if tmp_path is not None else None,
    }
    options = ServerOptions(**{**settings, **overrides})
    return ServerThread(options).start()


@pytest.fixture(scope="session")
def shared_server() -> Iterator[ServerThread]:
    """One in-memory server for the tests that only add objects of their own."""
    server = start_server()
    yield server
    server.stop()


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


async def eventually(check: Callable[[], bool], timeout: float = 10) -> None:
    """Wait until ``check()`` holds, failing the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)
