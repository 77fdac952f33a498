"""The lean HTTP/1.1 pool against a scripted server: framing, reuse, failures, the write fence."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeloop.client.connectionpool import (
    BadResponseError,
    BodyStream,
    ConnectionPool,
    ServerDisconnectedError,
)
from kubeloop.client.fence import WriteFenced, current_write_fence
from kubeloop.testing import eventually

#: What the scripted server answers to one request: the raw bytes to send, in pieces (each
#: written and flushed on its own), then whether to close the connection.
Script = Callable[[bytes], tuple[list[bytes], bool]]


@dataclass
class Recorder:
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    received: bytearray = field(default_factory=bytearray)


async def _read_request(reader: asyncio.StreamReader, recorder: Recorder) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    recorder.received += head
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    body = await reader.readexactly(length) if length else b""
    recorder.received += body
    recorder.requests.append(head + body)
    return head + body


@asynccontextmanager
async def scripted(
    script: Script, *, max_idle_seconds: float = 60.0
) -> AsyncIterator[tuple[ConnectionPool, Recorder]]:
    recorder = Recorder()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        recorder.connections += 1
        try:
            while (request := await _read_request(reader, recorder)) is not None:
                pieces, close = script(request)
                for piece in pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0)
                if close:
                    break
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = ConnectionPool(
        "127.0.0.1", port, context=None, host_header=f"127.0.0.1:{port}", max_idle_seconds=max_idle_seconds
    )
    try:
        yield pool, recorder
    finally:
        pool.close()
        server.close()
        await server.wait_closed()


def answer(body: bytes, *, status: str = "200 OK", headers: tuple[str, ...] = ()) -> bytes:
    head = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def chunked(body: bytes, sizes: list[int], *, trailers: tuple[str, ...] = ()) -> bytes:
    out = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"]
    position = 0
    for size in sizes:
        piece = body[position : position + size]
        if not piece:
            break
        out.append(f"{len(piece):x};ext=1\r\n".encode() + piece + b"\r\n")
        position += len(piece)
    if position < len(body):
        rest = body[position:]
        out.append(f"{len(rest):X}\r\n".encode() + rest + b"\r\n")
    out.append(b"0\r\n" + b"".join(f"{t}\r\n".encode() for t in trailers) + b"\r\n")
    return b"".join(out)


def split(wire: bytes, cuts: list[int]) -> list[bytes]:
    """``wire`` in pieces of the sizes in ``cuts`` (repeated as needed); none empty."""
    pieces = []
    position = 0
    for cut in cuts * (len(wire) // max(1, sum(cuts)) + 1):
        if position >= len(wire):
            break
        pieces.append(wire[position : position + cut])
        position += cut
    pieces.append(wire[position:])
    return [piece for piece in pieces if piece]


async def test_a_kept_alive_connection_serves_the_next_requests() -> None:
    async with scripted(lambda request: ([answer(b'{"n": 1}')], False)) as (pool, recorder):
        for _ in range(3):
            response = await pool.request("GET", "/api", [("Accept", "application/json")], None, timeout=5)
            assert (response.status, response.body) == (200, b'{"n": 1}')
        assert recorder.connections == 1
        assert recorder.requests[0].startswith(b"GET /api HTTP/1.1\r\nHost: 127.0.0.1:")
        assert b"Accept: application/json\r\n" in recorder.requests[0]


async def test_a_post_carries_its_body_and_length() -> None:
    async with scripted(lambda request: ([answer(request.split(b"\r\n\r\n", 1)[1])], False)) as (pool, rec):
        response = await pool.request("POST", "/x", [], b'{"a": 1}', timeout=5)
        assert response.body == b'{"a": 1}'
        empty = await pool.request("POST", "/x", [], None, timeout=5)
        assert empty.body == b""
        assert b"Content-Length: 0\r\n" in rec.requests[1]
        deleted = await pool.request("DELETE", "/x", [], None, timeout=5)
        assert b"content-length" not in rec.requests[2].lower()
        assert deleted.status == 200


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.binary(max_size=3000),
    sizes=st.lists(st.integers(1, 700), max_size=8),
    cuts=st.lists(st.integers(1, 200), min_size=1, max_size=30),
    trailers=st.sampled_from([(), ("X-Trailer: 1",), ("A: b", "C: d")]),
)
def test_chunked_bodies_arrive_whole_however_the_bytes_are_split(
    body: bytes, sizes: list[int], cuts: list[int], trailers: tuple[str, ...]
) -> None:
    wire = chunked(body, sizes, trailers=trailers)
    pieces = split(wire, cuts)

    async def run() -> None:
        async with scripted(lambda request: (pieces, False)) as (pool, recorder):
            for _ in range(2):  # and the connection stays usable after the last chunk
                response = await pool.request("GET", "/c", [], None, timeout=5)
                assert response.body == body
            assert recorder.connections == 1

    asyncio.run(run())


async def test_gzip_and_deflate_bodies_are_decoded() -> None:
    import zlib

    data = b'{"items": []}' * 100
    gz = answer(gzip.compress(data), headers=("Content-Encoding: gzip",))
    deflated = answer(zlib.compress(data), headers=("Content-Encoding: deflate",))
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    raw_deflated = answer(raw.compress(data) + raw.flush(), headers=("Content-Encoding: deflate",))
    answers = iter([gz, deflated, raw_deflated, answer(b"garbage", headers=("Content-Encoding: gzip",))])
    async with scripted(lambda request: ([next(answers)], False)) as (pool, _):
        for _ in range(3):
            assert (await pool.request("GET", "/", [], None, timeout=5)).body == data
        with pytest.raises(BadResponseError, match="compressed body is corrupt"):
            await pool.request("GET", "/", [], None, timeout=5)


async def test_a_body_without_length_runs_to_the_end_of_the_connection() -> None:
    wire = [b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", b"first part, ", b"second part"]
    async with scripted(lambda request: (wire, True)) as (pool, recorder):
        for _ in range(2):
            response = await pool.request("GET", "/", [], None, timeout=5)
            assert response.body == b"first part, second part"
        assert recorder.connections == 2  # never reused


async def test_connection_close_is_honoured_and_a_closed_idle_connection_is_replaced() -> None:
    answers_left = [
        ([answer(b"1", headers=("Connection: close",))], True),  # said, and closed
        ([answer(b"2")], True),  # closed without saying so, once idle
        ([answer(b"n")], False),
    ]
    async with scripted(lambda request: answers_left.pop(0)) as (pool, recorder):
        assert (await pool.request("GET", "/", [], None, timeout=5)).body == b"1"
        assert (await pool.request("GET", "/", [], None, timeout=5)).body == b"2"
        await asyncio.sleep(0.05)  # the server has closed that idle connection meanwhile
        assert (await pool.request("POST", "/", [], b"{}", timeout=5)).body == b"n"
        assert recorder.connections == 3


async def test_a_connection_idle_too_long_is_not_reused() -> None:
    # The server would keep it (it closes idle ones after 90 s); the pool lets it go first, so a
    # write never races the server closing it.
    async with scripted(lambda request: ([answer(b"ok")], False), max_idle_seconds=0.05) as (pool, recorder):
        assert (await pool.request("GET", "/", [], None, timeout=5)).body == b"ok"
        assert (await pool.request("GET", "/", [], None, timeout=5)).body == b"ok"
        assert recorder.connections == 1
        await asyncio.sleep(0.1)
        assert (await pool.request("POST", "/", [], b"{}", timeout=5)).body == b"ok"
        assert recorder.connections == 2


async def test_an_answer_cut_short_is_an_error_and_the_connection_is_dropped() -> None:
    wires = [([b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly a part"], True), ([answer(b"ok")], False)]
    async with scripted(lambda request: wires.pop(0)) as (pool, recorder):
        with pytest.raises(ServerDisconnectedError):
            await pool.request("GET", "/", [], None, timeout=5)
        assert (await pool.request("GET", "/", [], None, timeout=5)).body == b"ok"
        assert recorder.connections == 2


@pytest.mark.parametrize(
    "wire",
    [
        b"SPDY/3 200 OK\r\n\r\n",
        b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n",
    ],
)
async def test_a_malformed_answer_is_refused_and_the_connection_dropped(wire: bytes) -> None:
    wires = [([wire], False), ([answer(b"ok")], False)]
    async with scripted(lambda request: wires.pop(0)) as (pool, recorder):
        with pytest.raises(BadResponseError):
            await pool.request("GET", "/", [], None, timeout=5)
        assert (await pool.request("GET", "/", [], None, timeout=5)).body == b"ok"
        assert recorder.connections == 2


async def test_headers_without_end_are_refused_past_the_limit() -> None:
    wire = b"HTTP/1.1 200 OK\r\n" + b"X-Long: " + b"a" * (1 << 20) + b"\r\n"
    async with scripted(lambda request: ([wire], False)) as (pool, _):
        with pytest.raises(BadResponseError, match="too long"):
            await pool.request("GET", "/", [], None, timeout=5)


async def test_head_204_and_304_have_no_body_and_1xx_is_skipped() -> None:
    wires = [
        [b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n"],
        [b"HTTP/1.1 204 No Content\r\nContent-Length: 50\r\n\r\n"],
        [b"HTTP/1.1 100 Continue\r\n\r\n", answer(b"after continue")],
    ]
    async with scripted(lambda request: (wires.pop(0), False)) as (pool, recorder):
        head = await pool.request("HEAD", "/", [], None, timeout=5)
        assert (head.status, head.body) == (200, b"")
        assert (await pool.request("GET", "/", [], None, timeout=5)).status == 204
        assert (await pool.request("GET", "/", [], None, timeout=5)).body == b"after continue"
        assert recorder.connections == 1


async def test_a_deadline_covers_the_exchange_and_the_late_connection_is_not_reused() -> None:
    wires = [([], False), ([answer(b"ok")], False)]
    async with scripted(lambda request: wires.pop(0)) as (pool, recorder):
        with pytest.raises(TimeoutError):
            await pool.request("GET", "/", [], None, timeout=0.2)
        assert (await pool.request("GET", "/", [], None, timeout=5)).body == b"ok"
        assert recorder.connections == 2


async def test_headers_are_read_in_order_with_repeats() -> None:
    wire = answer(b"", headers=('Warning: 299 - "one"', 'warning: 299 - "two"', "Retry-After: 3"))
    async with scripted(lambda request: ([wire], False)) as (pool, _):
        response = await pool.request("GET", "/", [], None, timeout=5)
        assert response.header_values("warning") == ['299 - "one"', '299 - "two"']
        assert response.header("retry-after") == "3"
        assert response.header("absent") is None


class _Fence:
    def __init__(self, allowed: bool) -> None:
        self.allowed = allowed

    def writes_allowed(self) -> bool:
        return self.allowed

    def describe(self) -> str:
        return "the lease expired"

    async def wait_until_allowed(self) -> bool:
        return False


async def test_a_fenced_write_is_never_sent_but_reads_are() -> None:
    async with scripted(lambda request: ([answer(b"ok")], False)) as (pool, recorder):
        token = current_write_fence.set(_Fence(allowed=False))
        try:
            with pytest.raises(WriteFenced, match="the lease expired"):
                await pool.request("PATCH", "/w", [], b"{}", timeout=5, fence_path="/w")
            assert (await pool.request("GET", "/w", [], None, timeout=5, fence_path="/w")).body == b"ok"
        finally:
            current_write_fence.reset(token)
        assert len(recorder.requests) == 1 and recorder.requests[0].startswith(b"GET ")
        assert b"PATCH" not in recorder.received


async def test_an_answer_that_does_not_come_in_time_is_a_timeout_and_its_connection_is_dropped() -> None:
    answers_left: list[tuple[list[bytes], bool]] = [
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf"], False),  # the rest never comes
        ([answer(b"ok")], False),
    ]
    async with scripted(lambda request: answers_left.pop(0)) as (pool, recorder):
        started = asyncio.get_running_loop().time()
        with pytest.raises(TimeoutError):
            await pool.request("GET", "/", [], None, timeout=0.2)
        assert asyncio.get_running_loop().time() - started >= 0.2  # not before the timeout
        # The half-answered connection is not reused: the next request gets a new one.
        assert (await pool.request("GET", "/", [], None, timeout=5)).body == b"ok"
        assert recorder.connections == 2


async def test_a_cancelled_request_drops_its_connection() -> None:
    answers_left: list[tuple[list[bytes], bool]] = [([], False), ([answer(b"ok")], False)]
    async with scripted(lambda request: answers_left.pop(0)) as (pool, recorder):
        pending = asyncio.create_task(pool.request("GET", "/", [], None, timeout=None))
        await eventually(lambda: len(recorder.requests) == 1)  # sent, and waiting for its answer
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        assert (await pool.request("GET", "/", [], None, timeout=5)).body == b"ok"
        assert recorder.connections == 2


# ----------------------------------------------------------------------------- streamed bodies (watches)


async def _read_to_end(stream: BodyStream) -> bytes:
    pieces = []
    while piece := await asyncio.wait_for(stream.read(), 5):
        pieces.append(piece)
    return b"".join(pieces)


async def test_a_streamed_body_is_handed_over_as_it_arrives_and_its_connection_is_not_reused() -> None:
    second_sent = asyncio.Event()
    go_on = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        if request.startswith(b"GET /watch"):
            writer.write(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Kind: stream\r\n\r\n3\r\na\n\n\r\n"
            )
            await go_on.wait()
            writer.write(b"2\r\nb\n\r\n0\r\n\r\n")
            second_sent.set()
        else:
            writer.write(answer(b"ok"))
        await writer.drain()
        await reader.read()  # until the client closes
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = ConnectionPool("127.0.0.1", port, context=None, host_header="h")
    try:
        stream = await pool.stream("/watch?watch=true", [("Accept", "application/json")], timeout=5)
        assert (stream.status, stream.header("x-kind")) == (200, "stream")
        assert await asyncio.wait_for(stream.read(), 5) == b"a\n\n"  # before the rest is even sent
        assert not second_sent.is_set()
        go_on.set()
        assert await _read_to_end(stream) == b"b\n"
        assert await stream.read() == b""  # and stays ended
        assert (await pool.request("GET", "/other", [], None, timeout=5)).body == b"ok"  # a new connection
    finally:
        pool.close()
        server.close()


async def test_a_stream_after_a_request_takes_its_kept_alive_connection() -> None:
    """An informer's list and then its watch: one connection (one TLS handshake), as Go's
    transport gives a watch an idle connection; the stream's connection is not kept after it."""

    def script(request: bytes) -> tuple[list[bytes], bool]:
        if request.startswith(b"GET /watch"):
            return [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\ne\n\r\n0\r\n\r\n"], False
        return [answer(b"listed")], False

    async with scripted(script) as (pool, recorder):
        assert (await pool.request("GET", "/list", [], None, timeout=5)).body == b"listed"
        stream = await pool.stream("/watch?watch=true", [], timeout=5)
        assert await _read_to_end(stream) == b"e\n"
        assert recorder.connections == 1
        assert (await pool.request("GET", "/list", [], None, timeout=5)).body == b"listed"
        assert recorder.connections == 2  # the stream's connection went with it


async def test_a_stream_on_a_connection_the_server_closed_is_sent_again_on_a_new_one() -> None:
    """The server closes a kept-alive connection just as the watch is written on it: the GET
    goes once more, on a new connection, and the caller sees only the stream."""
    answers_left = [
        ([answer(b"listed")], False),
        ([], True),  # the watch's request arrives and the connection is closed unanswered
        ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\ne\n\r\n0\r\n\r\n"], False),
    ]
    async with scripted(lambda request: answers_left.pop(0)) as (pool, recorder):
        assert (await pool.request("GET", "/list", [], None, timeout=5)).body == b"listed"
        stream = await pool.stream("/watch?watch=true", [], timeout=5)
        assert await _read_to_end(stream) == b"e\n"
        assert recorder.connections == 2
        watch = b"/watch?watch=true"
        assert [r.split(b" ")[1] for r in recorder.requests] == [b"/list", watch, watch]


@settings(max_examples=40, deadline=None)
@given(
    body=st.binary(max_size=3000),
    sizes=st.lists(st.integers(1, 700), max_size=8),
    cuts=st.lists(st.integers(1, 300), min_size=1, max_size=20),
    framing=st.sampled_from(["chunked", "length", "until-close"]),
)
def test_a_streamed_body_reads_whole_however_it_is_framed_and_split(
    body: bytes, sizes: list[int], cuts: list[int], framing: str
) -> None:
    if framing == "chunked":
        wire = chunked(body, sizes)
    elif framing == "length":
        wire = answer(body)
    else:
        wire = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body
    pieces = split(wire, cuts)

    async def run() -> None:
        async with scripted(lambda request: (pieces, True)) as (pool, _):
            stream = await pool.stream("/", [], timeout=5)
            assert await _read_to_end(stream) == body

    asyncio.run(run())


@pytest.mark.parametrize(
    ("wire", "error"),
    [
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", ServerDisconnectedError),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", ServerDisconnectedError),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", BadResponseError),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", BadResponseError),
    ],
)
async def test_a_stream_cut_short_or_malformed_fails_its_reader(wire: bytes, error: type[Exception]) -> None:
    async with scripted(lambda request: ([wire], True)) as (pool, _):
        stream = await pool.stream("/", [], timeout=5)
        with pytest.raises(error):
            await _read_to_end(stream)


