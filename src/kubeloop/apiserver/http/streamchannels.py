"""The channels of an exec or attach session, whatever carries them: a WebSocket (each message a
channel byte, then data: :mod:`.podexec`'s ``WebSocketChannels``) or, for kubectl before 1.30,
SPDY streams (:class:`SpdyChannels`): one stream per channel, named by its ``streamtype`` header
(error, stdin, stdout, stderr, resize), stdin's end a FIN, each resize a JSON line.

The channel numbers are the WebSocket protocol's: 0 stdin, 1 stdout, 2 stderr, 3 error, 4
resize, 255 a channel's end (``[255, 0]``: stdin has ended).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Set
from typing import Protocol

from aiohttp import web

from kubeloop.apiserver.http.http1 import HTTPRequest
from kubeloop.apiserver.http.spdy import SpdySession, SpdyStream
from kubeloop.apiserver.http.spdytransport import chosen_version, upgrade

STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
#: The stream protocol served over SPDY (v4: the command's end as a Status on the error stream).
SPDY_PROTOCOLS = ("v4.channel.k8s.io",)
#: How long the client may take to open the streams it asked for (the kubelet's).
STREAMS_SECONDS = 30.0
_TYPES = {"stdin": STDIN, "stdout": STDOUT, "stderr": STDERR, "error": ERROR, "resize": RESIZE}
#: Messages held for the session's consumer; past them the streams are not read (and in turn the
#: connection: see :data:`kubeloop.apiserver.http.spdy.STREAM_QUEUE_FRAMES`).
QUEUED_MESSAGES = 64


class Channels(Protocol):
    """A client's side of an exec or attach session."""

    #: Whether a ``[CLOSE, STDIN]`` message means the client's input has ended.
    closes_stdin: bool

    async def send(self, channel: int, data: bytes) -> None:
        """Data to the client on ``channel`` (nothing if the client has gone)."""
        ...

    async def receive(self) -> bytes | None:
        """The client's next message (a channel byte, then data); None once it has gone."""
        ...


class SpdyChannels:
    """The channels over the streams of a SPDY session (``streams``: by ``streamtype``)."""

    closes_stdin = True

    def __init__(self, streams: dict[str, SpdyStream]) -> None:
        self.streams = {_TYPES[kind]: stream for kind, stream in streams.items()}
        self._messages: asyncio.Queue[bytes | None] = asyncio.Queue(QUEUED_MESSAGES)
        self._gone = False
        self._readers = [
            asyncio.create_task(self._read_stdin(stream), name="spdy stdin")
            for kind, stream in streams.items()
            if kind == "stdin"
        ] + [
            asyncio.create_task(self._read_resizes(stream), name="spdy resize")
            for kind, stream in streams.items()
            if kind == "resize"
        ]

    async def send(self, channel: int, data: bytes) -> None:
        stream = self.streams.get(channel)
        if stream is not None and not stream.session.closed:
            with contextlib.suppress(ConnectionError):
                await stream.write(data)

    async def receive(self) -> bytes | None:
        if self._gone and self._messages.empty():
            return None
        return await self._messages.get()

    def gone(self) -> None:
        """The session has ended: :meth:`receive` says so (once it has given what is queued)."""
        self._gone = True
        with contextlib.suppress(asyncio.QueueFull):  # a full queue: its reader sees _gone after
            self._messages.put_nowait(None)

    async def _read_stdin(self, stream: SpdyStream) -> None:
        while chunk := await stream.read():
            await self._messages.put(bytes([STDIN]) + chunk)
        await self._messages.put(bytes([CLOSE, STDIN]))  # a FIN: the input has ended

    async def _read_resizes(self, stream: SpdyStream) -> None:
        pending = b""
        while chunk := await stream.read():
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    await self._messages.put(bytes([RESIZE]) + line)

    async def close(self) -> None:
        """End this side of every stream (the error stream last: the client reads it to its end)."""
        for task in self._readers:
            task.cancel()
        await asyncio.gather(*self._readers, return_exceptions=True)
        for channel in sorted(self.streams, key=lambda c: c == ERROR):
            with contextlib.suppress(ConnectionError):
                await self.streams[channel].close()


async def serve_spdy(
    request: HTTPRequest, wanted: Set[str], serve: Callable[[Channels], Awaitable[None]]
) -> web.StreamResponse:
    """Upgrade ``request`` to SPDY (``v4.channel.k8s.io``; 403 naming it when the client offers
    none it takes), wait for the client to open the ``wanted`` streams, and ``serve`` them; then
    end the streams and the session."""
    version = chosen_version(request, SPDY_PROTOCOLS)
    session, response = await upgrade(request, version)
    reading = asyncio.create_task(session.run(), name="spdy session")
    try:
        streams = await _streams(session, wanted)
        if streams is not None:
            channels = SpdyChannels(streams)
            ended = asyncio.create_task(_then(reading, channels.gone))
            try:
                await serve(channels)
                await channels.close()
                await session.go_away()
            finally:
                ended.cancel()
                await asyncio.gather(ended, return_exceptions=True)
    finally:
        reading.cancel()
        await asyncio.gather(reading, return_exceptions=True)
        if request.transport is not None:
            request.transport.close()
    return response


async def _then(task: asyncio.Task[None], then: Callable[[], None]) -> None:
    await asyncio.gather(task, return_exceptions=True)
    then()


async def _streams(session: SpdySession, wanted: Set[str]) -> dict[str, SpdyStream] | None:
    """The streams the client opens, by type, once every ``wanted`` one is there (None: it went,
    or took longer than the kubelet waits). Others are reset."""
    streams: dict[str, SpdyStream] = {}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STREAMS_SECONDS
    while not wanted <= streams.keys():
        try:
            stream = await asyncio.wait_for(session.accept(), max(0.0, deadline - loop.time()))
        except TimeoutError:
            return None
        if stream is None:
            return None
        kind = stream.headers.get("streamtype", "")
        if kind in wanted and kind not in streams:
            streams[kind] = stream
        else:
            await stream.reset()
    return streams
