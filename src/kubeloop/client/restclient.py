"""The REST client under :class:`~kubeloop.client.rest.APIClient` (client-go's ``rest.RESTClient``):
one connection pool per server and credentials, requests with the kubeconfig's credentials
(refreshed when they expire or are refused), client-side rate limiting, retries of what is
safe to retry (``RetryPolicy``), the server's warnings logged once, and streams for watches and
logs.
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
import urllib.parse
from collections import Counter, OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import orjson

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.client.config import ClientConfig, Credentials, ssl_context
from kubeloop.client.connectionpool import BodyStream, ConnectionPool, Response
from kubeloop.client.fence import check_write
from kubeloop.client.ratelimit import TokenBucket
from kubeloop.client.restmapper import AGGREGATED_ACCEPT, RESTMapper
from kubeloop.client.writejournal import note_write
from kubeloop.gcpause import gc_paused
from kubeloop.jitter import uniform

log = logging.getLogger("kubeloop.client")
#: Answers larger than this are decoded with the cyclic GC paused: a list of 2,000 Pods (7.7 MB)
#: is some 300,000 dicts and lists, and the GC's passes over them while they were made took
#: 250-400 ms, ten times the decoding itself (``bench/client_throughput.py``).
PAUSED_DECODE_BYTES = 64 * 1024


def decode_json(payload: bytes) -> Any:
    """``orjson.loads``, with the GC paused for a large payload."""
    if len(payload) <= PAUSED_DECODE_BYTES:
        return orjson.loads(payload)
    with gc_paused():
        return orjson.loads(payload)

_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})

#: Request headers, in the order they are sent.
_Headers = list[tuple[str, str]]

_PLAIN_PATH = re.compile(r"[A-Za-z0-9/:@!$&'()*+,;=%._~-]*")

#: What a request can fail with, short of a bug: the server's error answers, the connection, time.
#: Code that retries catches these.
REQUEST_ERRORS = (errors.APIError, OSError, TimeoutError)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how soon failed requests are tried again (429, 5xx, broken connections)."""

    max_retries: int = 5
    initial_backoff: float = 0.2
    max_backoff: float = 10.0

    def backoff(self, attempt: int) -> float:
        """Jittered exponential backoff for the ``attempt``-th retry (0-based)."""
        ceiling = min(self.max_backoff, self.initial_backoff * 2.0**attempt)
        return float(ceiling * uniform(0.5, 1.0))


async def _close(transport: ConnectionPool | ProxiedTransport | None) -> None:
    if isinstance(transport, ConnectionPool):
        transport.close()  # idle connections at once; those in use when their exchange ends
    elif transport is not None:
        await transport.close()


def _pool_for(config: ClientConfig, context: ssl.SSLContext | None) -> ConnectionPool:
    url = urllib.parse.urlsplit(config.server)
    host = url.hostname or "localhost"
    port = url.port or (443 if url.scheme == "https" else 80)
    shown = f"[{host}]" if ":" in host else host
    host_header = shown if url.port is None else f"{shown}:{port}"
    return ConnectionPool(
        host,
        port,
        context=context,
        server_hostname=config.tls_server_name,
        host_header=host_header,
        dial=config.dial,
    )


def _quote_path(path: str) -> str:
    """``path`` as a request target: what is not allowed in one percent-encoded (as yarl does)."""
    if path.isascii() and _PLAIN_PATH.fullmatch(path):
        return path
    return urllib.parse.quote(path, safe="/:@!$&'()*+,;=%-._~")


def _certificate_changed(before: Credentials | None, after: Credentials) -> bool:
    if before is None:
        return True
    return (before.client_cert_pem, before.client_key_pem) != (after.client_cert_pem, after.client_key_pem)


def _decode_error(payload: bytes) -> Any:
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        return payload.decode(errors="replace")


