"""SPDY/3.1, the server's side, as kubectl speaks it for ``port-forward`` (tunneled in a
WebSocket by kubectl 1.31 and later, or after an HTTP upgrade) and for ``exec`` before 1.30.

A :class:`SpdySession` reads frames from a byte stream (``receive`` returns the next bytes, b""
at its end) and writes them with ``send``. The client opens the streams (SYN_STREAM, odd ids,
headers such as ``streamType``); :meth:`SpdySession.accept` gives each new one, already
answered with a SYN_REPLY. A stream's data is read with :meth:`SpdyStream.read` (b"" once the
client has sent FIN), written with :meth:`SpdyStream.write`, and ended with
:meth:`SpdyStream.close` (a FIN). PINGs are answered, GOAWAY ends the session, SETTINGS and
WINDOW_UPDATE are taken note of and not enforced (the client, spdystream, does not enforce
windows either); a stream holds at most :data:`STREAM_QUEUE_FRAMES` frames its reader has not
taken, and the session reads no more of the connection until it does.

Header blocks are compressed with zlib and SPDY/3's dictionary, one stream of compression per
direction for the whole session, each block ending at a sync flush.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kubeloop.apiserver.http.spdydictionary import DICTIONARY

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
#: RST_STREAM status codes.
PROTOCOL_ERROR, INVALID_STREAM, REFUSED_STREAM, CANCEL, INTERNAL_ERROR, STREAM_ALREADY_CLOSED = 1, 2, 3, 5, 6, 9
#: The longest frame taken (a frame's length field allows 16 MiB).
MAX_FRAME_BYTES = 16 * 1024 * 1024 - 1
#: The most a header block may inflate to (spdystream takes 1,000 headers of at most 1 MiB).
MAX_HEADER_BYTES = 1024 * 1024
#: Data frames are written in pieces of at most this size.
DATA_CHUNK_BYTES = 32 * 1024
#: Data frames a stream holds for its reader; past them the session stops reading the
#: connection until the reader takes some (no flow control: what spdystream does not enforce
#: is bounded here).
STREAM_QUEUE_FRAMES = 64


class SpdyError(Exception):
    """The peer broke the protocol: the session ends."""


@dataclass
class SpdyStream:
    """One stream the client opened: its id and headers (names in lower case)."""

    session: SpdySession
    id: int
    headers: dict[str, str]
    _incoming: asyncio.Queue[bytes] = field(default_factory=lambda: asyncio.Queue(STREAM_QUEUE_FRAMES))
    #: The client has sent its last data (FIN) or reset the stream.
    remote_closed: bool = False
    #: This side has sent FIN (or a reset).
    local_closed: bool = False

    async def read(self) -> bytes:
        """The client's next data on this stream; b"" once it has ended its side."""
        if self.remote_closed and self._incoming.empty():
            return b""
        return await self._incoming.get()

    async def write(self, data: bytes) -> None:
        if self.local_closed or not data:
            return
        for start in range(0, len(data), DATA_CHUNK_BYTES):
            await self.session.send_data(self.id, data[start : start + DATA_CHUNK_BYTES], fin=False)

    async def close(self) -> None:
        """End this side of the stream (a FIN)."""
        if not self.local_closed:
            self.local_closed = True
            await self.session.send_data(self.id, b"", fin=True)

    async def reset(self, status: int = CANCEL) -> None:
        if not (self.local_closed and self.remote_closed):
            self.local_closed = True
            self._remote_end()
            await self.session.send_control(RST_STREAM, 0, struct.pack(">II", self.id & 0x7FFFFFFF, status))

    def _remote_end(self) -> None:
        if not self.remote_closed:
            self.remote_closed = True
            # A full queue has a reader to come: it sees remote_closed once it has emptied it.
            with contextlib.suppress(asyncio.QueueFull):
                self._incoming.put_nowait(b"")


