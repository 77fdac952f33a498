"""Connection timeouts: no client holds the server's resources by going slow or silent.

kube-apiserver's Go server reads request headers within 32 s (``ReadHeaderTimeout``), closes
keep-alive connections idle for 90 s (``IdleTimeout``) and ends a request that is not done in 60 s
(``--request-timeout``; watches are long-running and exempt). aiohttp alone has only a keep-alive
timer, so every connection here is wrapped in a :class:`_GuardedProtocol` that a
:class:`ConnectionWatchdog` sweeps once a second:

- a connection that has not sent a complete request head ``header`` seconds after it opened or
  after its last response (slowloris) is closed;
- a keep-alive connection idle for ``idle`` seconds is closed;
- a connection whose client has taken nothing of a response for ``write`` seconds (the send
  buffer full and not shrinking: a stalled or paused watcher) is aborted — a slow client that
  keeps reading a large answer is not;
- :func:`request_timeout_middleware` answers 504 to a request (its body included) that takes more
  than ``request`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import sys
import termios
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast

import orjson
from aiohttp import web
from aiohttp.typedefs import Middleware

from kubeloop import errors
from kubeloop.lifecycle import cancel_and_wait

log = logging.getLogger("kubeloop.apiserver.http.connections")


@dataclass(frozen=True)
class ConnectionTimeouts:
    """Seconds; the defaults are kube-apiserver's."""

    #: From connecting (or the previous response) to a complete request head.
    header: float = 32.0
    #: A keep-alive connection waiting for its next request.
    idle: float = 90.0
    #: A request from its head to its answer (not watches).
    request: float = 60.0
    #: A blocked response the client takes nothing of.
    write: float = 60.0


class _GuardedProtocol(asyncio.Protocol):
    """aiohttp's protocol for one connection, with what the watchdog needs to know about it."""

    def __init__(self, inner: asyncio.Protocol, watchdog: ConnectionWatchdog) -> None:
        self.inner = inner
        self.watchdog = watchdog
        self.transport: asyncio.Transport | None = None
        now = time.monotonic()
        self.idle_since = now
        self.received_while_idle = 0
        self.active_requests = 0
        self.served = 0
        self.write_blocked_since: float | None = None
        #: When the client last took some of a blocked response (the send buffer shrank).
        self.progress_at = now
        self._buffered = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport subclasses
        self.watchdog.connections[self.transport] = self
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self.active_requests:
            self.received_while_idle += len(data)
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is not None:
            self.watchdog.connections.pop(self.transport, None)
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.write_blocked_since = self.progress_at = time.monotonic()
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.write_blocked_since = None
        self.inner.resume_writing()

    def stalled_for(self, now: float) -> float:
        """How long a blocked response has gone without the client taking any of it."""
        if self.write_blocked_since is None or self.transport is None:
            return 0.0
        buffered = self.transport.get_write_buffer_size() + _kernel_unsent(self.transport)
        if buffered < self._buffered:
            self.progress_at = now
        self._buffered = buffered
        return now - self.progress_at

    def request_started(self) -> None:
        self.active_requests += 1

    def request_finished(self) -> None:
        self.active_requests -= 1
        self.served += 1
        if not self.active_requests:
            self.idle_since = time.monotonic()
            self.received_while_idle = 0

    def overdue(self, timeouts: ConnectionTimeouts, now: float) -> str | None:
        """Why this connection should be closed now, if it should."""
        if self.stalled_for(now) > timeouts.write:
            return f"the client read nothing for {timeouts.write:g}s"
        if self.active_requests:
            return None
        waited = now - self.idle_since
        if (self.received_while_idle or not self.served) and waited > timeouts.header:
            return f"no complete request head within {timeouts.header:g}s"
        if waited > timeouts.idle:
            return f"idle for {timeouts.idle:g}s"
        return None


def _kernel_unsent(transport: asyncio.BaseTransport) -> int:
    """Bytes the kernel still holds for the peer (Linux ``SIOCOUTQ``; 0 where unknown). A client
    reading slowly drains this first: the transport's own buffer may not move for seconds."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        return int.from_bytes(fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"), sys.byteorder)
    except (OSError, ValueError):
        return 0


class ConnectionWatchdog:
    """Wraps each connection's protocol and closes the ones that overstay (see the module docs)."""

    def __init__(self, timeouts: ConnectionTimeouts) -> None:
        self.timeouts = timeouts
        self.connections: dict[asyncio.Transport, _GuardedProtocol] = {}
        self._task: asyncio.Task[None] | None = None

    def protocol_factory(self, make: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        return lambda: _GuardedProtocol(make(), self)

    def start(self) -> None:
        self._task = asyncio.create_task(self._sweep(), name="kubeloop-connection-watchdog")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None

    def guard_of(self, request: web.Request) -> _GuardedProtocol | None:
        transport = request.transport
        return self.connections.get(transport) if transport is not None else None

    async def _sweep(self) -> None:
        timeouts = self.timeouts
        period = max(0.05, min(1.0, timeouts.header / 4, timeouts.idle / 4, timeouts.write / 4))
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for transport, guard in list(self.connections.items()):
                reason = guard.overdue(timeouts, now)
                if reason is None:
                    continue
                log.debug("closing a connection from %s: %s", transport.get_extra_info("peername"), reason)
                self.connections.pop(transport, None)
                if guard.write_blocked_since is not None:
                    transport.abort()  # drop what it would not read
                else:
                    transport.close()


def is_long_running(request: web.Request) -> bool:
    """Watches stream for as long as they are asked to (upstream's long-running requests)."""
    return request.query.get("watch", "").lower() in ("1", "true") or "/watch/" in request.path


def request_timeout_middleware(watchdog: ConnectionWatchdog) -> Middleware:
    """Marks each connection busy while it has a request, and bounds non-watch requests."""

    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        guard = watchdog.guard_of(request)
        if guard is None:
            return await _bounded(request, handler, watchdog.timeouts.request)
        guard.request_started()
        try:
            response = await _bounded(request, handler, watchdog.timeouts.request)
            # Write the answer here, so that the connection counts as busy until it is out: a
            # large list to a slow (but reading) client must not look idle and be cut off.
            if not response.prepared:
                await response.prepare(request)
                await response.write_eof()
            return response
        finally:
            guard.request_finished()

    return middleware


async def _bounded(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]], seconds: float
) -> web.StreamResponse:
    """The handler's answer, or 504 when a request that is not a watch takes over ``seconds``."""
    if is_long_running(request):
        return await handler(request)
    deadline = asyncio.timeout(seconds)
    try:
        async with deadline:
            return await handler(request)
    except TimeoutError:
        if not deadline.expired():
            raise
    error = errors.Timeout(f"Timeout: request did not complete within the allotted timeout of {seconds:g}s")
    response = web.Response(
        body=orjson.dumps(error.to_status()), status=error.code, content_type="application/json"
    )
    with contextlib.suppress(Exception):
        response.force_close()
    return response
