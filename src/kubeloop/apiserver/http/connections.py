"""Connection timeouts: no client holds the server's resources by going slow or silent.

kube-apiserver's Go server reads request headers within 32 s (``ReadHeaderTimeout``), closes
keep-alive connections idle for 90 s (``IdleTimeout``) and ends a request that is not done in 60 s
(``--request-timeout``; watches are long-running and exempt). Every connection here is a
:class:`ServerConnection` (which answers small requests itself and hands the rest to aiohttp,
whose only timer is keep-alive) that a :class:`ConnectionWatchdog` sweeps once a second:

- a connection that has not sent a complete request head ``header`` seconds after it opened or
  after its last response (slowloris) is closed;
- a keep-alive connection idle for ``idle`` seconds is closed;
- a connection whose client has taken nothing of a response for ``write`` seconds (the send
  buffer full and not shrinking: a stalled or paused watcher) is aborted — a slow client that
  keeps reading a large answer is not;
- a request that takes more than ``request`` seconds gets 504: on aiohttp's side through
  :func:`bounded` (:func:`request_timeout_middleware`, its body included); a small request
  whose body has not all come within ``request`` seconds of its head gets the 504 and the
  connection closes, and one whose answer takes longer is cut short by the sweep (so within a
  sweep period of the bound: a timer per request would be paid by every request).
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
from typing import TypeVar, cast

from aiohttp import web
from aiohttp.typedefs import Middleware

from kubeloop import errors
from kubeloop.apiserver.http import http1
from kubeloop.apiserver.http.http1 import BufferedRequest, HTTPRequest
from kubeloop.lifecycle import cancel_and_wait

log = logging.getLogger("kubeloop.apiserver.http.connections")
R = TypeVar("R", bound=HTTPRequest)
#: How long a stopping server lets the small requests it is answering finish.
SHUTDOWN_GRACE_SECONDS = 1.0


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


#: After the 431 for a head past its bound, how long the connection stays open after the client's
#: last bytes, which are read and dropped: closed with them unread, the kernel answers the client
#: with a reset that can overtake the 431 (Go's server waits 500 ms for the same reason).
REFUSED_LINGER_SECONDS = 0.5
#: While a request is answered, a client may send this much more before reading pauses.
MAX_PENDING_BYTES = 256 * 1024
#: Answers larger than this are written a slice of it at a time, the loop serving other
#: requests between slices: written whole, a 12 MB list was encrypted in one go, ~25 ms in which
#: nothing else was answered (``bench/stall.py``).
ANSWER_SLICE_BYTES = 256 * 1024

SmallRequestHandler = Callable[[BufferedRequest], Awaitable[web.StreamResponse]]


class ServerConnection(asyncio.Protocol):
    """One client connection: small API requests are read and answered here (see
    :mod:`~kubeloop.apiserver.http.http1`) until one that is not comes, and then aiohttp's
    protocol takes the connection for good; with what the watchdog needs to know about it."""

    def __init__(
        self,
        make_aiohttp: Callable[[], asyncio.Protocol],
        serve_small: SmallRequestHandler | None,
        watchdog: ConnectionWatchdog,
    ) -> None:
        self._make_aiohttp = make_aiohttp
        self._serve_small = serve_small
        #: aiohttp's protocol, once the connection is handed to it.
        self.inner: asyncio.Protocol | None = None
        self.watchdog = watchdog
        self.transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        now = time.monotonic()
        self.idle_since = now
        self.received_while_idle = 0
        #: When the first byte of the next request came (the head's bound counts from there).
        self.head_began = now
        self.active_requests = 0
        self.served = 0
        self.write_blocked_since: float | None = None
        #: When the client last took some of a blocked response (the send buffer shrank).
        self.progress_at = now
        self._buffered = 0
        self._unread = bytearray()
        self._head: http1.RequestHead | None = None  # read, waiting for the rest of its body
        self._answering: asyncio.Task[None] | None = None
        #: When the request being answered was read whole, and whether the sweep cut it short.
        self.answer_started = 0.0
        self._timed_out = False
        self._body_timer: asyncio.TimerHandle | None = None
        self._reading_paused = False
        self._lost = False
        #: After a refused head: closes the connection once the client has been quiet a while.
        self._linger: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport subclasses
        self.watchdog.connections[self.transport] = self
        if self._serve_small is None:
            self._hand_over()

    def data_received(self, data: bytes) -> None:
        if not self.active_requests:
            if not self.received_while_idle:
                self.head_began = time.monotonic()
            self.received_while_idle += len(data)
        if self.inner is not None:
            self.inner.data_received(data)
            return
        if self._linger is not None:  # refused: what still comes is dropped
            self._linger.cancel()
            self._linger = self._running_loop().call_later(REFUSED_LINGER_SECONDS, self._close)
            return
        self._unread += data
        if self._answering is None:
            self._read_request()
        if self.inner is None:
            self._limit_intake()

    def eof_received(self) -> bool | None:
        if self.inner is not None:
            return self.inner.eof_received()
        return None  # the transport closes; a request being answered finishes, unheard

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if self._linger is not None:
            self._linger.cancel()
        if self._body_timer is not None:
            self._body_timer.cancel()
        if self.transport is not None:
            self.watchdog.connections.pop(self.transport, None)
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.write_blocked_since = self.progress_at = time.monotonic()
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.write_blocked_since = None
        if self.inner is not None:
            self.inner.resume_writing()
        elif self._answering is None:
            self._read_request()

    # ------------------------------------------------------------ small requests

    def _read_request(self) -> None:
        """Start answering the next complete request in the buffer, or hand the connection to
        aiohttp. Requests are answered one at a time, in order; none while the client is not
        taking the answers."""
        transport = self.transport
        assert transport is not None and self._serve_small is not None
        if (
            self._lost
            or transport.is_closing()
            or self.inner is not None
            or self.write_blocked_since is not None
        ):
            return
        try:
            head = self._head or http1.read_head(self._unread)
        except http1.NotForUs as reason:
            log.debug(
                "%s: aiohttp serves this connection from here (%s)",
                transport.get_extra_info("peername"),
                reason,
            )
            self._hand_over()
            return
        except http1.HeadTooLarge:
            peer = transport.get_extra_info("peername")
            log.debug("%s: a request head past %d bytes: 431", peer, http1.MAX_HEAD_BYTES)
            self._unread.clear()
            transport.write(http1.HEAD_TOO_LARGE_ANSWER)
            self._linger = self._running_loop().call_later(REFUSED_LINGER_SECONDS, self._close)
            return
        if head is None:
            self._limit_intake()  # an incomplete head is read on, however long (up to its bound)
            return
        end = head.size + head.content_length
        if self._head is None:
            self.request_started()  # its body is part of the request: the request bound covers it
        if len(self._unread) < end:
            if self._head is None:
                self._head = head
                self._body_timer = self._running_loop().call_later(
                    self.watchdog.timeouts.request, self._body_overdue
                )
            self._limit_intake()
            return
        self._head = None
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        body = bytes(self._unread[head.size : end])
        del self._unread[:end]
        task = self._running_loop().create_task(
            self._answer(http1.BufferedRequest(head, body, transport))
        )
        self._answering = task
        self._limit_intake()
        self.answer_started = time.monotonic()
        self._timed_out = False
        self.watchdog.answering.add(task)
        task.add_done_callback(self.watchdog.answering.discard)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        """The connection's loop, kept: CPython 3.11's ``asyncio.get_running_loop`` asks the
        kernel for the process id at every call."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        return loop

    async def _answer(self, request: http1.BufferedRequest) -> None:
        assert self.transport is not None and self._serve_small is not None
        keep_alive = request.head.keep_alive
        body = b""
        try:
            try:
                response = await self._serve_small(request)
                if not isinstance(response, web.Response):
                    raise TypeError(f"a small request was answered with a {type(response).__name__}")
                keep_alive = keep_alive and response.keep_alive is not False
                data, body = http1.response_parts(response, keep_alive=keep_alive)
            except asyncio.CancelledError:
                if not self._timed_out:
                    raise  # the server is stopping
                self._timed_out = False
                keep_alive = False
                seconds = self.watchdog.timeouts.request
                data = _status_answer(
                    errors.Timeout(
                        f"Timeout: request did not complete within the allotted timeout of {seconds:g}s"
                    )
                )
            except Exception as exc:
                log.exception("internal error serving %s %s", request.method, request.path)
                keep_alive = False
                data = _status_answer(errors.InternalError(f"Internal error occurred: {exc}"))
            if len(body) <= ANSWER_SLICE_BYTES:
                if not self.transport.is_closing():
                    self.transport.write(data + body if body else data)
            else:
                await self._write_in_slices(data, body)
        finally:
            self._answering = None
            self.request_finished()
            if not keep_alive:
                self.transport.close()
        if keep_alive:
            self._read_request()

    async def _write_in_slices(self, head: bytes, body: bytes) -> None:
        """Write a large answer a slice at a time, other requests served between slices; an
        answer cut short (the server stopping) closes the connection, which cannot be reused."""
        assert self.transport is not None
        transport = self.transport
        try:
            if transport.is_closing():
                return
            transport.write(head)
            for start in range(0, len(body), ANSWER_SLICE_BYTES):
                await asyncio.sleep(0)
                if transport.is_closing():
                    return
                transport.write(body[start : start + ANSWER_SLICE_BYTES])
        except BaseException:
            transport.close()
            raise

    def _limit_intake(self) -> None:
        """Requests sent ahead of their answers wait here up to a bound: past it the connection
        stops reading until half of it has been answered. Only while a request is being answered
        or its answer waits for the client to take it: otherwise the buffer holds no whole
        request, and the one coming (its head may be up to
        :data:`~kubeloop.apiserver.http.http1.MAX_HEAD_BYTES`) is read on."""
        assert self.transport is not None
        pending = len(self._unread)
        holding = self._answering is not None or self.write_blocked_since is not None
        if not self._reading_paused and pending > MAX_PENDING_BYTES and holding:
            self.transport.pause_reading()
            self._reading_paused = True
        elif self._reading_paused and (pending <= MAX_PENDING_BYTES // 2 or not holding):
            self.transport.resume_reading()
            self._reading_paused = False

    def _body_overdue(self) -> None:
        """A request whose body has not all come within the request bound: 504, and the connection closes."""
        self._body_timer = None
        if self.transport is None or self.transport.is_closing():
            return
        seconds = self.watchdog.timeouts.request
        error = errors.Timeout(
            f"Timeout: request did not complete within the allotted timeout of {seconds:g}s"
        )
        self.transport.write(_status_answer(error))
        self.transport.close()

    def _hand_over(self) -> None:
        """aiohttp's protocol takes the connection, with what it has sent so far."""
        assert self.transport is not None
        inner = self._make_aiohttp()
        self.inner = inner
        self._head = None
        inner.connection_made(self.transport)
        if self.write_blocked_since is not None:
            inner.pause_writing()
        if self._reading_paused:
            self.transport.resume_reading()
            self._reading_paused = False
        if self._unread:
            data = bytes(self._unread)
            self._unread.clear()
            inner.data_received(data)

    # ------------------------------------------------------------ the watchdog's view

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

    def time_out(self, timeouts: ConnectionTimeouts, now: float) -> None:
        """Cut short the small request being answered when it has taken over the request bound:
        it is answered 504 and the connection closes."""
        task = self._answering
        if task is not None and not self._timed_out and now - self.answer_started > timeouts.request:
            self._timed_out = True
            task.cancel()

    def overdue(self, timeouts: ConnectionTimeouts, now: float) -> str | None:
        """Why this connection should be closed now, if it should."""
        if self.stalled_for(now) > timeouts.write:
            return f"the client read nothing for {timeouts.write:g}s"
        if self.active_requests or self.write_blocked_since is not None:
            return None  # a response the client is still taking is not idleness
        if self.received_while_idle:  # a request is coming: its head has a bound from its first byte
            if now - self.head_began > timeouts.header:
                return f"no complete request head within {timeouts.header:g}s"
            return None
        waited = now - self.idle_since
        if (waited > timeouts.header and not self.served) or waited > timeouts.idle:
            if self.transport is not None and _kernel_unread(self.transport):
                # A request arrived that the loop has not read yet (the sweep ran first): closing
                # now would reset the connection under it. It is read next, and timed from there.
                return None
            if not self.served:
                return f"no complete request head within {timeouts.header:g}s"
            return f"idle for {timeouts.idle:g}s"
        return None


def _status_answer(error: errors.APIError) -> bytes:
    """A Status answer that closes the connection, as bytes."""
    response = web.Response(body=error.to_json(), status=error.code, content_type="application/json")
    return http1.encode_response(response, keep_alive=False)


def _kernel_unread(transport: asyncio.BaseTransport) -> int:
    """Bytes the kernel holds from the peer that the loop has not read yet (0 where unknown)."""
    return _socket_queue(transport, termios.FIONREAD)


def _kernel_unsent(transport: asyncio.BaseTransport) -> int:
    """Bytes the kernel still holds for the peer (Linux ``SIOCOUTQ``; 0 where unknown). A client
    reading slowly drains this first: the transport's own buffer may not move for seconds."""
    return _socket_queue(transport, termios.TIOCOUTQ)


def _socket_queue(transport: asyncio.BaseTransport, request: int) -> int:
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        return int.from_bytes(fcntl.ioctl(sock.fileno(), request, b"\0\0\0\0"), sys.byteorder)
    except (OSError, ValueError):
        return 0


class ConnectionWatchdog:
    """Wraps each connection's protocol and closes the ones that overstay (see the module docs)."""

    def __init__(self, timeouts: ConnectionTimeouts) -> None:
        self.timeouts = timeouts
        self.connections: dict[asyncio.Transport, ServerConnection] = {}
        #: The small requests being answered (their connections own one each; stop ends them).
        self.answering: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None

    def protocol_factory(
        self, make_aiohttp: Callable[[], asyncio.Protocol], serve_small: SmallRequestHandler | None
    ) -> Callable[[], asyncio.Protocol]:
        """Connections that answer small requests with ``serve_small`` (None: all through aiohttp)."""
        return lambda: ServerConnection(make_aiohttp, serve_small, self)

    def start(self) -> None:
        self._task = asyncio.create_task(self._sweep(), name="kubeloop-connection-watchdog")

    async def stop(self) -> None:
        """Stop sweeping; give the small requests being answered a moment, then end them; close
        the connections aiohttp does not own (its runner closes its own)."""
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None
        if self.answering:
            await asyncio.wait(list(self.answering), timeout=SHUTDOWN_GRACE_SECONDS)
            await cancel_and_wait(list(self.answering))
        for transport, connection in list(self.connections.items()):
            if connection.inner is None:
                transport.close()

    def guard_of(self, request: HTTPRequest) -> ServerConnection | None:
        transport = request.transport
        return self.connections.get(transport) if transport is not None else None

    async def _sweep(self) -> None:
        timeouts = self.timeouts
        period = max(
            0.05,
            min(1.0, timeouts.header / 4, timeouts.idle / 4, timeouts.write / 4, timeouts.request / 4),
        )
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for transport, guard in list(self.connections.items()):
                guard.time_out(timeouts, now)
                reason = guard.overdue(timeouts, now)
                if reason is None:
                    continue
                log.debug("closing a connection from %s: %s", transport.get_extra_info("peername"), reason)
                self.connections.pop(transport, None)
                if guard.write_blocked_since is not None:
                    transport.abort()  # drop what it would not read
                else:
                    transport.close()


#: Subresources whose requests stream for as long as the client wants (upstream's).
LONG_RUNNING_SUBRESOURCES = frozenset(("attach", "exec", "log", "portforward", "proxy"))


def is_long_running(request: HTTPRequest) -> bool:
    """Watches, and a pod's logs, exec, attach and port-forwards, stream for as long as they are
    asked to (upstream's long-running requests): no request timeout bounds them."""
    if request.query.get("watch", "").lower() in ("1", "true") or "/watch/" in request.path:
        return True
    parts = request.path.rstrip("/").split("/")
    return len(parts) >= 4 and parts[-1] in LONG_RUNNING_SUBRESOURCES and parts[-3] == "pods"


def request_timeout_middleware(watchdog: ConnectionWatchdog) -> Middleware:
    """Marks each connection busy while it has a request, and bounds non-watch requests."""

    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        guard = watchdog.guard_of(request)
        if guard is None:
            return await bounded(request, handler, watchdog.timeouts.request)
        guard.request_started()
        try:
            response = await bounded(request, handler, watchdog.timeouts.request)
            # Write the answer here, so that the connection counts as busy until it is out: a
            # large list to a slow (but reading) client must not look idle and be cut off.
            if not response.prepared:
                await response.prepare(request)
                await response.write_eof()
            return response
        finally:
            guard.request_finished()

    return middleware


async def bounded(
    request: R, handler: Callable[[R], Awaitable[web.StreamResponse]], seconds: float
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
    response = web.Response(body=error.to_json(), status=error.code, content_type="application/json")
    with contextlib.suppress(Exception):
        response.force_close()
    return response
