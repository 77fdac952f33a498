"""The pytest plugin (entry point ``kubeloop``): fixtures over one embedded server per session.

- ``kube_apiserver``: the session's server (``ServerThread``: url, token, kubeconfig).
- ``kube_client``: an async ``APIClient`` for it (needs an asyncio test runner, e.g. pytest-asyncio).
- ``kube_namespace``: a namespace of its own for each test.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator

import pytest

from kubeloop.client.config import load_kubeconfig
from kubeloop.client.rest import APIClient
from kubeloop.testing.server import ServerThread, start_server

_namespaces = itertools.count(1)


@pytest.fixture(scope="session")
def kube_apiserver() -> Iterator[ServerThread]:
    """The session's embedded API server (in memory, HTTPS, a kubeconfig of its own)."""
    server = start_server()
    yield server
    server.stop()


@pytest.fixture
async def kube_client(kube_apiserver: ServerThread) -> AsyncIterator[APIClient]:
    """An async :class:`~kubeloop.APIClient` of the session's server, closed after the test."""
    async with APIClient(load_kubeconfig(kube_apiserver.kubeconfig)) as client:
        yield client


@pytest.fixture
async def kube_namespace(kube_client: APIClient) -> str:
    """The name of a namespace created for this test alone."""
    name = f"test-{next(_namespaces)}"
    await kube_client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name
