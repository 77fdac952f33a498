"""A lean HTTP/1.1 client for the API client: keep-alive connections on asyncio.

Nearly every request is a small exchange (a JSON body out, a JSON body back), and aiohttp's
client spends most of its CPU on one in its own layers (request and response objects, the
connector, the payload writers); this pool sends it with far less (docs/design/performance.md). A
watch is a GET whose body is a stream: :meth:`ConnectionPool.stream` hands its body over as it
arrives. The pool does what the API client needs and no more:

- one request at a time per connection, idle connections kept for reuse (HTTP/1.1 keep-alive)
  for up to a minute and dropped when the server closes them, answers with ``Connection:
  close`` or a body that runs to the end of the connection;
- bodies framed by ``Content-Length`` or chunked, ``gzip``/``deflate`` content decoded (asked
  for with ``Accept-Encoding: gzip`` as Go's transport does), no body for HEAD, 204 and 304,
  informational (1xx) answers skipped;
- a deadline over the whole exchange (connecting included); a connection whose exchange did not
  finish (timeout, cancellation, a malformed answer) is closed, never reused;
- a streamed body is read with flow control (the socket is paused while more than
  :data:`STREAM_HIGH_WATER` bytes wait unread); a stream takes an idle connection if there is
  one (sent again once on a new one if the server had closed it), and closes it when it ends;
- the write fence checked synchronously right before the request is handed to the socket, so a
  paused leader that resumes cannot send a write.

Failures are ``OSError`` subclasses (``ConnectionRefusedError``, ``ssl.SSLError``,
:class:`ServerDisconnectedError`, :class:`BadResponseError`) or ``TimeoutError``. A configuration
with a proxy goes through ``proxied`` (aiohttp) instead.
"""

from __future__ import annotations

import asyncio
import asyncio.selector_events
import asyncio.sslproto
import socket
import ssl
import time
import zlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, cast

from kubeloop.client.fence import check_write

#: Longest status line and headers accepted (Go's transport: 1 MiB; headers here are small).
MAX_HEAD_BYTES = 1 << 20
#: Idle connections kept per pool; more are closed when released.
MAX_IDLE = 64
#: An idle connection older than this is closed instead of reused: kube-apiserver closes them
#: after 90 s, and a request sent as the server closes its connection is lost (a POST is not
#: retried), so the pool lets them go well before.
MAX_IDLE_SECONDS = 60.0
#: Unread bytes of a streamed body past which the socket stops being read until they are.
STREAM_HIGH_WATER = 1 << 20
_NO_BODY_STATUS = frozenset({204, 304})


class ServerDisconnectedError(ConnectionError):
    """The server closed the connection before the answer was complete."""


class BadResponseError(ConnectionError):
    """The server's answer is not valid HTTP/1.1 (the connection is dropped)."""


class _HeaderLookup:
    """Header lookups of an answer whose ``headers`` are (lower-case name, value) pairs in order."""

    __slots__ = ()
    headers: tuple[tuple[str, str], ...]

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (lower case), None when absent."""
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def header_values(self, name: str) -> list[str]:
        """Every value of header ``name`` (lower case), in order."""
        return [value for key, value in self.headers if key == name]


@dataclass(frozen=True, slots=True)
class Response(_HeaderLookup):
    """An answer: its status, its headers (names in lower case, in order) and its whole body."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


class BodyStream(Protocol):
    """An answer whose body is read as it arrives (a watch): status and headers first."""

    status: int

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (lower case), None when absent."""

    def header_values(self, name: str) -> list[str]:
        """Every value of header ``name`` (lower case), in order."""

    async def read(self) -> bytes:
        """The body's bytes that arrived since the last read (waiting for some); b"" at its end."""

    async def read_all(self) -> bytes:
        """The rest of the body (an error answer's, say)."""

    def close(self) -> None:
        """Stop reading and close the connection."""