def _retry_after_seconds(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _warning_text(header: str) -> str:
    """The text of an RFC 7234 ``299 - "text"`` warning header."""
    code, _, rest = header.partition(" ")
    _, _, quoted = rest.partition(" ")
    if code == "299" and quoted.startswith('"') and quoted.endswith('"'):
        return quoted[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return header


if TYPE_CHECKING:
    from kubeloop.client.proxied import ProxiedTransport

JSON = "application/json"


class RESTClient:
    """Requests to one API server with a kubeconfig's credentials; :class:`APIClient` adds the
    verbs. Use it as an async context manager, or call :meth:`close`."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        retry: RetryPolicy | None = None,
        request_timeout: float = 60.0,
    ) -> None:
        self.config = config
        self.retry = retry or RetryPolicy()
        self.request_timeout = request_timeout
        self.mapper = RESTMapper(self._discovery, errors.NotFound, fetch_aggregated=self._aggregated_discovery)
        self._limiter = TokenBucket(config.qps, config.burst) if config.qps else None
        self._transport: ConnectionPool | ProxiedTransport | None = None
        self._base_path = urllib.parse.urlsplit(config.server).path.rstrip("/")
        self._transport_credentials: Credentials | None = None
        self._credentials: Credentials = Credentials()
        self._credentials_loaded = False
        self._transport_lock = asyncio.Lock()
        #: Requests sent, by (method, status code or "<error>"): client-go's rest_client_requests_total.
        self.requests: Counter[tuple[str, str]] = Counter()
        #: The (object path, warning) pairs logged already, the latest 4096: a warning is logged
        #: once per object, not on every write an operator sends it (client-go deduplicates too).
        self._warned: OrderedDict[tuple[str, str], None] = OrderedDict()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connections (those in use once their exchange ends)."""
        transport, self._transport = self._transport, None
        await _close(transport)

    async def _discovery(self, path: str) -> Obj:
        return await self._json("GET", path)

    async def _aggregated_discovery(self, path: str) -> Obj:
        return await self._json("GET", path, accept=AGGREGATED_ACCEPT)

    async def _json(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        accept: str = JSON,
    ) -> Obj:
        status, payload = await self.request(
            method, path, params=params, body=body, content_type=content_type, accept=accept
        )
        decoded = decode_json(payload) if payload else {}
        if not isinstance(decoded, dict):
            raise errors.APIError(f"the server answered {method} {path} with a non-object", code=status)
        if method != "GET":
            note_write(method, path, decoded)
        return decoded

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        accept: str = JSON,
    ) -> tuple[int, bytes]:
        """Send a request (with retries and auth refresh); the status and body of a 2xx answer."""
        attempt = 0
        refreshed = False
        while True:
            if self._limiter is not None:
                await self._limiter.acquire()
            try:
                status, payload, warnings, retry_after = await self._exchange(
                    method, path, params, body, content_type, accept
                )
            except (TimeoutError, ConnectionError) as exc:
                if method in _IDEMPOTENT and attempt < self.retry.max_retries:
                    delay = self.retry.backoff(attempt)
                    log.debug("%s %s failed (%s); retrying in %.2fs", method, path, exc, delay)
                    attempt += 1
                    await asyncio.sleep(delay)
                    continue
                raise
            for warning in warnings:
                # A create names its object in the body, not the path: each is its own.
                self._log_warning(path if method != "POST" else "", warning)
            if status < 400:
                return status, payload
            if status == 401 and not refreshed and self.config.credentials is not None:
                refreshed = True
                await self._refresh_credentials()
                continue
            retryable = status == 429 or status >= 500
            if retryable and attempt < self.retry.max_retries and (retry_after or method in _IDEMPOTENT):
                asked = _retry_after_seconds(retry_after)
                delay = self.retry.backoff(attempt) if asked is None else min(asked, self.retry.max_backoff)
                log.debug("%s %s answered %d; retrying in %.2fs", method, path, status, delay)
                attempt += 1
                await asyncio.sleep(delay)
                continue
            raise errors.error_from_status(status, _decode_error(payload))

    def _log_warning(self, path: str, header: str) -> None:
        """Log a server's warning about the object at ``path``, the first time it says it (each
        time when there is no path to tell objects apart by)."""
        text = _warning_text(header)
        if not path:
            log.warning("server warning: %s", text)
            return
        key = (path, text)
        if key in self._warned:
            self._warned.move_to_end(key)
            return
        self._warned[key] = None
        if len(self._warned) > 4096:
            self._warned.popitem(last=False)
        log.warning("server warning: %s", text)

    async def _exchange(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        body: bytes | None,
        content_type: str | None,
        accept: str,
    ) -> tuple[int, bytes, tuple[str, ...], str | None]:
        """One request and its whole answer: status, body, Warning headers and Retry-After."""
        transport = await self._ensure_transport()
        headers = self._headers(accept)
        headers.append(("Accept-Encoding", "gzip"))
        if content_type:
            headers.append(("Content-Type", content_type))
        check_write(method, path)  # refuse early; checked again just before the request is written
        try:
            answer: Response = await transport.request(
                method,
                self._target(path, params),
                headers,
                body,
                timeout=self.request_timeout,
                fence_path=path,
            )
        except BaseException:
            self.requests[(method, "<error>")] += 1
            raise
        self.requests[(method, str(answer.status))] += 1
        return (
            answer.status,
            answer.body,
            tuple(answer.header_values("warning")),
            answer.header("retry-after"),
        )

    async def stream(
        self, path: str, params: Mapping[str, str], *, timeout: float | None = 30.0, accept: str = JSON
    ) -> BodyStream:
        """A GET whose body is read as it arrives (watches); the caller closes the answer.

        ``timeout`` bounds connecting and the answer's head. Non-2xx answers are raised as
        ``APIError`` (after one credential refresh on 401).
        """
        refreshed = False
        target = self._target(path, params)
        while True:
            if self._limiter is not None:
                await self._limiter.acquire()
            transport = await self._ensure_transport()
            try:
                response = await transport.stream(target, self._headers(accept), timeout=timeout)
            except BaseException:
                self.requests[("GET", "<error>")] += 1
                raise
            self.requests[("GET", str(response.status))] += 1
            if response.status < 400:
                for warning in response.header_values("warning"):
                    self._log_warning(path, warning)
                return response
            try:
                payload = await response.read_all()
            finally:
                response.close()
            if response.status == 401 and not refreshed and self.config.credentials is not None:
                refreshed = True
                await self._refresh_credentials()
                continue
            raise errors.error_from_status(response.status, _decode_error(payload))

    def _headers(self, accept: str) -> _Headers:
        headers = [("User-Agent", self.config.user_agent), ("Accept", accept)]
        if self._credentials.token:
            headers.append(("Authorization", f"Bearer {self._credentials.token}"))
        return headers

    def _target(self, path: str, params: Mapping[str, str] | None) -> str:
        """The request target: the server's base path, ``path`` and the query, encoded."""
        target = self._base_path + _quote_path(path)
        if params:
            target += "?" + urllib.parse.urlencode(params, quote_via=urllib.parse.quote, safe="")
        return target

    async def _ensure_transport(self) -> ConnectionPool | ProxiedTransport:
        async with self._transport_lock:
            if self.config.credentials is not None:
                if not self._credentials_loaded:
                    self._credentials = await self.config.credentials.get()
                    self._credentials_loaded = True
                elif self._credentials.expires_at is not None:
                    self._credentials = await self.config.credentials.get()  # re-runs when expired
            transport = self._transport
            if transport is not None and not _certificate_changed(
                self._transport_credentials, self._credentials
            ):
                return transport
            self._transport = None
            await _close(transport)
            context = ssl_context(self.config, self._credentials)
            if self.config.proxy_url is None:
                self._transport = _pool_for(self.config, context)
            else:
                from kubeloop.client.proxied import ProxiedTransport  # aiohttp, only for a proxy

                self._transport = ProxiedTransport(
                    self.config.server,
                    self.config.proxy_url,
                    context=context,
                    server_hostname=self.config.tls_server_name,
                )
            self._transport_credentials = self._credentials
            return self._transport

    async def _refresh_credentials(self) -> None:
        assert self.config.credentials is not None
        async with self._transport_lock:
            self._credentials = await self.config.credentials.refresh()
            self._credentials_loaded = True
