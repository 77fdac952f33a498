"""SPDY/3.1's server side (``http/spdy.py``) on bytes a client writes, as Go's spdystream writes
them: a stream opened with headers (any names and values) is answered and readable to its FIN,
PINGs come back, DATA after FIN is refused with STREAM_ALREADY_CLOSED, and a header block that
inflates past its cap ends the session instead of filling memory. What a reader has not taken is
bounded at each step (the stream, an exec's channels, the upgraded connection's bytes): a
client writing faster than a command reads waits in its socket, not in the server's memory."""

from __future__ import annotations

import asyncio
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.apiserver.http.spdy import (
    FLAG_FIN,
    MAX_HEADER_BYTES,
    PING,
    RST_STREAM,
    STREAM_ALREADY_CLOSED,
    STREAM_QUEUE_FRAMES,
    SYN_REPLY,
    SYN_STREAM,
    SpdyError,
    SpdySession,
    SpdyStream,
)
from kubeloop.apiserver.http.spdydictionary import DICTIONARY
from kubeloop.apiserver.http.spdytransport import PAUSE_BYTES, RESUME_BYTES, RawReader
from kubeloop.apiserver.http.streamchannels import QUEUED_MESSAGES, SpdyChannels


class Client:
    """A client's half: frames as spdystream writes them, one compression stream for its headers."""

    def __init__(self) -> None:
        self.deflate = zlib.compressobj(9, zlib.DEFLATED, 15, zdict=DICTIONARY)
        self.incoming: asyncio.Queue[bytes] = asyncio.Queue()
        self.sent = b""

    def control(self, kind: int, flags: int, payload: bytes) -> None:
        self.incoming.put_nowait(struct.pack(">II", 0x80030000 | kind, (flags << 24) | len(payload)) + payload)

    def data(self, stream_id: int, data: bytes, *, fin: bool = False) -> None:
        self.incoming.put_nowait(struct.pack(">II", stream_id, ((FLAG_FIN if fin else 0) << 24) | len(data)) + data)

    def headers(self, headers: dict[str, str]) -> bytes:
        raw = struct.pack(">I", len(headers))
        for name, value in headers.items():
            raw += struct.pack(">I", len(name.encode())) + name.encode() + struct.pack(">I", len(value.encode())) + value.encode()
        return self.deflate.compress(raw) + self.deflate.flush(zlib.Z_SYNC_FLUSH)

    def open(self, stream_id: int, headers: dict[str, str]) -> None:
        self.control(SYN_STREAM, 0, struct.pack(">IIBB", stream_id, 0, 0, 0) + self.headers(headers))

    async def send(self, data: bytes) -> None:
        self.sent += data

    def frames(self) -> list[tuple[int, bytes]]:
        """(control type, or -stream id for data; payload) of what the server wrote."""
        found, data = [], self.sent
        while data:
            first, length = struct.unpack(">II", data[:8])
            length &= 0xFFFFFF
            kind = first & 0xFFFF if first & 0x80000000 else -first
            found.append((kind, data[8 : 8 + length]))
            data = data[8 + length :]
        return found


names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=20)
values = st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=200)


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(names, values, max_size=8), st.binary(max_size=3000))
def test_a_stream_opens_with_its_headers_and_reads_to_its_fin(headers: dict[str, str], payload: bytes) -> None:
    async def scenario() -> None:
        client = Client()
        session = SpdySession(client.incoming.get, client.send)
        reading = asyncio.create_task(session.run())
        client.open(1, headers)
        client.data(1, payload, fin=True)
        client.control(PING, 0, struct.pack(">I", 7))
        stream = await session.accept()
        assert stream is not None and stream.headers == headers
        received = b""
        while chunk := await stream.read():
            received += chunk
        assert received == payload
        client.incoming.put_nowait(b"")  # the connection ends
        await reading
        kinds = [kind for kind, _ in client.frames()]
        assert kinds[:1] == [SYN_REPLY] and PING in kinds  # answered at once; the PING echoed

    asyncio.run(scenario())


