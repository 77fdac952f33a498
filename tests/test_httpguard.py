"""``kubeloop.GuardedSite``: the operator's HTTP servers (webhooks, metrics and probes, the console,
an operator's own endpoint) close a connection whose request head does not come in time
(slowloris, trickled or stalled), keep an idle keep-alive connection between requests, follow
bodies by their length, and refuse connections past their cap. Over real sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

import kubeloop
from kubeloop import certs
from kubeloop.testing import eventually


async def echo(request: web.Request) -> web.Response:
    return web.Response(body=await request.read())


async def hello(request: web.Request) -> web.Response:
    return web.Response(text="ok")


@pytest.fixture
async def server() -> AsyncIterator[tuple[int, kubeloop.GuardedSite]]:
    app = web.Application()
    app.router.add_post("/echo", echo)
    app.router.add_get("/", hello)
    runner = kubeloop.guarded_runner(app)
    await runner.setup()
    site = kubeloop.GuardedSite(
        runner, "127.0.0.1", 0, limits=kubeloop.ConnectionLimits(header=0.5, max_connections=3)
    )
    await site.start()
    try:
        yield int(runner.addresses[0][1]), site
    finally:
        await runner.cleanup()


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bytes:
    """Send ``request``; the answer's body (read by its Content-Length)."""
    writer.write(request)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    return await reader.readexactly(length)


async def closed_by_the_server(reader: asyncio.StreamReader) -> bool:
    return await reader.read() == b""


async def test_a_stalled_and_a_trickled_head_are_closed_and_a_quiet_keep_alive_is_not(
    server: tuple[int, kubeloop.GuardedSite],
) -> None:
    port, _ = server
    # A keep-alive connection with one exchange behind it, then quiet.
    quiet_reader, quiet_writer = await connect(port)
    assert await exchange(quiet_reader, quiet_writer, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") == b"ok"
    # Half a head, then nothing: closed by the guard.
    stalled_reader, stalled_writer = await connect(port)
    stalled_writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")
    await stalled_writer.drain()
    assert await asyncio.wait_for(closed_by_the_server(stalled_reader), 60)
    # A head trickled a byte at a time, each in time for aiohttp, never done: closed too.
    trickled_reader, trickled_writer = await connect(port)
    trickle = b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 10_000
    sent = 0
    with pytest.raises((ConnectionError, OSError)):
        for byte in trickle:
            trickled_writer.write(bytes([byte]))
            await trickled_writer.drain()
            sent += 1
            if trickled_reader.at_eof():
                raise ConnectionResetError("closed")
            await asyncio.sleep(0.05)
    assert sent < len(trickle)
    # The quiet keep-alive connection outlived both (it was reading no head): it still answers.
    assert await exchange(quiet_reader, quiet_writer, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") == b"ok"
    quiet_writer.close()


async def test_bodies_are_followed_by_their_length(server: tuple[int, kubeloop.GuardedSite]) -> None:
    port, _ = server
    reader, writer = await connect(port)
    body = b'{"a": "\r\n\r\nGET / HTTP/1.1"}'  # what looks like a head, inside a body
    request = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    for _ in range(3):
        assert await exchange(reader, writer, request) == body
    writer.close()


async def test_connections_past_the_cap_are_refused(server: tuple[int, kubeloop.GuardedSite]) -> None:
    port, site = server
    held = [await connect(port) for _ in range(3)]
    for reader, writer in held:
        assert await exchange(reader, writer, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") == b"ok"
    assert site.connections == 3
    one_more, _ = await connect(port)
    assert await asyncio.wait_for(closed_by_the_server(one_more), 60)
    held[0][1].close()
    await held[0][1].wait_closed()
    await eventually(lambda: site.connections == 2)  # the server sees the close
    reader, writer = await connect(port)
    assert await exchange(reader, writer, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") == b"ok"
    for _, other in held[1:]:
        other.close()
    writer.close()


async def test_the_webhook_server_is_guarded() -> None:
    """The operator's webhook server (TLS) closes a stalled head too: with failurePolicy Fail, a
    few hundred such connections would otherwise block every write of its kinds."""
    hooks = kubeloop.WebhookServer(port=0, limits=kubeloop.ConnectionLimits(header=0.5))
    await hooks.start()
    try:
        assert hooks.ca_bundle is not None
        context = certs.client_ssl_context(hooks.ca_bundle)
        port = int(hooks.address.rpartition(":")[2])
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=context, server_hostname="localhost"
        )
        writer.write(b"POST /validate HTTP/1.1\r\nHost: x\r\n")
        await writer.drain()
        assert await asyncio.wait_for(closed_by_the_server(reader), 60)
    finally:
        await hooks.stop()


async def test_a_tls_handshake_that_never_comes_is_cut_off_in_the_head_time() -> None:
    """A client that opens a TLS connection and says nothing holds it for the head's time, not
    asyncio's 60 s handshake allowance."""
    app = web.Application()
    app.router.add_get("/", hello)
    runner = kubeloop.guarded_runner(app)
    await runner.setup()
    issued = certs.issue_serving_certificate(certs.DEFAULT_HOSTS)
    context = certs.serving_context()
    certs.load_pair(context, issued.cert_pem, issued.key_pem)
    site = kubeloop.GuardedSite(
        runner, "127.0.0.1", 0, ssl_context=context, limits=kubeloop.ConnectionLimits(header=0.5)
    )
    await site.start()
    try:
        silent, _ = await connect(int(runner.addresses[0][1]))  # TCP only: no ClientHello
        assert await asyncio.wait_for(closed_by_the_server(silent), 30)
    finally:
        await runner.cleanup()
