"""The pytest plugin (entry point ``kubeloop``): fixtures over one embedded server per session.

- ``kube_apiserver``: the session's server (``ServerThread``: url, token, kubeconfig). It
  simulates workloads (a node whose pods run, Deployments that roll out, Jobs that finish)
  unless the pytest configuration says ``kubeloop_simulate = false``.
- ``kube_client``: an async ``APIClient`` for it (needs an asyncio test runner, e.g. pytest-asyncio).
  A test marked ``@pytest.mark.kubeloop(simulate=False)`` (or ``True``) gets one of a session
  server that does (not) simulate, started when first needed.
- ``kube_namespace``: a namespace of its own for each test.
- ``kube_operator``: the operator's ``setup`` (``kubeloop_setup = "module:function"`` in the
  configuration, or a ``kube_setup`` fixture returning it) run in a started manager of
  ``kube_client``, its cache scoped to ``kube_namespace``, the CRDs of its models installed.

A test also fails when, while it ran, an embedded server's loop reported an error nobody handled
(``ServerThread.loop_errors``: a task that died unawaited, a callback that raised), or — for tests
that use ``kube_client`` — the test's own loop did: a check that fails in a task fails its test;
it is not only logged. So does a reconcile that failed an ``assert`` or a pytest check, or hit a
bug (``controller.PANICS``), while the test ran: the controller only logs and retries those. A
test whose reconciles raise such errors on purpose is marked
``@pytest.mark.kubeloop(reconcile_failures=True)``.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kubeloop.client.rest import APIClient
    from kubeloop.controller.reconcile import Request
    from kubeloop.manager.manager import Manager
    from kubeloop.manager.operatortarget import Setup
    from kubeloop.testing.serverthread import ServerThread

# This module loads with every pytest run where kubeloop is installed, whether its tests use
# kubeloop or not: what the fixtures need loads when a test first asks for them (the server,
# the client and the manager took ~1 s of CPU to import).
_CONTROLLER = "kubeloop.controller.controller"
_SERVER_THREADS = "kubeloop.testing.serverthread"

_namespaces = itertools.count(1)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "kubeloop_simulate",
        "simulate workloads in the test server: a node whose pods run, Deployments that roll out (default true)",
        type="bool",
        default=True,
    )
    parser.addini(
        "kubeloop_setup", "the operator's setup, module:function, that kube_operator runs", default=""
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kubeloop(simulate, reconcile_failures): run the test's kube_client against a server that simulates "
        "workloads, or does not; reconcile_failures=True lets reconciles fail asserts or hit bugs without failing it",
    )


class _Servers:
    """Session servers started when first needed, one per simulation setting."""

    def __init__(self) -> None:
        self.started: dict[bool, ServerThread] = {}

    def get(self, simulate: bool) -> ServerThread:
        from kubeloop.testing.serverthread import start_server

        if simulate not in self.started:
            self.started[simulate] = start_server(simulate=simulate)
        return self.started[simulate]

    def stop(self) -> None:
        for server in self.started.values():
            server.stop()


@pytest.fixture(scope="session")
def kubeloop_servers() -> Iterator[_Servers]:
    """The session's servers, by simulation setting (``kube_apiserver`` is one of them)."""
    servers = _Servers()
    yield servers
    servers.stop()


@pytest.fixture(scope="session")
def kube_apiserver(request: pytest.FixtureRequest, kubeloop_servers: _Servers) -> ServerThread:
    """The session's embedded API server (in memory, HTTPS, a kubeconfig of its own), simulating
    workloads unless ``kubeloop_simulate = false``."""
    return kubeloop_servers.get(bool(request.config.getini("kubeloop_simulate")))


