"""Pods' logs, exec, attach and port-forwards, served by the process that runs the node.

With ``kubeloop apiserver --workers N`` the process node runs in the server that owns the store.
A front-end process asked for a pod's stream (``log``, ``exec``, ``attach``, ``portforward``)
authenticates, authorizes, audits and admits it as any request, then relays it to that server,
as kube-apiserver relays these to the pod's kubelet:

- :class:`NodeStreamRelay` (a front-end's) sends the request on a new connection to the owner
  and gives the client what comes back: an upgrade (SPDY, WebSocket) byte for byte both ways
  until either side ends, anything else as the owner answered it (a followed log chunk by chunk).
- :class:`NodeStreamEndpoint` (the owner's) serves those connections, pods' streams and nothing
  else, without authenticating them again: only front-end processes have a way to it
  (:mod:`~kubeloop.apiserver.connectionhandoff`), as a kubelet serves the API server that calls
  it. The front-end has judged the request; the owner reads the pod and runs the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web
from multidict import CIMultiDict

from kubeloop import errors
from kubeloop.apiserver.http.errormiddleware import error_middleware
from kubeloop.apiserver.http.http1 import HTTPRequest
from kubeloop.apiserver.http.spdytransport import taken_over

log = logging.getLogger("kubeloop.apiserver.nodestreams")

#: The subresources of a pod served by the node that runs it.
NODE_STREAMS = frozenset(("log", "exec", "attach", "portforward"))
#: Where the owner's endpoint serves them (the API's own paths).
NODE_STREAM_PATH = "/api/v1/namespaces/{namespace}/pods/{name}/{subresource}"
#: The longest response head the owner is read for.
MAX_HEAD_BYTES = 64 * 1024
#: Bytes relayed at a time.
RELAY_BYTES = 64 * 1024

#: Headers of one connection, not of the request: the relay sets its own.
_HOP_BY_HOP = frozenset(
    ("connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "content-length")
)
#: Who the client is: judged by the front-end, never the owner's to judge again.
_CREDENTIALS = ("authorization", "impersonate-")
#: Set by whichever server writes the answer.
_SERVERS_OWN = frozenset(("date", "server"))

Dial = Callable[[], Awaitable[socket.socket]]
#: How an answer from the node's server breaks off: it went, or what came was not HTTP.
_CUT_SHORT = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError)


class NodeStreamRelay:
    """A front-end's relay of pods' streams to the server that runs the node (``dial``: a new
    connection to its :class:`NodeStreamEndpoint`)."""

    def __init__(self, dial: Dial) -> None:
        self._dial = dial

    async def relay(self, request: HTTPRequest) -> web.StreamResponse:
        """Serve ``request`` (a pod stream, authorized and admitted here) with the owner's answer."""
        upgrade = request.headers.get("Upgrade")
        try:
            sock = await self._dial()
            reader, writer = await asyncio.open_connection(sock=sock, limit=MAX_HEAD_BYTES)
        except OSError as error:
            raise errors.ServiceUnavailable(f"the node's server cannot be reached: {error}") from None
        try:
            writer.write(_request_head(request, upgrade))
            try:
                status, headers = await _response_head(reader)
            except _CUT_SHORT as error:
                raise errors.ServiceUnavailable(f"the node's server did not answer: {error!r}") from None
            if status == 101 and upgrade is not None:
                return await _tunnel(request, headers, reader, writer)
            return await _answer(request, status, headers, reader)
        finally:
            writer.close()


def _request_head(request: HTTPRequest, upgrade: str | None) -> bytes:
    target = request.raw_path if isinstance(request, web.Request) else request.path_qs
    lines = [f"{request.method} {target} HTTP/1.1"]
    for name, value in request.headers.items():
        lower = name.lower()
        if lower in _HOP_BY_HOP or lower.startswith(_CREDENTIALS):
            continue
        lines.append(f"{name}: {value}")
    if upgrade is not None:
        lines += ["Connection: Upgrade", f"Upgrade: {upgrade}"]
    else:
        lines.append("Connection: close")  # the answer's end is the connection's
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape")


async def _response_head(reader: asyncio.StreamReader) -> tuple[int, CIMultiDict[str]]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("utf-8", "surrogateescape")
    status_line, *fields = head[:-4].split("\r\n")
    version, status, *_reason = status_line.split(" ", 2)
    if not version.startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1 answer: {status_line!r}")
    headers: CIMultiDict[str] = CIMultiDict()
    for field in fields:
        name, _, value = field.partition(":")
        headers.add(name.strip(), value.strip())
    return int(status), headers


