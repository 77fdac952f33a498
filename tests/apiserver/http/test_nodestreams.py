"""The relay of pods' streams from a front-end to the node's server (``http/nodestreams.py``), over
real HTTP on both sides: what is forwarded and what is not, answers whole and streamed, an
upgrade carried byte for byte both ways, and a 503 when the node's server cannot be reached.

The node's side here is a test handler behind the real :class:`NodeStreamEndpoint`, so that
each answer's framing can be chosen; kubectl against the real node through a front-end process
is ``tests/node/test_front_end_streams.py``."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import orjson
import pytest
from aiohttp import ClientSession, web
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict

from kubeloop.apiserver.http.errormiddleware import error_middleware
from kubeloop.apiserver.http.nodestreams import (
    NODE_STREAM_PATH,
    NodeStreamEndpoint,
    NodeStreamRelay,
    _chunks,
    _response_head,
)
from kubeloop.apiserver.http.spdytransport import taken_over


def reader_of(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


@given(
    parts=st.lists(st.binary(min_size=1, max_size=300), max_size=8),
    extensions=st.lists(st.sampled_from(["", ";a=b", ';name="quoted"', "  "]), min_size=8, max_size=8),
    trailers=st.lists(st.sampled_from(["X-Checksum: 1", "Expires: never"]), max_size=2),
    after=st.binary(max_size=20),
)
def test_a_chunked_body_is_its_chunks_data(
    parts: list[bytes], extensions: list[str], trailers: list[str], after: bytes
) -> None:
    """Any chunking of a body, with chunk extensions and trailers, reads as the body's pieces;
    the bytes after it are left unread."""
    encoded = b"".join(f"{len(p):X}{extensions[i]}\r\n".encode() + p + b"\r\n" for i, p in enumerate(parts))
    encoded += b"0\r\n" + b"".join(t.encode() + b"\r\n" for t in trailers) + b"\r\n" + after

    async def read() -> tuple[list[bytes], bytes]:
        reader = reader_of(encoded)
        return [chunk async for chunk in _chunks(reader)], await reader.read()

    assert asyncio.run(read()) == (parts, after)


def test_a_response_head_is_read_with_every_header() -> None:
    head = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: SPDY/3.1\r\nX-Two: 1\r\nx-two: 2\r\n\r\nrest"

    async def read() -> tuple[int, CIMultiDict[str], bytes]:
        reader = reader_of(head)
        status, headers = await _response_head(reader)
        return status, headers, await reader.read()

    status, headers, rest = asyncio.run(read())
    assert (status, headers["Upgrade"], headers.getall("X-Two"), rest) == (101, "SPDY/3.1", ["1", "2"], b"rest")

    async def not_http() -> None:
        await _response_head(reader_of(b"SSH-2.0-OpenSSH\r\n\r\n"))

    with pytest.raises(ValueError):
        asyncio.run(not_http())


class Node:
    """The node's side: answers by subresource, and remembers the heads it was sent."""

    def __init__(self) -> None:
        self.heads: list[CIMultiDict[str]] = []
        #: Set when an upgraded connection ended from the client's side.
        self.client_gone = asyncio.Event()

    async def serve(self, request: web.Request) -> web.StreamResponse:
        self.heads.append(CIMultiDict(request.headers))
        subresource = request.match_info["subresource"]
        if subresource == "log" and request.query.get("follow") != "true":
            return web.json_response({"kind": "Status", "code": 400, "message": "bad log"}, status=400)
        if subresource == "log":
            response = web.StreamResponse()
            response.content_type = "text/plain"
            response.enable_chunked_encoding()
            await response.prepare(request)
            for line in (b"one\n", b"two\n", b"three\n"):
                await response.write(line)
                if request.query.get("die") == "true":  # the node's server dies mid-stream
                    assert request.transport is not None
                    request.transport.abort()
                    return response
            await response.write_eof()
            return response
        # exec: an upgrade to a protocol that answers each piece reversed until the client's end
        response = web.StreamResponse(status=101, headers={"Connection": "Upgrade", "Upgrade": "reversal"})
        await response.prepare(request)
        receive, send = taken_over(request)
        while (data := await receive()) and data != b"quit":
            await send(data[::-1])
        if data:
            await send(b"bye")
        else:
            self.client_gone.set()
        assert request.transport is not None
        request.transport.close()
        return response


