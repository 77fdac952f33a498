"""``pods/<name>/portforward``: a local pod's ports reached through the API server, over a
WebSocket as the official client speaks it (``v4.channel.k8s.io``).

The query names the ports (``ports``, repeated or comma-separated, each from 1 to 65535). Each
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
from kubeloop.apiserver.http.podexec import data_of
from kubeloop.apiserver.http.scope import CommandRefused, ProcessNode, Scope, Target

PROTOCOLS = ("v4.channel.k8s.io",)
READ_BYTES = 64 * 1024


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
    ports = ports_of(request)
    if node is None:
        raise errors.BadRequest(
            f"pod {name} runs no processes: the node only simulates its images (run them with "
            "kubeloop apiserver --simulate --local-image)"
        )
    try:
        host = node.address_of(pod)
    except CommandRefused as refused:
        raise errors.BadRequest(f"unable to upgrade connection: {refused}") from None
    if not isinstance(request, web.Request) or request.headers.get("Upgrade", "").lower() != "websocket":
        raise errors.BadRequest("Upgrade request required")
    socket = web.WebSocketResponse(protocols=PROTOCOLS, autoping=True, max_msg_size=4 * 1024 * 1024)
    ready = socket.can_prepare(request)
    if not ready.ok or ready.protocol is None:
        raise errors.BadRequest(f"unable to upgrade connection: the client offers none of {', '.join(PROTOCOLS)}")
    await socket.prepare(request)
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