def _passed_on(headers: CIMultiDict[str], *keep: str) -> CIMultiDict[str]:
    kept = {name.lower() for name in keep}
    return CIMultiDict(
        (name, value)
        for name, value in headers.items()
        if name.lower() in kept or (name.lower() not in _HOP_BY_HOP and name.lower() not in _SERVERS_OWN)
    )


async def _answer(
    request: HTTPRequest, status: int, headers: CIMultiDict[str], reader: asyncio.StreamReader
) -> web.StreamResponse:
    """The owner's answer, not an upgrade: whole, or (chunked: a followed log) as it comes."""
    chunked = "chunked" in headers.get("Transfer-Encoding", "").lower()
    if not chunked or not isinstance(request, web.Request):  # (read whole by the connection: answered whole)
        try:
            if chunked:
                body = b"".join([chunk async for chunk in _chunks(reader)])
            else:
                length = headers.get("Content-Length")
                body = await (reader.readexactly(int(length)) if length is not None else reader.read())
        except _CUT_SHORT as error:
            raise errors.ServiceUnavailable(f"the node's server ended its answer early: {error!r}") from None
        return web.Response(status=status, body=body, headers=_passed_on(headers))
    response = web.StreamResponse(status=status, headers=_passed_on(headers))
    response.enable_chunked_encoding()
    await response.prepare(request)
    try:
        async for chunk in _chunks(reader):
            await response.write(chunk)
    except _CUT_SHORT:  # (ConnectionError among them)
        # The client went, or the node's server did mid-stream: the stream ends unfinished, with
        # no last chunk (as a kubelet's does when it dies), not with an error written into it.
        if request.transport is not None:
            request.transport.abort()
        return response
    await response.write_eof()
    return response


async def _chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """A chunked body's data, chunk by chunk (RFC 9112 7.1; extensions and trailers skipped)."""
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass
            return
        yield await reader.readexactly(size)
        await reader.readexactly(2)


async def _tunnel(
    request: HTTPRequest, headers: CIMultiDict[str], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> web.StreamResponse:
    """The owner switched protocols: so does the client's connection, and from then on each
    side's bytes are the other's until either ends."""
    assert isinstance(request, web.Request)  # an upgrade never takes the small-request path
    response = web.StreamResponse(status=101, headers=_passed_on(headers, "Connection", "Upgrade"))
    await response.prepare(request)
    receive, send = taken_over(request)

    async def to_owner() -> None:
        while data := await receive():
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    async def to_client() -> None:
        while data := await reader.read(RELAY_BYTES):
            await send(data)

    upstream = asyncio.create_task(to_owner(), name="kubeloop relay to the node")
    try:
        with contextlib.suppress(ConnectionError):
            await to_client()
    finally:
        upstream.cancel()
        await asyncio.gather(upstream, return_exceptions=True)
        if request.transport is not None:
            request.transport.close()
    return response


class NodeStreamEndpoint:
    """The owner's side: serves the connections front-ends open to it (:meth:`serve`) with
    ``serve_stream`` (the API handlers' pod streams, on this process's node)."""

    def __init__(self, serve_stream: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> None:
        self._serve_stream = serve_stream
        self._runner: web.AppRunner | None = None
        self._accepting: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        app = web.Application(middlewares=[error_middleware])
        app.add_routes([web.route("*", NODE_STREAM_PATH, self._serve_stream)])
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()

    def serve(self, connection: socket.socket) -> None:
        """Serve ``connection`` (a front-end's, handed over) on this loop."""
        runner = self._runner
        if runner is None or runner.server is None:
            raise RuntimeError("the node's endpoint is not serving")
        connection.setblocking(False)
        loop = asyncio.get_running_loop()
        task = asyncio.create_task(self._accept(loop, runner, connection), name="kubeloop node stream")
        self._accepting.add(task)
        task.add_done_callback(self._accepting.discard)

    @staticmethod
    async def _accept(loop: asyncio.AbstractEventLoop, runner: web.AppRunner, connection: socket.socket) -> None:
        assert runner.server is not None
        try:
            await loop.connect_accepted_socket(runner.server, connection)
        except BaseException:
            connection.close()
            raise

    async def stop(self) -> None:
        for task in list(self._accepting):
            task.cancel()
        await asyncio.gather(*self._accepting, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
