"""``pods/<name>/exec``: a command run in a local pod's container, streamed over a WebSocket as
kubectl (1.30 and later) and the official client speak it.

The query is upstream's: ``command`` (repeated, one per argument), ``container``, ``stdin``,
``stdout``, ``stderr``, ``tty``. The request must be a WebSocket upgrade offering
``v5.channel.k8s.io`` or ``v4.channel.k8s.io`` (SPDY, which kubectl before 1.30 speaks, is
refused with a 400 saying so). Each message is a channel byte, then data: 0 stdin, 1 stdout,
2 stderr, 3 the error channel, 4 a terminal's new size (``{"Width": w, "Height": h}``), and, in
v5, 255 closing a channel (``[255, 0]``: stdin has ended). When the command ends, the error
channel carries its end as a Status: Success, or Failure with reason NonZeroExitCode and the
exit code as the ExitCode cause (what kubectl turns into its own exit code); a command that
cannot start is an InternalError there. A client that goes away takes the command with it.

Mistakes before the upgrade are 400s in upstream's words: no command, none of stdin, stdout
and stderr, a container that is not the pod's or not running, a pod the node does not run as
processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import orjson
from aiohttp import WSMessage, WSMsgType, web

from kubeloop import errors
from kubeloop.apiserver.http.http1 import HTTPRequest
from kubeloop.apiserver.http.podcontainers import chosen_container
from kubeloop.apiserver.http.scope import Scope, Target
from kubeloop.apiserver.http.spdytransport import wants_spdy
from kubeloop.apiserver.http.streamchannels import (
    CLOSE,
    ERROR,
    RESIZE,
    STDERR,
    STDIN,
    STDOUT,
    Channels,
    serve_spdy,
)
from kubeloop.node.sessions import CommandFailed, CommandRefused, ExecSession, ProcessNode

#: The channel protocols served, best first.
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
#: How long output may go on after the command ended (what its children still write).
OUTPUT_GRACE_SECONDS = 2.0
READ_BYTES = 32 * 1024
#: How often a command whose output is still held is looked at for its exit.
EXIT_POLL_SECONDS = 0.2
#: How long a terminal's command waits for the client to say the terminal's size.
FIRST_SIZE_SECONDS = 1.0


def truthy(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes")


async def pod_exec(
    scope: Scope, request: HTTPRequest, target: Target, node: ProcessNode | None
) -> web.StreamResponse:
    assert target.namespace is not None and target.name is not None
    namespace, name = target.namespace, target.name
    pod = await scope.registry.read(lambda: scope.registry.get(target.resource, namespace, name))
    command = list(request.query.getall("command", []))
    if not command:
        raise errors.BadRequest("you must specify at least one command for the container")
    stdin, stdout, stderr, tty = (truthy(request.query.get(k)) for k in ("stdin", "stdout", "stderr", "tty"))
    if not (stdin or stdout or stderr):
        raise errors.BadRequest("you must specify at least 1 of stdin, stdout, stderr")
    container = chosen_container(request, pod)
    if node is None:
        raise simulated_only(name)
    # The pod's own refusals come first: kubectl tries SPDY after a refused WebSocket, and
    # must hear the same reason again.
    try:
        session = await node.exec_in(pod, container, command, stdin=stdin, tty=tty)
    except CommandRefused as refused:
        raise errors.BadRequest(f"unable to upgrade connection: {refused}") from None
    if wants_spdy(request):  # kubectl before 1.30
        wanted = {"error", *(["stdin"] if stdin else []), *(["stdout"] if stdout else [])}
        wanted |= {"resize"} if tty else ({"stderr"} if stderr else set())
        try:
            return await serve_spdy(request, wanted, lambda channels: _run(channels, session, command, tty=tty))
        finally:
            session.kill()
            session.close()
    socket, protocol = channel_socket(request)
    assert isinstance(request, web.Request)  # an upgrade: channel_socket has seen to it
    await socket.prepare(request)
    try:
        channels = WebSocketChannels(socket, protocol)
        await _run(channels, session, command, tty=tty, stdout=stdout, stderr=stderr)
    finally:
        session.kill()
        session.close()
        await socket.close()
    return socket


async def _run(
    channels: Channels, session: ExecSession, command: list[str], *, tty: bool, stdout: bool = True, stderr: bool = True
) -> None:
    """Start the command (with a terminal, at the client's size) and carry its streams."""
    early: list[bytes] = []
    size = (0, 0)
    if tty:  # a terminal starts at the client's size: its first message says it
        size = await _first_size(channels, early)
    try:
        await session.start(*size)
    except CommandFailed as failed:  # said on the error channel, as the kubelet says it
        await send_status(channels, _internal_error(str(failed)))
        return
    for data in early:
        await _take(data, session, channels.closes_stdin)
    await _stream(channels, session, command, stdout=stdout, stderr=stderr and not tty)


class WebSocketChannels:
    """The channels over a prepared WebSocket: each message a channel byte, then data."""

    def __init__(self, socket: web.WebSocketResponse, protocol: str) -> None:
        self.socket = socket
        #: v5 says stdin's end with a close message; v4 cannot.
        self.closes_stdin = protocol.startswith("v5.")

    async def send(self, channel: int, data: bytes) -> None:
        if not self.socket.closed:
            with contextlib.suppress(ConnectionError):
                await self.socket.send_bytes(bytes([channel]) + data)

    async def receive(self) -> bytes | None:
        return data_of(await self.socket.receive())


def simulated_only(name: str) -> errors.APIError:
    """The 400 for a stream into a pod when the server runs no process node."""
    return errors.BadRequest(
        f"pod {name} runs no processes: the node only simulates its images (run them with "
        "kubeloop apiserver --simulate --local-image)"
    )


def channel_socket(request: HTTPRequest) -> tuple[web.WebSocketResponse, str]:
    """A WebSocket to answer ``request`` with, not yet prepared, and the channel protocol
    chosen; 400 when the request is not an upgrade to one of them (SPDY's named)."""
    if not isinstance(request, web.Request) or request.headers.get("Upgrade", "").lower() != "websocket":
        offered = request.headers.get("Upgrade", "")
        raise errors.BadRequest(
            f"unable to upgrade connection: {offered} is not served, only WebSocket "
            f"({', '.join(PROTOCOLS)}: kubectl 1.30 or later)"
            if offered
            else "Upgrade request required"
        )
    socket = web.WebSocketResponse(protocols=PROTOCOLS, autoping=True, max_msg_size=4 * 1024 * 1024)
    ready = socket.can_prepare(request)
    if not ready.ok or ready.protocol is None:
        raise errors.BadRequest(f"unable to upgrade connection: the client offers none of {', '.join(PROTOCOLS)}")
    return socket, ready.protocol


async def _first_size(channels: Channels, early: list[bytes]) -> tuple[int, int]:
    """The terminal's size from the client's first resize, waited for briefly; what came
    before it is kept in ``early``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FIRST_SIZE_SECONDS
    while (left := deadline - loop.time()) > 0:
        try:
            data = await asyncio.wait_for(channels.receive(), left)
        except TimeoutError:
            break
        if data is None:
            break
        if data[:1] == bytes([RESIZE]):
            size = parse_size(data[1:])
            if size is not None:
                return size
        early.append(data)
    return 0, 0


def data_of(message: WSMessage) -> bytes | None:
    """A message's bytes (text frames carry a channel character and text, as the official
    client sends a str); None when the client has gone."""
    if message.type == WSMsgType.BINARY:
        return bytes(message.data)
    if message.type == WSMsgType.TEXT:
        return str(message.data).encode()
    if message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
        return None
    return b""


def parse_size(payload: bytes) -> tuple[int, int] | None:
    try:
        size = orjson.loads(payload)
        return int(size.get("Width") or 0), int(size.get("Height") or 0)
    except (orjson.JSONDecodeError, TypeError, ValueError, AttributeError):
        return None


async def _stream(
    channels: Channels, session: ExecSession, command: list[str], *, stdout: bool, stderr: bool
) -> None:
    """Carry the session's streams over ``channels`` until the command has ended (and said all
    it had), or the client has gone; then its end on the error channel."""
    process = session.process
    outputs: list[asyncio.Task[None]] = []
    if session.terminal is not None:
        outputs.append(asyncio.create_task(_forward(channels, STDOUT, _terminal_output(session.terminal), True)))
    else:
        assert process.stdout is not None and process.stderr is not None
        outputs.append(asyncio.create_task(_forward(channels, STDOUT, _pipe_output(process.stdout), stdout)))
        outputs.append(asyncio.create_task(_forward(channels, STDERR, _pipe_output(process.stderr), stderr)))
    inputs = asyncio.create_task(_take_input(channels, session))
    waiting = asyncio.create_task(_exited(process))
    racers: list[asyncio.Task[Any]] = [waiting, inputs]
    try:
        await asyncio.wait(racers, return_when=asyncio.FIRST_COMPLETED)
        if not waiting.done():  # the client went: the command goes with it
            return
        _, late = await asyncio.wait(outputs, timeout=OUTPUT_GRACE_SECONDS)
        for task in late:
            task.cancel()
        code = waiting.result()
        await send_status(channels, _ended(command, code))
    finally:
        for task in (*outputs, *racers):
            task.cancel()
        await asyncio.gather(*outputs, *racers, return_exceptions=True)


async def _exited(process: asyncio.subprocess.Process) -> int:
    """The command's exit code once it exits (``wait()`` would wait for whatever it left running
    that still holds its output)."""
    waiting = asyncio.ensure_future(process.wait())
    try:
        while not waiting.done() and process.returncode is None:
            await asyncio.wait({waiting}, timeout=EXIT_POLL_SECONDS)
    finally:
        waiting.cancel()
    assert process.returncode is not None
    return process.returncode


async def _forward(channels: Channels, channel: int, chunks: AsyncIterator[bytes], send: bool) -> None:
    """Each chunk of output to the client on ``channel`` (or, not ``send``, nowhere)."""
    async for chunk in chunks:
        if send:
            await channels.send(channel, chunk)


async def _pipe_output(stream: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while chunk := await stream.read(READ_BYTES):
        yield chunk


async def _terminal_output(terminal: int) -> AsyncIterator[bytes]:
    """What the terminal shows, until every process holding it has gone (EIO)."""
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[bytes] = asyncio.Queue()

    def readable() -> None:
        try:
            chunk = os.read(terminal, READ_BYTES)
        except BlockingIOError:
            return  # nothing after all: wait for the next wake
        except OSError:
            chunk = b""
        if not chunk:
            loop.remove_reader(terminal)
        chunks.put_nowait(chunk)

    loop.add_reader(terminal, readable)
    try:
        while chunk := await chunks.get():
            yield chunk
    finally:
        with contextlib.suppress(OSError, ValueError):
            loop.remove_reader(terminal)


async def _take_input(channels: Channels, session: ExecSession) -> None:
    """The client's messages, until it has gone."""
    while (data := await channels.receive()) is not None:
        await _take(data, session, channels.closes_stdin)


async def _take(data: bytes, session: ExecSession, closes_stdin: bool) -> None:
    """One message of the client's: stdin's data, a terminal's size, stdin's end (v5, SPDY)."""
    if not data:
        return
    channel, payload = data[0], data[1:]
    if channel == STDIN and payload:
        await session.write(payload)
    elif channel == RESIZE:
        size = parse_size(payload)
        if size is not None:
            session.resize(*size)
    elif channel == CLOSE and closes_stdin and payload[:1] == bytes([STDIN]):
        await session.end_input()


def _ended(command: list[str], code: int) -> dict[str, object]:
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    exit_code = code if code > 0 else 128 - code
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: error executing command {command}, exit code {exit_code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(exit_code)}]},
    }


def _internal_error(message: str) -> dict[str, object]:
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"Internal error occurred: error executing command in container: {message}",
        "reason": "InternalError",
        "details": {"causes": [{"message": f"error executing command in container: {message}"}]},
        "code": 500,
    }


async def send_status(channels: Channels, status: dict[str, object]) -> None:
    """The command's end, on the error channel (v4 and later: a Status)."""
    await channels.send(ERROR, orjson.dumps(status))
