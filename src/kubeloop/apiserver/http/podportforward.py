"""``pods/<name>/portforward``: a local pod's ports reached through the API server, as kubectl
and the official client ask for them.

kubectl speaks SPDY (``portforward.k8s.io``): tunneled in a WebSocket whose subprotocol is
``SPDY/3.1+portforward.k8s.io`` (1.31 and later), else after an HTTP upgrade. Each local
connection is a pair of streams with headers ``streamtype`` (error, data), ``port`` and
``requestid``; once both are there the node connects to the pod's port and carries the data
stream both ways; a failure is written on the error stream (which ends kubectl's session, as
upstream's does); the pod's end of the connection ends both streams.

The official client speaks ``v4.channel.k8s.io``:

The query names the ports (``ports``, for this protocol only, repeated or comma-separated, each from 1 to 65535). Each
port ``i`` of the list has two channels: ``2i`` carries its data and ``2i+1`` its errors; the
first message of each is the port's number (two bytes, little-endian), as the kubelet sends it.
The node connects to the pod's address at that port when the WebSocket opens; what the client
sends on a data channel goes to the pod, what the pod answers comes back on it. A port that
cannot be reached gets the reason on its error channel. The pod's processes share this
machine's network: a pod's address is where they listen.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from kubeloop import errors
from kubeloop.apiserver.http.http1 import HTTPRequest
from kubeloop.apiserver.http.podexec import data_of, simulated_only
from kubeloop.apiserver.http.scope import Scope, Target
from kubeloop.apiserver.http.spdy import SpdySession, SpdyStream
from kubeloop.apiserver.http.spdytransport import (
    chosen_version,
    tunnel_protocols,
    tunneled,
    upgrade,
    wants_spdy,
)
from kubeloop.node.sessions import CommandRefused, ProcessNode

PROTOCOLS = ("v4.channel.k8s.io",)
SPDY_PROTOCOL = "portforward.k8s.io"
TUNNELS = tunnel_protocols(SPDY_PROTOCOL)
READ_BYTES = 64 * 1024
#: How long the client may go on writing to a pod's connection that has ended its side.
READ_GRACE_SECONDS = 1.0


def ports_of(request: HTTPRequest) -> list[int]:
    """The ports the query names; 400 naming a bad one."""
    ports: list[int] = []
    for value in request.query.getall("ports", []):
        if not value:
            raise errors.BadRequest('query parameter "ports" cannot be empty')
        for text in value.split(","):
            if not text.strip().isdigit() or not 0 < int(text) < 65536:
                raise errors.BadRequest(f'invalid port "{text}": must be a number from 1 to 65535')
            ports.append(int(text))
    if not ports:
        raise errors.BadRequest('query parameter "ports" is required')
    return ports


@dataclass
class _Port:
    number: int
    index: int
    writer: asyncio.StreamWriter | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


async def pod_port_forward(
    scope: Scope, request: HTTPRequest, target: Target, node: ProcessNode | None
) -> web.StreamResponse:
    assert target.namespace is not None and target.name is not None
    namespace, name = target.namespace, target.name
    pod = await scope.registry.read(lambda: scope.registry.get(target.resource, namespace, name))
    if node is None:
        raise simulated_only(name)
    try:
        host = node.address_of(pod)
    except CommandRefused as refused:
        raise errors.BadRequest(f"unable to upgrade connection: {refused}") from None
    label = f"pod {name}, uid {(pod.get('metadata') or {}).get('uid')}"
    if wants_spdy(request):
        chosen_version(request, (SPDY_PROTOCOL,))
        session, response = await upgrade(request, SPDY_PROTOCOL)
        try:
            await _serve_spdy(session, host, label)
        finally:
            if request.transport is not None:  # None: the client has gone
                request.transport.close()
        return response
    if not isinstance(request, web.Request) or request.headers.get("Upgrade", "").lower() != "websocket":
        ports_of(request)  # a mistake there is said first
        raise errors.BadRequest("Upgrade request required")
    socket = web.WebSocketResponse(protocols=(*TUNNELS, *PROTOCOLS), autoping=True, max_msg_size=4 * 1024 * 1024)
    ready = socket.can_prepare(request)
    if not ready.ok or ready.protocol is None:
        raise errors.BadRequest(
            f"unable to upgrade connection: the client offers none of {', '.join((*TUNNELS, *PROTOCOLS))}"
        )
    ports = [] if ready.protocol in TUNNELS else ports_of(request)  # SPDY names them in its streams
    await socket.prepare(request)
    if ready.protocol in TUNNELS:
        try:
            await _serve_spdy(tunneled(socket), host, label)
        finally:
            await socket.close()
        return socket
    forwarded = [_Port(number, index) for index, number in enumerate(ports)]
    try:
        for port in forwarded:
            number = port.number.to_bytes(2, "little")
            await socket.send_bytes(bytes([2 * port.index]) + number)
            await socket.send_bytes(bytes([2 * port.index + 1]) + number)
        for port in forwarded:
            await _connect(socket, port, host)
        backs = [task for port in forwarded for task in port.tasks]
        if backs:  # when every port's connection has ended, so has the forwarding (upstream's)
            racers: list[asyncio.Future[Any]] = [
                asyncio.create_task(_take_input(socket, forwarded)),
                asyncio.gather(*backs, return_exceptions=True),
            ]
            await asyncio.wait(racers, return_when=asyncio.FIRST_COMPLETED)
            for racer in racers:
                racer.cancel()
            await asyncio.gather(*racers, return_exceptions=True)
    finally:
        for port in forwarded:
            if port.writer is not None:
                port.writer.close()
            for task in port.tasks:
                task.cancel()
            await asyncio.gather(*port.tasks, return_exceptions=True)
        await socket.close()
    return socket


async def _take_input(socket: web.WebSocketResponse, forwarded: list[_Port]) -> None:
    """What the client sends on data channels, to the pods' ports, until it has gone."""
    while (data := data_of(await socket.receive())) is not None:
        if not data:
            continue
        channel, payload = data[0], data[1:]
        if channel % 2 or channel // 2 >= len(forwarded) or not payload:
            continue
        writer = forwarded[channel // 2].writer
        if writer is not None and not writer.is_closing():
            writer.write(payload)
            with contextlib.suppress(ConnectionError):
                await writer.drain()


async def _connect(socket: web.WebSocketResponse, port: _Port, host: str) -> None:
    """Connect to the pod's port, and carry what it sends back; an error channel message when it
    cannot be reached."""
    try:
        reader, port.writer = await asyncio.open_connection(host, port.number)
    except OSError as exc:
        await _say(socket, port, f"error forwarding port {port.number} to pod: {exc.strerror or exc}")
        return
    port.tasks.append(asyncio.create_task(_back(socket, port, reader), name=f"port-forward {port.number}"))


async def _back(socket: web.WebSocketResponse, port: _Port, reader: asyncio.StreamReader) -> None:
    prefix = bytes([2 * port.index])
    with contextlib.suppress(ConnectionError):
        while chunk := await reader.read(READ_BYTES):
            if socket.closed:
                return
            await socket.send_bytes(prefix + chunk)


async def _say(socket: web.WebSocketResponse, port: _Port, message: str) -> None:
    if not socket.closed:
        with contextlib.suppress(ConnectionError):
            await socket.send_bytes(bytes([2 * port.index + 1]) + message.encode())


# ---------------------------------------------------------------------------- SPDY (kubectl)


async def _serve_spdy(session: SpdySession, host: str, label: str) -> None:
    """Pair each connection's error and data streams by ``requestid`` and forward each pair,
    until the client ends the session."""
    reading = asyncio.create_task(session.run(), name="spdy port-forward")
    pairs: dict[str, dict[str, SpdyStream]] = {}
    forwards: set[asyncio.Task[None]] = set()
    try:
        while (stream := await session.accept()) is not None:
            kind = stream.headers.get("streamtype", "")
            port = stream.headers.get("port", "")
            if kind not in ("data", "error") or not port.isdigit() or not 0 < int(port) < 65536:
                await stream.reset()
                continue
            request_id = stream.headers.get("requestid") or str(stream.id if kind == "error" else stream.id - 2)
            pair = pairs.setdefault(request_id, {})
            if kind in pair or any(s.headers.get("port") != port for s in pair.values()):
                await stream.reset()  # a second stream of its type, or another port: not a pair
                continue
            pair[kind] = stream
            if len(pair) == 2:
                del pairs[request_id]
                task = asyncio.create_task(_forward_pair(pair["data"], pair["error"], host, int(port), label))
                forwards.add(task)
                task.add_done_callback(forwards.discard)
    finally:
        for task in (*forwards, reading):
            task.cancel()
        await asyncio.gather(*forwards, reading, return_exceptions=True)


async def _forward_pair(data: SpdyStream, error: SpdyStream, host: str, port: int, label: str) -> None:
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as exc:
        await error.write(f"error forwarding port {port} to {label}: {exc.strerror or exc}".encode())
        await error.close()
        await data.close()
        return

    async def to_pod() -> None:
        while chunk := await data.read():
            writer.write(chunk)
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        with contextlib.suppress(OSError):
            if writer.can_write_eof():
                writer.write_eof()

    sending = asyncio.create_task(to_pod())
    try:
        with contextlib.suppress(ConnectionError):
            while chunk := await reader.read(READ_BYTES):
                await data.write(chunk)
        await data.close()
        await error.close()
        await asyncio.wait({sending}, timeout=READ_GRACE_SECONDS)
    finally:
        sending.cancel()
        await asyncio.gather(sending, return_exceptions=True)
        writer.close()
