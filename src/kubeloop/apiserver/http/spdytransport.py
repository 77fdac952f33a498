"""A SPDY session from an HTTP request: after an upgrade (``Upgrade: SPDY/3.1``, the protocol
chosen from ``X-Stream-Protocol-Version``), or tunneled in a WebSocket whose subprotocol is
``SPDY/3.1+<protocol>`` (kubectl 1.31 and later: binary messages carrying the SPDY bytes, cut
anywhere)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import WSMsgType, web

from kubeloop import errors
from kubeloop.apiserver.http.http1 import HTTPRequest
from kubeloop.apiserver.http.spdy import SpdySession

SPDY = "spdy/3.1"
TUNNEL_PREFIX = "SPDY/3.1+"


def wants_spdy(request: HTTPRequest) -> bool:
    """Whether the request asks for a SPDY upgrade."""
    return request.headers.get("Upgrade", "").lower() == SPDY


def offered_versions(request: HTTPRequest) -> list[str]:
    """The stream protocols the client offers, best first (headers repeated or comma-separated)."""
    return [
        version.strip()
        for header in request.headers.getall("X-Stream-Protocol-Version", [])
        for version in header.split(",")
        if version.strip()
    ]


def chosen_version(request: HTTPRequest, served: Sequence[str]) -> str:
    """The first protocol the client offers that is served; 403 naming the served ones if none."""
    for version in offered_versions(request):
        if version in served:
            return version
    raise errors.Forbidden(
        f"unable to upgrade: unable to negotiate protocol: client supports {offered_versions(request)}, "
        f"server supports {list(served)}"
    )


#: Bytes of the connection held for the session before the connection is no longer read
#: (the client's writes then wait in its socket), and how few let it be read again.
PAUSE_BYTES = 1024 * 1024
RESUME_BYTES = 256 * 1024


class RawReader:
    """Takes the connection's bytes after the upgrade (aiohttp's parser for them) and gives
    them to the session; stops reading the connection while the session is behind."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.held = 0
        self.paused = False

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if data:
            self.queue.put_nowait(bytes(data))
            self.held += len(data)
            if self.held > PAUSE_BYTES and not self.paused:
                self.paused = True
                self.transport.pause_reading()
        return False, b""

    def feed_eof(self) -> None:
        self.queue.put_nowait(b"")

    async def receive(self) -> bytes:
        data = await self.queue.get()
        self.held -= len(data)
        if self.paused and self.held < RESUME_BYTES and not self.transport.is_closing():
            self.paused = False
            self.transport.resume_reading()
        return data


async def upgrade(request: HTTPRequest, version: str) -> tuple[SpdySession, web.StreamResponse]:
    """Answer 101 Switching Protocols and make the connection a SPDY session (``version``: the
    stream protocol chosen)."""
    assert isinstance(request, web.Request)  # an upgrade never takes the small-request path
    response = web.StreamResponse(
        status=101,
        headers={"Connection": "Upgrade", "Upgrade": "SPDY/3.1", "X-Stream-Protocol-Version": version},
    )
    await response.prepare(request)
    receive, send = taken_over(request)
    return SpdySession(receive, send), response


def taken_over(request: web.Request) -> tuple[Callable[[], Awaitable[bytes]], Callable[[bytes], Awaitable[None]]]:
    """The connection of ``request``, once a 101 is out, as bytes: what the client sends (b""
    once it has ended) and a way to send it bytes (waiting while it is slow to read them)."""
    protocol = request.protocol
    transport = request.transport
    assert transport is not None  # (uvloop's transports are not asyncio.Transport subclasses)
    reader = RawReader(transport)
    protocol.set_parser(reader)  # type: ignore[arg-type]

    async def send(data: bytes) -> None:
        if transport.is_closing():
            raise ConnectionResetError("the client has gone")
        transport.write(data)
        if protocol.writing_paused:  # a slow reader: wait until the buffer drains
            await protocol._drain_helper()

    return reader.receive, send


def tunnel_protocols(protocol: str) -> tuple[str, ...]:
    """The WebSocket subprotocols that tunnel SPDY for ``protocol``."""
    return (TUNNEL_PREFIX + protocol,)


def tunneled(socket: web.WebSocketResponse) -> SpdySession:
    """A SPDY session over a prepared WebSocket's binary messages."""

    async def receive() -> bytes:
        while True:
            message = await socket.receive()
            if message.type == WSMsgType.BINARY:
                if message.data:
                    return bytes(message.data)
                continue
            if message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                return b""

    async def send(data: bytes) -> None:
        if socket.closed:
            raise ConnectionResetError("the client has gone")
        await socket.send_bytes(data)

    return SpdySession(receive, send)
