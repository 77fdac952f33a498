"""The pytest plugin (entry point ``kubeloop``): fixtures over one embedded server per session.

- ``kube_apiserver``: the session's server (``ServerThread``: url, token, kubeconfig).
- ``kube_client``: an async ``APIClient`` for it (needs an asyncio test runner, e.g. pytest-asyncio).
- ``kube_namespace``: a namespace of its own for each test.

A test also fails when, while it ran, an embedded server's loop reported an error nobody handled
(``ServerThread.loop_errors``: a task that died unawaited, a callback that raised), or — for tests
that use ``kube_client`` — the test's own loop did: a check that fails in a task fails its test;
it is not only logged.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from kubeloop.client.config import load_kubeconfig
from kubeloop.client.rest import APIClient
from kubeloop.testing import serverthread as server_threads
from kubeloop.testing.serverthread import ServerThread, start_server

_namespaces = itertools.count(1)


@pytest.fixture(scope="session")
def kube_apiserver() -> Iterator[ServerThread]:
    """The session's embedded API server (in memory, HTTPS, a kubeconfig of its own)."""
    server = start_server()
    yield server
    server.stop()


#: Errors the loops a test watches reported while it ran (see ``pytest_runtest_call``).
_LOOP_ERRORS = pytest.StashKey[list[str]]()


def _server_errors_since(seen: dict[ServerThread, int]) -> list[str]:
    return [
        error
        for server in dict.fromkeys([*seen, *server_threads.running])
        for error in server.loop_errors[seen.get(server, 0) :]
    ]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """The test fails if, while it ran, a running embedded server's loop or the test's own loop
    (with ``kube_client``) reported an error nobody handled."""
    seen = {server: len(server.loop_errors) for server in server_threads.running}
    reported = item.stash.setdefault(_LOOP_ERRORS, [])
    result = yield
    new = [*_server_errors_since(seen), *reported]
    reported.clear()
    if new:
        pytest.fail(
            "an event loop reported errors nobody handled:\n" + "\n".join(dict.fromkeys(new)), pytrace=False
        )
    return result


@pytest.fixture
async def kube_client(
    kube_apiserver: ServerThread, request: pytest.FixtureRequest
) -> AsyncIterator[APIClient]:
    """An async :class:`~kubeloop.APIClient` of the session's server, closed after the test. While
    the test runs, what its loop reports unhandled (a task's exception nobody retrieved, a
    callback that raised) fails it."""
    loop = asyncio.get_running_loop()
    reported = request.node.stash.setdefault(_LOOP_ERRORS, [])
    previous = loop.get_exception_handler()

    def unhandled(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        reported.append(server_threads.unhandled_error_text(context))
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(unhandled)
    try:
        async with APIClient(load_kubeconfig(kube_apiserver.kubeconfig)) as client:
            yield client
    finally:
        loop.set_exception_handler(previous)


@pytest.fixture
async def kube_namespace(kube_client: APIClient) -> str:
    """The name of a namespace created for this test alone."""
    name = f"test-{next(_namespaces)}"
    await kube_client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name