async def test_a_stream_refuses_an_encoding_it_did_not_ask_for() -> None:
    wire = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
    async with scripted(lambda request: ([wire], False)) as (pool, _):
        with pytest.raises(BadResponseError, match="Content-Encoding 'gzip' was not asked for"):
            await pool.stream("/", [], timeout=5)


async def test_an_error_answer_to_a_stream_is_read_whole() -> None:
    body = b'{"kind":"Status","code":410}'
    async with scripted(lambda request: ([answer(body, status="410 Gone")], False)) as (pool, _):
        stream = await pool.stream("/", [], timeout=5)
        assert stream.status == 410
        assert await asyncio.wait_for(stream.read_all(), 5) == body


async def test_a_stream_whose_head_does_not_come_in_time_is_a_timeout_and_is_dropped() -> None:
    answers_left: list[tuple[list[bytes], bool]] = [([], False), ([answer(b"ok")], False)]
    async with scripted(lambda request: answers_left.pop(0)) as (pool, recorder):
        with pytest.raises(TimeoutError):
            await pool.stream("/", [], timeout=0.2)
        assert (await pool.request("GET", "/", [], None, timeout=5)).body == b"ok"
        assert recorder.connections == 2


async def test_closing_a_stream_ends_a_read_waiting_in_another_task() -> None:
    wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    async with scripted(lambda request: ([wire], False)) as (pool, _):
        stream = await pool.stream("/", [], timeout=5)
        reading = asyncio.create_task(stream.read())
        await asyncio.sleep(0)  # the task runs to its read, which waits: nothing has come
        assert not reading.done()
        stream.close()
        assert await asyncio.wait_for(reading, 5) == b""


async def test_a_stream_nobody_reads_stops_reading_the_socket() -> None:
    """Flow control: past STREAM_HIGH_WATER unread bytes the socket is paused, so a fast
    server cannot fill the client's memory; reading resumes it and nothing is lost."""
    piece = b"x" * (1 << 20)
    total = 48
    drained = 0
    writers: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal drained
        writers.append(writer)
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(total):
            writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            await writer.drain()
            drained += len(piece)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = ConnectionPool("127.0.0.1", port, context=None, host_header="h")
    try:
        stream = await pool.stream("/", [], timeout=5)
        # Read nothing: the client pauses its socket, and the server's writes back up until it
        # waits in drain() with bytes it cannot send.
        await eventually(
            lambda: stream._paused and bool(writers) and writers[0].transport.get_write_buffer_size() > 0
        )
        assert drained < total * len(piece) // 2  # the server is held back by the client
        assert len(await _read_to_end(stream)) == total * len(piece)
        assert drained == total * len(piece)
    finally:
        pool.close()
        server.close()