@contextlib.asynccontextmanager
async def front_end(relay: NodeStreamRelay) -> AsyncIterator[str]:
    """A front-end's port (real HTTP) whose pods' streams go through ``relay``."""

    async def serve(request: web.Request) -> web.StreamResponse:
        return await relay.relay(request)

    app = web.Application(middlewares=[error_middleware])
    app.add_routes([web.route("*", NODE_STREAM_PATH, serve)])
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture
async def relayed() -> AsyncIterator[tuple[str, Node, list[int]]]:
    """A front-end's port whose pods' streams are relayed to :class:`Node`; and how many
    connections the relay opened."""
    node = Node()
    endpoint = NodeStreamEndpoint(node.serve)
    await endpoint.start()
    dialed: list[int] = []

    async def dial() -> socket.socket:
        ours, theirs = socket.socketpair()
        endpoint.serve(ours)
        dialed.append(1)
        return theirs

    try:
        async with front_end(NodeStreamRelay(dial)) as url:
            yield url, node, dialed
    finally:
        await endpoint.stop()


async def test_answers_come_back_whole_or_as_they_are_written(relayed: tuple[str, Node, list[int]]) -> None:
    url, node, dialed = relayed
    base = f"{url}/api/v1/namespaces/default/pods/p/log"
    async with ClientSession() as client:
        async with client.get(base, headers={"Authorization": "Bearer secret", "Impersonate-User": "bob",
                                             "Impersonate-Extra-Scopes": "x", "Accept": "text/plain"}) as answer:  # fmt: skip
            assert answer.status == 400
            assert answer.content_type == "application/json"
            assert orjson.loads(await answer.read())["message"] == "bad log"
        async with client.get(base + "?follow=true") as answer:
            assert answer.status == 200 and answer.headers["Transfer-Encoding"] == "chunked"
            assert [line async for line in answer.content] == [b"one\n", b"two\n", b"three\n"]
    first = node.heads[0]
    # Who the client is was the front-end's to judge: nothing of it reaches the node.
    assert not {"Authorization", "Impersonate-User", "Impersonate-Extra-Scopes"} & set(first)
    assert first["Accept"] == "text/plain" and first["Connection"] == "close"
    assert len(dialed) == 2  # a connection for each


async def upgraded(
    url: str, method: str, extra: bytes = b""
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    """A connection to ``url`` that asked for an exec upgraded to the node's protocol; the
    answer's head."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        f"{method} /api/v1/namespaces/default/pods/p/exec?command=sh HTTP/1.1\r\nHost: x\r\n".encode()
        + b"Connection: Upgrade\r\nUpgrade: reversal\r\n" + extra + b"\r\n"
    )
    return reader, writer, await reader.readuntil(b"\r\n\r\n")


async def test_an_upgrade_is_relayed_byte_for_byte_both_ways(relayed: tuple[str, Node, list[int]]) -> None:
    url, node, _ = relayed
    reader, writer, head = await upgraded(url, "POST", b"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n")
    assert head.startswith(b"HTTP/1.1 101") and b"Upgrade: reversal" in head
    for piece in (b"abc", b"hello", bytes(range(256))):
        writer.write(piece)
        assert await reader.readexactly(len(piece)) == piece[::-1]
    writer.write(b"quit")  # the node's last bytes and its end come back
    assert await reader.read() == b"bye"
    writer.close()
    assert node.heads[0]["Upgrade"] == "reversal"
    assert node.heads[0]["X-Stream-Protocol-Version"] == "v4.channel.k8s.io"


async def test_a_client_that_goes_ends_the_nodes_side(relayed: tuple[str, Node, list[int]]) -> None:
    url, node, _ = relayed
    reader, writer, _ = await upgraded(url, "GET")
    writer.write(b"ping")
    assert await reader.readexactly(4) == b"gnip"
    writer.close()
    await node.client_gone.wait()


async def test_an_unreachable_node_is_a_503_status() -> None:
    async def dial() -> socket.socket:
        raise ConnectionRefusedError("the owner has gone")

    async with (
        front_end(NodeStreamRelay(dial)) as url,
        ClientSession() as client,
        client.get(f"{url}/api/v1/namespaces/default/pods/p/log") as answer,
    ):
        status = orjson.loads(await answer.read())
    assert answer.status == 503 and status["kind"] == "Status" and status["code"] == 503
    assert "the node's server cannot be reached" in status["message"]


async def test_a_stream_the_node_breaks_off_ends_unfinished_for_the_client(relayed: tuple[str, Node, list[int]]) -> None:
    """The node's server dies while a log is followed: the client gets what was written and
    then the connection's end with no last chunk (as from a kubelet that dies), not an error
    written into the stream nor a clean end."""
    url, _, _ = relayed
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GET /api/v1/namespaces/default/pods/p/log?follow=true&die=true HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    answer = await reader.read()
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"chunked" in head.lower()
    assert body == b"4\r\none\n\r\n", body