class SpdySession:
    """The server's side of one SPDY connection over ``receive``/``send``."""

    def __init__(self, receive: Callable[[], Awaitable[bytes]], send: Callable[[bytes], Awaitable[None]]) -> None:
        self._receive = receive
        self._send = send
        self._buffer = b""
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._deflate = zlib.compressobj(9, zlib.DEFLATED, 15, zdict=DICTIONARY)
        self._write_lock = asyncio.Lock()
        self.streams: dict[int, SpdyStream] = {}
        self._new: asyncio.Queue[SpdyStream | None] = asyncio.Queue()
        self.closed = False

    # ------------------------------------------------------------------ reading

    async def run(self) -> None:
        """Read frames until the connection ends (or the client says GOAWAY); every stream's
        reader then sees its end, and :meth:`accept` returns None."""
        try:
            while (frame := await self._frame()) is not None:
                await self._handle(*frame)
        except _GoAway:
            pass
        finally:
            self.closed = True
            for stream in self.streams.values():
                stream._remote_end()
            self._new.put_nowait(None)

    async def accept(self) -> SpdyStream | None:
        """The next stream the client opens (None: the session has ended)."""
        if self.closed and self._new.empty():
            return None
        return await self._new.get()

    async def _read_exactly(self, size: int) -> bytes | None:
        while len(self._buffer) < size:
            chunk = await self._receive()
            if not chunk:
                return None
            self._buffer += chunk
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    async def _frame(self) -> tuple[bool, int, int, bytes] | None:
        """The next frame: (control, type or stream id, flags, payload); None at the end."""
        head = await self._read_exactly(8)
        if head is None:
            return None
        first, flags_length = struct.unpack(">II", head)
        flags, length = flags_length >> 24, flags_length & 0xFFFFFF
        payload = await self._read_exactly(length) if length else b""
        if payload is None:
            return None
        if first & 0x80000000:
            version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
            if version != VERSION:
                raise SpdyError(f"SPDY version {version} is not spoken (only {VERSION})")
            return True, kind, flags, payload
        return False, first & 0x7FFFFFFF, flags, payload

    async def _handle(self, control: bool, kind: int, flags: int, payload: bytes) -> None:
        if not control:  # data: ``kind`` is the stream's id
            stream = self.streams.get(kind)
            if stream is None or stream.remote_closed:
                status = INVALID_STREAM if stream is None else STREAM_ALREADY_CLOSED
                await self.send_control(RST_STREAM, 0, struct.pack(">II", kind, status))
                return
            if payload:
                await stream._incoming.put(payload)  # a slow reader holds the connection back
            if flags & FLAG_FIN:
                stream._remote_end()
            return
        if kind == SYN_STREAM:
            stream_id = struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF
            headers = self._headers(payload[10:])
            stream = SpdyStream(self, stream_id, headers)
            self.streams[stream_id] = stream
            await self.send_control(SYN_REPLY, 0, struct.pack(">I", stream_id) + self._header_block({}))
            if flags & FLAG_FIN:
                stream._remote_end()
            self._new.put_nowait(stream)
        elif kind == RST_STREAM:
            stream_id = struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF
            found = self.streams.get(stream_id)
            if found is not None:
                found.local_closed = True
                found._remote_end()
        elif kind == PING:
            await self.send_control(PING, 0, payload[:4])
        elif kind == GOAWAY:
            raise _GoAway
        elif kind == HEADERS:
            self._headers(payload[4:])  # the compression stream must see every block
        # SETTINGS and WINDOW_UPDATE: taken, not enforced.

    def _headers(self, block: bytes) -> dict[str, str]:
        try:
            raw = self._inflate.decompress(block, MAX_HEADER_BYTES)
        except zlib.error as exc:
            raise SpdyError(f"a header block does not decompress: {exc}") from None
        if self._inflate.unconsumed_tail:
            raise SpdyError(f"a header block is larger than {MAX_HEADER_BYTES} bytes")
        count = struct.unpack(">I", raw[:4])[0]
        position, headers = 4, {}
        for _ in range(count):
            size = struct.unpack(">I", raw[position : position + 4])[0]
            name = raw[position + 4 : position + 4 + size].decode().lower()
            position += 4 + size
            size = struct.unpack(">I", raw[position : position + 4])[0]
            value = raw[position + 4 : position + 4 + size].decode()
            position += 4 + size
            headers[name] = value.split("\x00")[0]  # several values are NUL-separated
        return headers

    # ------------------------------------------------------------------ writing

    def _header_block(self, headers: dict[str, str]) -> bytes:
        raw = struct.pack(">I", len(headers))
        for name, value in headers.items():
            raw += struct.pack(">I", len(name)) + name.encode() + struct.pack(">I", len(value)) + value.encode()
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    async def send_control(self, kind: int, flags: int, payload: bytes) -> None:
        head = struct.pack(">II", 0x80000000 | (VERSION << 16) | kind, (flags << 24) | len(payload))
        await self._write(head + payload)

    async def send_data(self, stream_id: int, data: bytes, *, fin: bool) -> None:
        head = struct.pack(">II", stream_id & 0x7FFFFFFF, ((FLAG_FIN if fin else 0) << 24) | len(data))
        await self._write(head + data)

    async def _write(self, frame: bytes) -> None:
        if self.closed:
            return
        async with self._write_lock:
            with contextlib.suppress(ConnectionError):
                await self._send(frame)

    async def go_away(self) -> None:
        """Say the session is over (the streams have had their last data)."""
        last = max(self.streams, default=0)
        await self.send_control(GOAWAY, 0, struct.pack(">II", last, 0))
        self.closed = True


class _GoAway(Exception):
    """The client said GOAWAY."""
