"""``pods/<name>/attach``: the streams of a local pod's running container, as ``kubectl attach``
and ``kubectl run -it`` reach them, over the WebSocket channel protocol of ``pods/exec``
(:mod:`.podexec`).

The query is upstream's: ``container``, ``stdin``, ``stdout``, ``stderr``, ``tty``. What the
container writes from now on comes on stdout and stderr (a terminal's on stdout); what the
client sends goes to the container's stdin (its pipe, with ``stdin: true``, or its terminal,
with ``tty: true``), a resize to its terminal. The session ends with the container's run
(Success on the error channel) or when the client goes; with ``stdinOnce`` the container's stdin
ends when the input of the one who had it ends, or when they go.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from kubeloop import errors
from kubeloop.apiserver.http.http1 import HTTPRequest
from kubeloop.apiserver.http.podcontainers import chosen_container
from kubeloop.apiserver.http.podexec import (
    WebSocketChannels,
    channel_socket,
    parse_size,
    send_status,
    simulated_only,
    truthy,
)
from kubeloop.apiserver.http.scope import Scope, Target
from kubeloop.apiserver.http.spdytransport import wants_spdy
from kubeloop.apiserver.http.streamchannels import CLOSE, RESIZE, STDERR, STDIN, STDOUT, Channels, serve_spdy
from kubeloop.node.sessions import TOO_SLOW, AttachSession, CommandRefused, ProcessNode


async def pod_attach(
    scope: Scope, request: HTTPRequest, target: Target, node: ProcessNode | None
) -> web.StreamResponse:
    assert target.namespace is not None and target.name is not None
    namespace, name = target.namespace, target.name
    pod = await scope.registry.read(lambda: scope.registry.get(target.resource, namespace, name))
    stdin, stdout, stderr = (truthy(request.query.get(k)) for k in ("stdin", "stdout", "stderr"))
    if not (stdin or stdout or stderr):
        raise errors.BadRequest("you must specify at least 1 of stdin, stdout, stderr")
    container = chosen_container(request, pod)
    if node is None:
        raise simulated_only(name)
    try:
        session = node.attach_to(pod, container)
    except CommandRefused as refused:
        raise errors.BadRequest(f"unable to upgrade connection: {refused}") from None
    if wants_spdy(request):  # kubectl before 1.30
        wanted = {"error", *(["stdin"] if stdin else []), *(["stdout"] if stdout else [])}
        wanted |= {"resize"} if session.tty else ({"stderr"} if stderr else set())
        return await serve_spdy(
            request, wanted, lambda channels: _attached(channels, session, stdin=stdin, stdout=stdout, stderr=stderr)
        )
    socket, protocol = channel_socket(request)
    assert isinstance(request, web.Request)  # an upgrade: channel_socket has seen to it
    await socket.prepare(request)
    try:
        channels = WebSocketChannels(socket, protocol)
        await _attached(channels, session, stdin=stdin, stdout=stdout, stderr=stderr)
    finally:
        await socket.close()
    return socket


async def _attached(channels: Channels, session: AttachSession, *, stdin: bool, stdout: bool, stderr: bool) -> None:
    """Carry the container's streams until its run ends (Success said) or the client goes."""
    output = session.listen()
    try:
        sending = asyncio.create_task(_send_output(channels, output, stdout=stdout, stderr=stderr))
        taking = asyncio.create_task(_take_input(channels, session, stdin=stdin))
        racers: list[asyncio.Task[Any]] = [sending, taking]
        await asyncio.wait(racers, return_when=asyncio.FIRST_COMPLETED)
        if sending.done() and not sending.cancelled() and sending.exception() is None:  # the run has ended
            await send_status(channels, {"metadata": {}, "status": "Success"})
        for task in racers:
            task.cancel()
        await asyncio.gather(*racers, return_exceptions=True)
    finally:
        session.leave(output, had_stdin=stdin)


async def _send_output(
    channels: Channels, output: asyncio.Queue[tuple[str, bytes]], *, stdout: bool, stderr: bool
) -> None:
    """The container's output, as it comes, until its run ends; a client that fell too far
    behind is told so on the error channel (the output is in the log)."""
    while True:
        stream, chunk = await output.get()
        if stream == TOO_SLOW:
            await send_status(channels, {"metadata": {}, "status": "Failure", "reason": "TooSlow",
                                         "message": "the client read the output too slowly: it was cut off "
                                         "(kubectl logs has what it missed)"})  # fmt: skip
            raise _TooSlow
        if not chunk:
            return
        if stdout if stream == "stdout" else stderr:
            await channels.send(STDOUT if stream == "stdout" else STDERR, chunk)


class _TooSlow(Exception):
    """The client fell too far behind the output."""


async def _take_input(channels: Channels, session: AttachSession, *, stdin: bool) -> None:
    """The client's messages, until it has gone: stdin's data (when it asked for stdin), a
    terminal's size, stdin's end (v5, SPDY)."""
    while (data := await channels.receive()) is not None:
        if not data:
            continue
        channel, payload = data[0], data[1:]
        if channel == STDIN and stdin and payload:
            await session.write(payload)
        elif channel == RESIZE:
            size = parse_size(payload)
            if size is not None:
                session.resize(*size)
        elif channel == CLOSE and stdin and channels.closes_stdin and payload[:1] == bytes([STDIN]):
            session.input_ended()