def _server_of(request: pytest.FixtureRequest, default: ServerThread) -> ServerThread:
    """The server a test's ``kubeloop(simulate=...)`` marker asks for, else ``default``."""
    marker = request.node.get_closest_marker("kubeloop")
    if marker is None or "simulate" not in marker.kwargs:
        return default
    simulate = bool(marker.kwargs["simulate"])
    if default.options.simulate == simulate:
        return default
    servers: _Servers = request.getfixturevalue("kubeloop_servers")
    return servers.get(simulate)


#: Errors the loops a test watches reported while it ran (see ``pytest_runtest_call``).
_LOOP_ERRORS = pytest.StashKey[list[str]]()


def _running_servers() -> set[ServerThread]:
    """The embedded servers running in this process (none unless the kit's server was loaded)."""
    server_threads = sys.modules.get(_SERVER_THREADS)
    return set(server_threads.running) if server_threads is not None else set()


def _server_errors_since(seen: dict[ServerThread, int]) -> list[str]:
    return [
        error
        for server in dict.fromkeys([*seen, *_running_servers()])
        for error in server.loop_errors[seen.get(server, 0) :]
    ]


def _is_a_reconcile_failure(error: BaseException) -> bool:
    """A failed ``assert`` or pytest check in a reconcile, or a bug (``controller.PANICS``): not
    what a reconciler raises on purpose (a failed call, an error it means to retry)."""
    from kubeloop import errors
    from kubeloop.controller import controller as controller_module

    outcome = getattr(sys.modules.get("_pytest.outcomes"), "OutcomeException", None)
    if isinstance(outcome, type) and isinstance(error, outcome):
        return True
    return isinstance(error, controller_module.PANICS) and not isinstance(error, errors.APIError)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """The test fails if, while it ran, a running embedded server's loop or the test's own loop
    (with ``kube_client``) reported an error nobody handled, or a reconcile failed an ``assert``
    or a pytest check, or hit a bug (a ``TypeError``, ``KeyError``, ...): the controller logs and
    retries those, and the test would pass without them noticed. A test that means its reconciles
    to raise such errors says so: ``@pytest.mark.kubeloop(reconcile_failures=True)``."""
    seen = {server: len(server.loop_errors) for server in _running_servers()}
    reported = item.stash.setdefault(_LOOP_ERRORS, [])
    failed: list[str] = []

    def listen(controller: str, request: Request, error: BaseException) -> None:
        if _is_a_reconcile_failure(error):
            failed.append(f"{controller}: reconcile {request}: {type(error).__name__}: {error}")

    # Listened to even when not loaded yet: a test may be the first to import the controller.
    from kubeloop.controller import controller as controller_module

    controller_module.failure_listeners.append(listen)
    try:
        result = yield
    finally:
        controller_module.failure_listeners.remove(listen)
    new = [*_server_errors_since(seen), *reported]
    reported.clear()
    if new:
        pytest.fail(
            "an event loop reported errors nobody handled:\n" + "\n".join(dict.fromkeys(new)), pytrace=False
        )
    marker = item.get_closest_marker("kubeloop")
    if failed and not (marker is not None and marker.kwargs.get("reconcile_failures")):
        pytest.fail(
            "a reconcile failed while the test ran (the controller retried it; mark the test "
            "kubeloop(reconcile_failures=True) if it means to):\n" + "\n".join(dict.fromkeys(failed)),
            pytrace=False,
        )
    return result


