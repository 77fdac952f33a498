"""The cheapest HTTPS client a benchmark's load can come from: one keep-alive HTTP/1.1 connection
per writer, requests written whole and answers read by a bare ``asyncio.Protocol`` (no task, no
client library), so that the load generator takes as little as possible of the two cores the
measured processes share with it. On a cluster the writers are other machines' clients; here
every microsecond they spend is taken from the server and the operator (B4's writers over
aiohttp cost ~150 µs of CPU a request, B2's over kubeloop's typed client ~160). B2's stream
writers and B4's writers send through it.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import cast


class HTTPError(RuntimeError):
    """An answer other than the one the benchmark expected, with its head and body."""


class RawConnection(asyncio.Protocol):
    """One connection's answers, each read whole (its Content-Length) and handed to the waiting
    :meth:`send`; one request at a time."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._answer: asyncio.Future[tuple[int, bytes]] | None = None
        self._lost: BaseException | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's are no asyncio.Transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0 or self._answer is None:
            return
        head = bytes(self._buffer[:end])
        start = head.find(b"\r\ncontent-length:")
        if start < 0:
            start = head.lower().find(b"\r\ncontent-length:")
        if start < 0:
            self._fail(HTTPError(f"an answer without Content-Length: {head[:300]!r}"))
            return
        stop = head.find(b"\r\n", start + 2)
        length = int(head[start + 17 : stop if stop >= 0 else len(head)])
        if len(self._buffer) < end + 4 + length:
            return
        body = bytes(self._buffer[end + 4 : end + 4 + length])
        del self._buffer[: end + 4 + length]
        answer, self._answer = self._answer, None
        if not answer.done():
            answer.set_result((int(head[9:12]), body))

    def _fail(self, error: BaseException) -> None:
        self._lost = error
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(error)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or ConnectionError("the server closed the connection"))

    async def send(self, request: bytes) -> tuple[int, bytes]:
        """Write ``request`` (head and body) and wait for its answer's status and body."""
        if self._lost is not None:
            raise self._lost
        assert self._transport is not None
        self._answer = asyncio.get_running_loop().create_future()
        self._transport.write(request)
        return await self._answer

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


async def connect(url: str, ca_file: str | None) -> RawConnection:
    """A connection to the server at ``url`` (``https://host:port``; plain HTTP without ``ca_file``)."""
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    context = ssl.create_default_context(cafile=ca_file) if ca_file else None
    _, connection = await asyncio.get_running_loop().create_connection(
        RawConnection, host, int(port), ssl=context, server_hostname=host if context else None
    )
    return connection


def post(url: str, path: str, token: str, body: bytes) -> bytes:
    """A whole POST request of a JSON ``body``, as :meth:`RawConnection.send` takes it."""
    host = url.split("://", 1)[1]
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: bench-writer\r\n"
        f"Authorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def get(url: str, path: str, token: str) -> bytes:
    """A whole GET request, as :meth:`RawConnection.send` takes it."""
    host = url.split("://", 1)[1]
    return (
        f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: bench-writer\r\n"
        f"Authorization: Bearer {token}\r\nAccept: application/json\r\n\r\n"
    ).encode()