async def test_data_after_fin_is_refused_as_already_closed() -> None:
    client = Client()
    session = SpdySession(client.incoming.get, client.send)
    reading = asyncio.create_task(session.run())
    client.open(1, {"streamtype": "data"})
    client.data(1, b"", fin=True)
    client.data(1, b"late")
    stream = await session.accept()
    assert stream is not None and await stream.read() == b""
    client.incoming.put_nowait(b"")
    await reading
    resets = [payload for kind, payload in client.frames() if kind == RST_STREAM]
    assert resets == [struct.pack(">II", 1, STREAM_ALREADY_CLOSED)]


async def test_a_header_block_past_its_cap_ends_the_session() -> None:
    client = Client()
    session = SpdySession(client.incoming.get, client.send)
    client.open(1, {"x": "y" * (MAX_HEADER_BYTES + 1)})  # a few KiB on the wire, over 1 MiB inflated
    with pytest.raises(SpdyError, match="larger than"):
        await session.run()


async def test_a_stream_nobody_reads_stops_the_session_reading_the_connection() -> None:
    """No flow control in spdystream: what a stream's reader has not taken is bounded, and the
    session reads no more of the connection until the reader takes some."""
    frame = struct.pack(">II", 1, 1024) + bytes(1024)
    pulled = 0

    async def receive() -> bytes:
        nonlocal pulled
        pulled += 1
        await asyncio.sleep(0)  # the connection's bytes come in a later loop turn
        return frame  # a client that writes as fast as it is read

    client = Client()
    session = SpdySession(receive, client.send)
    session.streams[1] = SpdyStream(session, 1, {})
    reading = asyncio.create_task(session.run())
    for _ in range(1000):  # loop turns: an unbounded session would read on in each
        await asyncio.sleep(0)
    held = pulled
    assert held == STREAM_QUEUE_FRAMES + 1  # the queue, and the frame waiting for room
    assert await session.streams[1].read() == bytes(1024)
    for _ in range(1000):
        await asyncio.sleep(0)
    assert pulled == held + 1  # one taken, one more read
    reading.cancel()
    await asyncio.gather(reading, return_exceptions=True)


class Transport:
    """What the raw reader asks of the connection's transport."""

    def __init__(self) -> None:
        self.reading = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return False


async def test_the_upgraded_connection_is_not_read_while_the_session_is_behind() -> None:
    transport = Transport()
    reader = RawReader(transport)  # type: ignore[arg-type]
    chunk = bytes(64 * 1024)
    while transport.reading:
        reader.feed_data(chunk)  # what the connection brings
    assert reader.held > PAUSE_BYTES
    while not transport.reading:
        assert await reader.receive() == chunk
    assert reader.held < RESUME_BYTES


async def test_spdy_channels_hold_a_bounded_number_of_messages() -> None:
    """An exec's stdin the command does not read: the channels stop taking the stream's data."""
    client = Client()
    session = SpdySession(client.incoming.get, client.send)
    stdin = SpdyStream(session, 1, {"streamtype": "stdin"})
    channels = SpdyChannels({"stdin": stdin})
    for _ in range(2):  # the stream's queue filled twice over, as the session fills it
        while True:
            try:
                stdin._incoming.put_nowait(b"x")
            except asyncio.QueueFull:
                break
        for _ in range(1000):  # loop turns: unbounded channels would take it all in them
            await asyncio.sleep(0)
    assert channels._messages.qsize() == QUEUED_MESSAGES
    assert stdin._incoming.qsize() == STREAM_QUEUE_FRAMES - 1  # one taken, waiting for room
    channels.gone()
    taken = 0
    while await channels.receive() is not None:
        taken += 1
    assert taken >= QUEUED_MESSAGES
    await channels.close()