@pytest.fixture
async def kube_client(
    kube_apiserver: ServerThread, request: pytest.FixtureRequest
) -> AsyncIterator[APIClient]:
    """An async :class:`~kubeloop.APIClient` of the session's server, closed after the test. While
    the test runs, what its loop reports unhandled (a task's exception nobody retrieved, a
    callback that raised) fails it."""
    from kubeloop.client.config import load_kubeconfig
    from kubeloop.client.rest import APIClient
    from kubeloop.testing.serverthread import unhandled_error_text

    loop = asyncio.get_running_loop()
    reported = request.node.stash.setdefault(_LOOP_ERRORS, [])
    previous = loop.get_exception_handler()

    def unhandled(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        reported.append(unhandled_error_text(context))
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(unhandled)
    server = _server_of(request, kube_apiserver)
    try:
        async with APIClient(load_kubeconfig(server.kubeconfig)) as client:
            yield client
    finally:
        loop.set_exception_handler(previous)


@pytest.fixture
async def kube_namespace(kube_client: APIClient) -> str:
    """The name of a namespace created for this test alone."""
    name = f"test-{next(_namespaces)}"
    await kube_client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


@pytest.fixture(scope="session")
def kube_operator_module(request: pytest.FixtureRequest) -> tuple[ModuleType, str] | None:
    """The module ``kubeloop_setup`` names and its setup function's name, loaded once per
    session (a file is executed once); None when the configuration names none."""
    from kubeloop.manager.operatortarget import TargetError, load_target

    target = str(request.config.getini("kubeloop_setup") or "")
    if not target:
        return None
    try:
        return load_target(target)
    except TargetError as error:
        pytest.fail(f"kubeloop_setup = {target!r}: {error}", pytrace=False)


@pytest.fixture
def kube_setup(request: pytest.FixtureRequest, kube_operator_module: tuple[ModuleType, str] | None) -> Setup:
    """The operator's ``setup(manager)``: the ``kubeloop_setup`` configuration value
    (``module:function``, a file or a folder with main.py) loaded. Override the fixture to
    hand another."""
    from kubeloop.manager.operatortarget import TargetError, setup_of

    target = str(request.config.getini("kubeloop_setup") or "")
    if kube_operator_module is None:
        pytest.fail(
            'kube_operator runs the operator\'s setup: set kubeloop_setup = "module:function" in the pytest '
            "configuration, or define a kube_setup fixture returning it",
            pytrace=False,
        )
    try:
        return setup_of(target, *kube_operator_module)
    except TargetError as error:
        pytest.fail(f"kubeloop_setup = {target!r}: {error}", pytrace=False)


@pytest.fixture
async def kube_operator(
    kube_client: APIClient,
    kube_namespace: str,
    kube_setup: Setup,
    kube_operator_module: tuple[ModuleType, str] | None,
) -> AsyncIterator[Manager]:
    """The operator running: ``kube_setup`` in a started manager of ``kube_client`` whose cache
    sees ``kube_namespace``, with the CRDs installed of the models ``kubeloop_setup``'s module
    defines or imports (else the setup's own module's) and of those the setup watches, owns or
    admits, and its webhooks (if it registers any) served and installed into the server while
    the test runs; stopped after the test. A kind the server does not serve fails the test at
    once, naming it."""
    from kubeloop.client.crdinstall import install_crds
    from kubeloop.client.preflight import unserved_kinds
    from kubeloop.manager.manager import Manager
    from kubeloop.manager.operatortarget import module_crds, run_setup
    from kubeloop.testing.installedwebhooks import webhooks_installed
    from kubeloop.webhook.server import WebhookServer

    if kube_operator_module is not None:
        module: ModuleType | None = kube_operator_module[0]
    else:
        module = sys.modules.get(getattr(kube_setup, "__module__", "") or "")
    manager = Manager(kube_client, namespace=kube_namespace, webhook_server=WebhookServer(port=0))
    run_setup(kube_setup, manager)
    crds = module_crds(module, manager)
    if crds:
        await install_crds(kube_client, *crds)
    # A kind the server does not serve would hold the cache's sync for its whole timeout (2 min).
    unserved = await unserved_kinds(kube_client, [gvk for gvk, _ in manager.cache.informers])
    if unserved:
        pytest.fail(
            f"kube_operator: the setup uses a kind the server does not serve: {'; '.join(unserved)}",
            pytrace=False,
        )
    async with manager:
        if not manager.webhook_server.webhooks:
            yield manager
            return
        async with webhooks_installed(kube_client, manager):
            yield manager