class _StreamedBody(_HeaderLookup):
    """The body of a streamed answer as :class:`_Connection` parses it, with flow control."""

    __slots__ = (
        "_connection",
        "_ended",
        "_error",
        "_paused",
        "_pieces",
        "_unread",
        "_waiter",
        "headers",
        "status",
    )

    def __init__(self, connection: _Connection, status: int, headers: tuple[tuple[str, str], ...]) -> None:
        self.status = status
        self.headers = headers
        self._connection = connection
        self._pieces: deque[bytes] = deque()
        self._unread = 0
        self._paused = False
        self._ended = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None

    async def read(self) -> bytes:
        while not self._pieces:
            if self._error is not None:
                raise self._error
            if self._ended:
                return b""
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        data = self._pieces.popleft() if len(self._pieces) == 1 else b"".join(self._pieces)
        self._pieces.clear()
        self._unread = 0
        if self._paused:
            self._paused = False
            transport = self._connection.transport
            if transport is not None and not transport.is_closing():
                transport.resume_reading()
        return data

    async def read_all(self) -> bytes:
        pieces = []
        while data := await self.read():
            pieces.append(data)
        return b"".join(pieces)

    def close(self) -> None:
        self._connection.close()
        self._end()  # a read waiting in another task ends

    # fed by the connection

    def _feed(self, data: bytes) -> None:
        self._pieces.append(data)
        self._unread += len(data)
        if self._unread > STREAM_HIGH_WATER and not self._paused:
            transport = self._connection.transport
            if transport is not None:
                self._paused = True
                transport.pause_reading()
        self._wake()

    def _end(self, error: BaseException | None = None) -> None:
        if self._ended or self._error is not None:
            return
        if error is None:
            self._ended = True
        else:
            self._error = error
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


@dataclass(slots=True)
class _Head:
    status: int
    headers: tuple[tuple[str, str], ...]
    keep_alive: bool


