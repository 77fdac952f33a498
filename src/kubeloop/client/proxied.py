"""Requests through an HTTP(S) proxy (a kubeconfig's ``proxy-url``), on aiohttp.

The API client sends everything over ``http1``'s pool unless the configuration names a proxy;
then this transport carries the same requests and watches through aiohttp, which speaks to the
proxy (a CONNECT tunnel for an https server). It answers as the pool does (``http1.Response``, a
``http1.BodyStream``) and fails the way the pool does: aiohttp's errors become ``OSError``
subclasses or ``TimeoutError``, so ``REQUEST_ERRORS`` covers both transports. aiohttp is
imported only by a client that uses a proxy.

A write under a leader's fence is checked as its body goes out (:class:`FencedBody`): aiohttp
holds the headers back until then, so a process paused before that moment cannot send it.
"""

from __future__ import annotations

import ssl
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
from aiohttp.payload import BytesPayload
from yarl import URL

from kubeloop.client.connectionpool import BadResponseError, BodyStream, Response, ServerDisconnectedError
from kubeloop.client.fence import WriteFence, WriteFenced, write_fence

T = TypeVar("T")


class FencedBody(BytesPayload):
    """A write's body that checks its fence at the last moment before it is written."""

    def __init__(self, body: bytes, fence: WriteFence, method: str, path: str, content_type: str) -> None:
        super().__init__(body, content_type=content_type)
        self._fence = fence
        self._request = (method, path)

    async def write_with_length(self, writer: Any, content_length: int | None) -> None:
        """Write the body, once the fence allows it at this moment (WriteFenced if not)."""
        if not self._fence.writes_allowed():
            raise WriteFenced(*self._request, self._fence.describe())
        await super().write_with_length(writer, content_length)


class _ProxiedStream:
    """An aiohttp response read as a :class:`~kubeloop.client.connectionpool.BodyStream`."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.status = response.status
        self._response = response

    def header(self, name: str) -> str | None:
        return self._response.headers.get(name)

    def header_values(self, name: str) -> list[str]:
        return list(self._response.headers.getall(name, ()))

    async def read(self) -> bytes:
        return await _translated(self._response.content.readany)

    async def read_all(self) -> bytes:
        return await _translated(self._response.read)

    def close(self) -> None:
        self._response.close()


class ProxiedTransport:
    """The API client's requests to ``server`` through ``proxy_url``, on one aiohttp session."""

    def __init__(
        self, server: str, proxy_url: str, *, context: ssl.SSLContext | None, server_hostname: str | None
    ) -> None:
        parts = urllib.parse.urlsplit(server)
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._proxy_url = proxy_url
        self._server_hostname = server_hostname
        connector = aiohttp.TCPConnector(ssl=context if context is not None else False, limit=0)
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=True)

    async def request(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes | None,
        *,
        timeout: float | None,
        fence_path: str | None = None,
    ) -> Response:
        """One request and its whole answer within ``timeout`` seconds (as ``ConnectionPool.request``)."""
        data: Any = body
        fence = write_fence(method)
        if fence is not None and body is not None:
            content_type = next((value for name, value in headers if name.lower() == "content-type"), "")
            data = FencedBody(body, fence, method, fence_path or target, content_type or "application/json")

        async def exchange() -> Response:
            async with self._session.request(
                method,
                URL(self._origin + target, encoded=True),
                data=data,
                headers=headers,
                proxy=self._proxy_url,
                server_hostname=self._server_hostname,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                payload = await response.read()
                pairs = tuple((name.lower(), value) for name, value in response.headers.items())
                return Response(response.status, pairs, payload)

        return await _translated(exchange)

    async def stream(
        self, target: str, headers: list[tuple[str, str]], *, timeout: float | None
    ) -> BodyStream:
        """A GET whose body is read as it arrives; ``timeout`` bounds connecting and the head."""

        async def start() -> aiohttp.ClientResponse:
            return await self._session.get(
                URL(self._origin + target, encoded=True),
                headers=headers,
                proxy=self._proxy_url,
                server_hostname=self._server_hostname,
                timeout=aiohttp.ClientTimeout(total=None, connect=timeout, sock_read=None),
            )

        return _ProxiedStream(await _translated(start))

    async def close(self) -> None:
        """Close the aiohttp session and its connections."""
        await self._session.close()


async def _translated(call: Callable[[], Awaitable[T]]) -> T:
    """``call()`` with aiohttp's errors raised as the pool's: OSError subclasses, WriteFenced."""
    try:
        return await call()
    except aiohttp.ClientError as exc:
        if isinstance(exc.__cause__, WriteFenced):
            raise exc.__cause__ from None  # refused as the body went out: nothing was sent
        if isinstance(exc, OSError):
            raise  # ClientOSError and its kinds (refused, certificate errors) already are
        if isinstance(exc, aiohttp.ServerDisconnectedError):
            raise ServerDisconnectedError(str(exc)) from exc
        if isinstance(exc, (aiohttp.ClientPayloadError, aiohttp.ClientResponseError)):
            raise BadResponseError(str(exc)) from exc
        raise ConnectionError(str(exc)) from exc
