"""An embedded API server on its own event loop in a daemon thread, so that blocking clients
(kubectl, the official client, requests) and async ones on the test's loop can all use it.

What goes wrong on that loop unseen — a task that dies with an exception nobody awaits, a callback
that raises — is logged as asyncio logs it and also kept in ``ServerThread.loop_errors``; the
pytest plugin fails the test during which one appeared.
"""

from __future__ import annotations

import asyncio
import pathlib
import threading
import traceback
import weakref
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from kubeloop.apiserver.server import APIServer, ServerOptions
from kubeloop.testing.settle import settled

T = TypeVar("T")


def unhandled_error_text(context: dict[str, Any]) -> str:
    """What an event loop's exception handler was told, with the exception's traceback."""
    exception = context.get("exception")
    text = str(context.get("message") or "unhandled error")
    if isinstance(exception, BaseException):
        text += "\n" + "".join(traceback.format_exception(exception))
    return text


#: Every ServerThread started and not yet stopped (the plugin checks their loops after each test).
running: weakref.WeakSet[ServerThread] = weakref.WeakSet()


class ServerThread:
    """Runs an APIServer on a private event loop in a daemon thread."""

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(self._unhandled)
        self.server = APIServer(options)
        #: What the loop reported unhandled (an exception never retrieved from a task, a callback
        #: that raised), one text with its traceback each.
        self.loop_errors: list[str] = []
        self._thread = threading.Thread(target=self.loop.run_forever, name="apiserver", daemon=True)

    def _unhandled(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        self.loop_errors.append(unhandled_error_text(context))
        loop.default_exception_handler(context)

    def start(self) -> ServerThread:
        """Start the thread and the server; returns once it serves."""
        self._thread.start()
        self.call(self.server.start())
        running.add(self)
        return self

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the server's loop and wait (up to 60 s) for its result."""
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout=60)

    def stop(self) -> None:
        """Stop the server and its thread (a second call does nothing)."""
        running.discard(self)
        if not self._thread.is_alive():
            return
        try:
            self.call(self.server.stop())
            self.call(self._close_leftover_connections())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)

    async def _close_leftover_connections(self) -> None:
        # A connection accepted as the server stopped, its TLS handshake unfinished, belongs to
        # no protocol that the server's shutdown closes; in a process that exits the kernel would
        # close it, but this thread's loop just stops, and its client would wait on it forever.
        # Every transport still open on this private loop is such a connection.
        transports = getattr(self.loop, "_transports", None)
        if not transports:
            return
        for transport in list(transports.values()):
            if isinstance(transport, asyncio.Transport) and not transport.is_closing():
                transport.abort()
        for _ in range(3):  # abort closes the socket a loop iteration later
            await asyncio.sleep(0)

    async def settled(self, *, timeout: float = 30.0) -> None:
        """Wait (from any event loop) until the server's own control loops — the garbage
        collector, the namespace controller, the simulated workloads — have nothing left to do
        and their caches hold what the server holds (``kubeloop.testing.settled``); from a
        blocking test, ``asyncio.run(server.settled())``."""
        controllers = self.server.controllers
        if controllers is None:
            return
        await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(settled(controllers, timeout=timeout), self.loop)
        )

    @property
    def url(self) -> str:
        """``https://127.0.0.1:PORT``."""
        return self.server.url

    @property
    def token(self) -> str:
        """The admin's bearer token."""
        assert self.server.credentials is not None
        return self.server.credentials.admin_token

    @property
    def ca_file(self) -> str:
        """A file holding the server's CA certificate (PEM)."""
        path = self.server.kubeconfig_path.parent / "ca.crt"
        if not path.exists():
            assert self.server.credentials is not None
            path.write_bytes(self.server.credentials.ca_cert_pem)
        return str(path)

    @property
    def kubeconfig(self) -> pathlib.Path:
        """The kubeconfig for kubectl and clients (``KUBECONFIG=...``)."""
        return self.server.kubeconfig_path


def start_server(data_dir: pathlib.Path | None = None, **overrides: Any) -> ServerThread:
    """A started server: in memory, or durable in ``data_dir``; any ServerOptions overridden."""
    settings: dict[str, Any] = {
        "memory": data_dir is None,
        "data_dir": data_dir,
        "port": 0,
        "kubeconfig": (data_dir / "kubeconfig") if data_dir is not None else None,
    }
    return ServerThread(ServerOptions(**{**settings, **overrides})).start()
