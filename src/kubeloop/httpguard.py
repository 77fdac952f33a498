"""A connection guard for the operator's own HTTP servers: no client holds one by going slow.

The webhook server, the metrics and probe endpoints and the console are aiohttp servers, whose
only timer is keep-alive: a client that trickles a request head a byte at a time (slowloris)
holds a connection for as long as it likes, and enough of them exhaust the process's file
descriptors. With a webhook whose ``failurePolicy`` is ``Fail``, that blocks every write of its
kinds. :class:`GuardedSite` serves a runner as ``aiohttp.web.TCPSite`` does, with the limits the
embedded API server keeps (kube-apiserver's):

- a request head must be complete ``header`` seconds (32) after its first byte — or after the
  connection opened, for its first request; over TLS the handshake must be done within as long;
- a keep-alive connection idle for ``idle`` seconds (90) is closed (aiohttp's
  ``keepalive_timeout``, which :func:`guarded_runner` sets);
- at most ``max_connections`` (1024) are open at once; one more is closed as it is accepted.

The guard reads the bytes as they come to find where each head ends and skips a body of the
length its head names; a chunked body is not followed, and such a connection is no longer timed
(a slowloris needs a head, and a head is all it is timed on).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kubeloop.lifecycle import cancel_and_wait

log = logging.getLogger("kubeloop.httpguard")

_END_OF_HEAD = b"\r\n\r\n"
_LENGTH = re.compile(rb"^content-length:\s*(\d+)\s*$", re.I | re.M)
_CHUNKED = re.compile(rb"^transfer-encoding:.*chunked", re.I | re.M)
#: A head longer than this is aiohttp's to refuse; the guard stops looking for its end.
_MAX_HEAD = 64 * 1024


@dataclass(frozen=True)
class ConnectionLimits:
    """Seconds, and connections; the defaults are kube-apiserver's (``ReadHeaderTimeout``,
    ``IdleTimeout``) and a cap well under a process's descriptors."""

    header: float = 32.0
    idle: float = 90.0
    max_connections: int = 1024


def guarded_runner(app: web.Application, limits: ConnectionLimits | None = None) -> web.AppRunner:
    """An ``AppRunner`` whose keep-alive connections close after ``limits.idle`` seconds."""
    return web.AppRunner(app, access_log=None, keepalive_timeout=(limits or ConnectionLimits()).idle)


class _Connection(asyncio.Protocol):
    """aiohttp's protocol for one connection, with the guard watching its request heads."""

    def __init__(self, inner: Any, guard: _Guard) -> None:
        self.inner = inner
        self.guard = guard
        self.transport: asyncio.BaseTransport | None = None
        self.refused = False
        #: When the head being read must be complete (None: not reading one).
        self.deadline: float | None = None
        self.head = b""
        self.body_left = 0
        self.followed = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        if len(self.guard.open) >= self.guard.limits.max_connections:
            self.refused = True
            log.warning("refused a connection: %d are open", len(self.guard.open))
            transport.close()
            return
        self.guard.open.add(self)
        self.deadline = time.monotonic() + self.guard.limits.header
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        if self.followed:
            self._follow(data)
        self.inner.data_received(data)

    def _follow(self, data: bytes) -> None:
        while data and self.followed:
            if self.body_left:
                taken = min(self.body_left, len(data))
                self.body_left -= taken
                data = data[taken:]
                continue
            if self.deadline is None:  # the first byte of a new head
                self.deadline = time.monotonic() + self.guard.limits.header
            searched = len(self.head)
            self.head += data
            end = self.head.find(_END_OF_HEAD, max(0, searched - 3))
            if end < 0:
                if len(self.head) > _MAX_HEAD:
                    self.followed = False  # too long: aiohttp refuses it
                return
            head, data = self.head[: end + 4], self.head[end + 4 :]
            self.head = b""
            self.deadline = None
            if _CHUNKED.search(head):
                self.followed = False
                return
            length = _LENGTH.search(head)
            self.body_left = int(length.group(1)) if length else 0

    def eof_received(self) -> bool | None:
        if self.refused:
            return None
        result: bool | None = self.inner.eof_received()
        return result

    def connection_lost(self, exc: Exception | None) -> None:
        if self.refused:
            return
        self.guard.open.discard(self)
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if not self.refused:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if not self.refused:
            self.inner.resume_writing()

    def late(self, now: float) -> bool:
        return self.deadline is not None and now > self.deadline


class _Guard:
    """The open connections of one site, and the sweep that closes the late ones."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.open: set[_Connection] = set()
        self._sweeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep(), name="http connection guard")

    async def stop(self) -> None:
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            await cancel_and_wait([sweeper])

    async def _sweep(self) -> None:
        period = min(1.0, self.limits.header / 4)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for connection in [c for c in self.open if c.late(now)]:
                log.warning(
                    "closed a connection whose request head did not come within %gs", self.limits.header
                )
                if connection.transport is not None:
                    connection.transport.close()
                connection.deadline = None


class GuardedSite(web.TCPSite):
    """``aiohttp.web.TCPSite`` with the guard's limits on every connection it accepts."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str | None = None,
        port: int | None = None,
        *,
        ssl_context: ssl.SSLContext | None = None,
        limits: ConnectionLimits | None = None,
    ) -> None:
        super().__init__(runner, host, port, ssl_context=ssl_context)
        self._guard = _Guard(limits or ConnectionLimits())

    @property
    def connections(self) -> int:
        """How many connections are open now."""
        return len(self._guard.open)

    async def start(self) -> None:
        await web.BaseSite.start(self)
        loop = asyncio.get_running_loop()
        server = self._runner.server
        assert server is not None
        guard = self._guard
        self._server = await loop.create_server(
            lambda: _Connection(server(), guard),
            self._host,
            self._port,
            ssl=self._ssl_context,
            # A TLS handshake is part of the first head's time, as Go's ReadHeaderTimeout counts
            # it (asyncio's own default would let a silent client hold the socket 60 s).
            ssl_handshake_timeout=guard.limits.header if self._ssl_context is not None else None,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port
        guard.start()

    async def stop(self) -> None:
        await self._guard.stop()
        with contextlib.suppress(RuntimeError):  # a site never started
            await super().stop()