class _Connection(asyncio.Protocol):
    """One connection: parses the answer to the request in flight as bytes arrive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._buffer = bytearray()
        self._answer: asyncio.Future[Response] | None = None
        #: A streamed answer: its head is awaited here, then its body fed to ``_stream``.
        self._stream_head: asyncio.Future[_StreamedBody] | None = None
        self._stream: _StreamedBody | None = None
        self._no_body = False
        self._head: _Head | None = None
        self._length: int | None = None  # Content-Length, or None: chunked or until close
        self._chunked = False
        self._chunks: list[bytes] = []
        self._scan = 0  # where chunk parsing resumes in the buffer

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport subclasses

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._answer is not None or self._stream is not None or self._stream_head is not None:
            self._parse()

    def eof_received(self) -> bool:
        return False  # close the transport (and call connection_lost)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        cause = f": {exc}" if exc is not None else ""
        if self._stream_head is not None or self._stream is not None:
            self._lose_stream(cause)
            return
        answer = self._answer
        if answer is None or answer.done():
            return
        head = self._head
        if head is not None and self._length is None and not self._chunked:
            self._finish(bytes(self._buffer))  # a body that runs to the end of the connection
            return
        answer.set_exception(ServerDisconnectedError(f"the server closed the connection mid-answer{cause}"))

    # the exchange

    def send(self, request: bytes, no_body: bool) -> asyncio.Future[Response]:
        assert self._answer is None
        self._answer = asyncio.get_running_loop().create_future()
        self._write(request, no_body)
        return self._answer

    def send_streaming(self, request: bytes) -> asyncio.Future[_StreamedBody]:
        """Send ``request``; the future is the answer once its head is in, its body to be read."""
        assert self._answer is None and self._stream_head is None
        self._stream_head = asyncio.get_running_loop().create_future()
        self._write(request, no_body=False)
        return self._stream_head

    def _write(self, request: bytes, no_body: bool) -> None:
        """Send ``request`` with the parser set for its answer."""
        assert self.transport is not None
        self._no_body = no_body
        self._head = None
        self._length = None
        self._chunked = False
        self._chunks = []
        self._scan = 0
        self.transport.write(request)

    def _lose_stream(self, cause: str) -> None:
        error = ServerDisconnectedError(f"the server closed the connection mid-answer{cause}")
        waiting, self._stream_head = self._stream_head, None
        if waiting is not None and not waiting.done():
            waiting.set_exception(error)
        stream, self._stream = self._stream, None
        if stream is None:
            return
        if self._head is not None and self._length is None and not self._chunked:
            if self._buffer:
                stream._feed(bytes(self._buffer))
                self._buffer.clear()
            stream._end()  # a body that runs to the end of the connection
        else:
            stream._end(error)

    @property
    def idle_bytes(self) -> bool:
        """Whether bytes arrived while no request was in flight (the connection is not reusable)."""
        return bool(self._buffer)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _parse(self) -> None:
        try:
            while self._head is None:
                if not self._parse_head():
                    return
                if self._head is not None and self._stream_head is not None:
                    self._start_stream()
            if self._chunked:
                self._parse_chunks()
            elif self._stream is not None:
                self._stream_plain_body()
            elif self._length is not None and len(self._buffer) >= self._length:
                body = bytes(self._buffer[: self._length])
                del self._buffer[: self._length]
                self._finish(body)
        except BadResponseError as exc:
            answer = self._answer
            self._answer = None
            stream_head, self._stream_head = self._stream_head, None
            stream, self._stream = self._stream, None
            self.close()
            if answer is not None and not answer.done():
                answer.set_exception(exc)
            if stream_head is not None and not stream_head.done():
                stream_head.set_exception(exc)
            if stream is not None:
                stream._end(exc)

    def _start_stream(self) -> None:
        head, waiting = self._head, self._stream_head
        assert head is not None and waiting is not None
        encoding = next((value for key, value in head.headers if key == "content-encoding"), "identity")
        if encoding.strip().lower() != "identity":
            raise BadResponseError(f"the streamed answer's Content-Encoding {encoding!r} was not asked for")
        self._stream_head = None
        self._stream = _StreamedBody(self, head.status, head.headers)
        if not waiting.done():
            waiting.set_result(self._stream)
        else:
            self.close()  # nobody waits for it any more (timed out or cancelled)

    def _stream_plain_body(self) -> None:
        """Hand a streamed body framed by Content-Length (or by the connection's end) over."""
        stream = self._stream
        assert stream is not None
        if self._length is None:
            if self._buffer:
                stream._feed(bytes(self._buffer))
                self._buffer.clear()
            return
        if self._length and self._buffer:
            data = bytes(self._buffer[: self._length])
            del self._buffer[: len(data)]
            self._length -= len(data)
            stream._feed(data)
        if self._length == 0:
            self._end_stream()

    def _end_stream(self) -> None:
        stream, self._stream = self._stream, None
        assert stream is not None
        self.close()  # a streamed connection is never reused
        stream._end()

    def _parse_head(self) -> bool:
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise BadResponseError("the answer's headers are too long")
            return False
        lines = bytes(self._buffer[:end]).decode("latin-1").split("\r\n")
        del self._buffer[: end + 4]
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
            raise BadResponseError(f"not an HTTP/1.1 status line: {lines[0][:80]!r}")
        status = int(code)
        headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise BadResponseError(f"malformed header line: {line[:80]!r}")
            headers.append((name.lower(), value.strip()))
        if 100 <= status < 200:
            return True  # informational: the real answer follows
        connection = ",".join(value for key, value in headers if key == "connection").lower()
        keep_alive = "close" not in connection and (version == "HTTP/1.1" or "keep-alive" in connection)
        self._head = _Head(status, tuple(headers), keep_alive)
        if self._no_body or status in _NO_BODY_STATUS:
            self._length = 0
            return True
        encoding = ",".join(value for key, value in headers if key == "transfer-encoding").lower()
        if "chunked" in encoding:
            self._chunked = True
            return True
        lengths = {value for key, value in headers if key == "content-length"}
        if len(lengths) > 1:
            raise BadResponseError("the answer has conflicting Content-Length headers")
        if lengths:
            length = lengths.pop()
            if not length.isdigit():
                raise BadResponseError(f"invalid Content-Length {length[:40]!r}")
            self._length = int(length)
        else:
            self._head.keep_alive = False  # the body runs to the end of the connection
        return True

    def _parse_chunks(self) -> None:
        buffer = self._buffer
        position = self._scan
        while True:
            line_end = buffer.find(b"\r\n", position)
            if line_end < 0:
                if len(buffer) - position > 4096:
                    raise BadResponseError("a chunk-size line is too long")
                break
            size_text = bytes(buffer[position:line_end]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise BadResponseError(f"invalid chunk size {size_text[:40]!r}") from None
            if size == 0:
                trailer_end = buffer.find(b"\r\n", line_end + 2)
                while trailer_end >= 0 and trailer_end != line_end + 2:  # skip trailer lines
                    line_end = trailer_end
                    trailer_end = buffer.find(b"\r\n", line_end + 2)
                if trailer_end < 0:
                    break
                del buffer[: trailer_end + 2]
                self._scan = 0
                if self._stream is not None:
                    self._end_stream()
                else:
                    self._finish(b"".join(self._chunks))
                return
            data_end = line_end + 2 + size
            if len(buffer) < data_end + 2:
                break
            if buffer[data_end : data_end + 2] != b"\r\n":
                raise BadResponseError("a chunk does not end with CRLF")
            if self._stream is not None:
                self._stream._feed(bytes(buffer[line_end + 2 : data_end]))
            else:
                self._chunks.append(bytes(buffer[line_end + 2 : data_end]))
            position = data_end + 2
        del buffer[:position]
        self._scan = 0

    def _finish(self, body: bytes) -> None:
        head = self._head
        answer = self._answer
        assert head is not None and answer is not None
        self._answer = None
        if not head.keep_alive:
            self.closed = True
            if self.transport is not None:
                self.transport.close()
        try:
            body = _decoded(body, head.headers)
        except zlib.error as exc:
            answer.set_exception(BadResponseError(f"the answer's compressed body is corrupt: {exc}"))
            return
        if not answer.done():
            answer.set_result(Response(head.status, head.headers, body))


def _decoded(body: bytes, headers: tuple[tuple[str, str], ...]) -> bytes:
    encoding = next((value for key, value in headers if key == "content-encoding"), "").strip().lower()
    if not body or encoding in ("", "identity"):
        return body
    if encoding == "gzip":
        return zlib.decompress(body, 16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        try:
            return zlib.decompress(body)
        except zlib.error:
            return zlib.decompress(body, -zlib.MAX_WBITS)  # raw deflate, as some servers send
    raise BadResponseError(f"the answer's Content-Encoding {encoding!r} was not asked for")


class _TLSLayer(asyncio.sslproto.SSLProtocol):
    """asyncio's TLS protocol with a 64 KiB read buffer instead of 256 KiB: each connection keeps
    its buffer for life, and an operator with 32 workers holds 32 connections (7 MiB of its peak
    RSS in ``bench/b2_custom_resources.py``, for no speed: answers here are small, and a list of
    thousands is read in more passes of the same cost)."""

    max_size = 64 * 1024


def _expire(answer: asyncio.Future[Response]) -> None:
    if not answer.done():
        answer.set_exception(TimeoutError("no answer within the request timeout"))


class ConnectionPool:
    """Keep-alive connections to one server (``host``:``port``, TLS when ``context`` is given)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        context: ssl.SSLContext | None,
        server_hostname: str | None = None,
        host_header: str,
        max_idle_seconds: float = MAX_IDLE_SECONDS,
        dial: Callable[[], Awaitable[socket.socket]] | None = None,
    ) -> None:
        self._dial = dial
        self._host = host
        self._port = port
        self._context = context
        self._server_hostname = server_hostname if context is not None else None
        self._host_header = host_header
        self._max_idle_seconds = max_idle_seconds
        self._idle: list[tuple[float, _Connection]] = []  # (when released, connection)
        self._closed = False

    async def request(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes | None,
        *,
        timeout: float | None,
        fence_path: str | None = None,
    ) -> Response:
        """Send one request and read its whole answer within ``timeout`` seconds.

        ``target`` is the request target (path and query, already encoded); the fence of the
        calling task is checked for ``fence_path`` just before the request is written.
        """
        request = self._encode(method, target, headers, body)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        connection = self._idle_connection()
        if connection is None:
            async with asyncio.timeout_at(deadline):
                connection = await self._connect()
        try:
            if fence_path is not None:
                check_write(method, fence_path)
            answer = connection.send(request, no_body=method == "HEAD")
            # A timer on the answer itself: an ``asyncio.timeout`` per request costs ~3x as much.
            timer = None if deadline is None else loop.call_at(deadline, _expire, answer)
            try:
                response = await answer
            finally:
                if timer is not None:
                    timer.cancel()
        except BaseException:
            connection.close()
            raise
        self._release(connection)
        return response

    async def stream(
        self, target: str, headers: list[tuple[str, str]], *, timeout: float | None
    ) -> BodyStream:
        """Send a GET and return its answer once the head is in; the body is read from it.

        ``timeout`` bounds connecting and the head; the body may then take as long as it takes.
        The stream takes an idle kept-alive connection if there is one (as Go's transport gives
        a watch one: an informer's list and then its watch make one TLS handshake, not two), else
        a new one; the connection is closed with the stream.
        """
        request = self._encode("GET", target, headers, None)
        connection = self._idle_connection()
        reused = connection is not None
        try:
            async with asyncio.timeout(timeout):
                if connection is None:
                    connection = await self._connect()
                try:
                    return await connection.send_streaming(request)
                except ServerDisconnectedError:
                    if not reused:
                        raise
                    # The server closed the kept-alive connection as the request went out: a
                    # GET is sent again, once, on a new connection (Go's transport does so too).
                    connection.close()
                    connection = await self._connect()
                    return await connection.send_streaming(request)
        except BaseException:
            if connection is not None:
                connection.close()
            raise

    def _encode(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes | None) -> bytes:
        """The request's bytes: its line, Host, ``headers``, a length for a body, the body."""
        if self._closed:
            raise ServerDisconnectedError("the connection pool is closed")
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host_header}"]
        lines.extend(f"{name}: {value}" for name, value in headers)
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body) if body is not None else 0}")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return request + body if body else request

    def _idle_connection(self) -> _Connection | None:
        """The most recently released connection still fit to use (older idle ones are closed)."""
        now = time.monotonic()
        while self._idle:
            released, connection = self._idle.pop()
            if now - released > self._max_idle_seconds:
                connection.close()
                continue
            transport = connection.transport
            if (
                not connection.closed
                and transport is not None
                and not transport.is_closing()
                and not connection.idle_bytes
            ):
                return connection
            connection.close()
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        if self._dial is not None:  # a connection made elsewhere (an in-process server's)
            hostname = None if self._context is None else self._server_hostname or self._host
            _, connection = await loop.create_connection(
                _Connection, sock=await self._dial(), ssl=self._context, server_hostname=hostname
            )
            return connection
        if self._context is None or not isinstance(loop, asyncio.selector_events.BaseSelectorEventLoop):
            _, connection = await loop.create_connection(
                _Connection, self._host, self._port, ssl=self._context, server_hostname=self._server_hostname
            )
            return connection
        # asyncio's own TLS layer, as ``create_connection(ssl=...)`` builds it, with a smaller
        # read buffer (see _TLSLayer); other loops (uvloop) keep their own.
        connection = _Connection()
        handshake: asyncio.Future[None] = loop.create_future()
        hostname = self._host if self._server_hostname is None else self._server_hostname  # as asyncio's
        layer = _TLSLayer(loop, connection, self._context, handshake, server_hostname=hostname)
        transport, _ = await loop.create_connection(lambda: layer, self._host, self._port)
        try:
            await handshake
        except BaseException:
            transport.close()
            raise
        return connection

    def _release(self, connection: _Connection) -> None:
        if connection.closed or self._closed or len(self._idle) >= MAX_IDLE:
            connection.close()
            return
        self._idle.append((time.monotonic(), connection))

    def close(self) -> None:
        """Close the idle connections; those in use are closed when their exchange ends."""
        self._closed = True
        idle, self._idle = self._idle, []
        for _, connection in idle:
            if connection.transport is not None:
                connection.transport.close()
            connection.closed = True
