"""Watch streams that do not die silently: an async iterator of events that reconnects by itself.

The stream asks for bookmarks and tracks the newest resourceVersion it has seen (from events and
bookmarks). When the server ends the stream (its ``timeoutSeconds``), the connection drops, or
nothing at all arrives for ``inactivity_timeout`` (a stream stalled behind a load balancer — the
failure kopf users hit), it reconnects from that resourceVersion, with jittered backoff after
failures. A 410 — as the HTTP answer or as an ERROR event — is not retried: it is raised as
``ResourceExpired``, the caller's signal to relist.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.client.connectionpool import BadResponseError, BodyStream
from kubeloop.client.interface import KindRef
from kubeloop.client.restmapper import ResourceMapping
from kubeloop.jitter import uniform


class WatchTransport(Protocol):
    """What a watch needs of its client (``APIClient`` is one): the kind's path, and a GET
    whose body is handed over as it arrives."""

    async def mapping(self, kind: KindRef) -> ResourceMapping:
        """The resource serving ``kind``."""
        ...

    async def stream(
        self, path: str, params: Mapping[str, str], *, timeout: float | None = ..., accept: str = ...
    ) -> BodyStream:
        """A GET whose body is read as it arrives."""
        ...


log = logging.getLogger("kubeloop.client.watch")


_JSON = "application/json"
_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"


@dataclass(frozen=True)
class WatchEvent:
    """One event of a watch: its type (ADDED, MODIFIED, DELETED or BOOKMARK) and object."""

    type: str  # ADDED, MODIFIED, DELETED or BOOKMARK
    object: Obj

    @property
    def resource_version(self) -> str:
        """The object's resourceVersion (a bookmark's is where the watch has got to)."""
        return str((self.object.get("metadata") or {}).get("resourceVersion") or "")


@dataclass(frozen=True)
class WatchOptions:
    """What a watch asks for: scope, selectors, where to start (``resource_version``; with
    ``send_initial_events``, the current objects first), and how it keeps itself alive."""

    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    resource_version: str | None = None
    send_initial_events: bool = False
    #: Longest silence (no event, no bookmark) before the stream counts as dead and reconnects.
    inactivity_timeout: float = 90.0
    #: Server-side duration of one connection; each reconnect draws a new one in [t, 2t).
    server_timeout_seconds: int = 300
    yield_bookmarks: bool = False
    max_backoff: float = 30.0
    #: Ask for ``PartialObjectMetadata`` objects (metadata only).
    metadata_only: bool = False


class Watch:
    """``async for event in client.watch(...)``; ``resource_version`` is the newest one seen."""

    def __init__(self, client: WatchTransport, kind: KindRef, options: WatchOptions) -> None:
        self._client = client
        self._kind = kind
        self.options = options
        self.resource_version: str | None = options.resource_version
        self._send_initial_events = options.send_initial_events
        self._failures = 0
        self._closed = False
        self._response: BodyStream | None = None

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self._events()

    async def close(self) -> None:
        """End the watch: the stream is closed and iteration stops."""
        self._closed = True
        if self._response is not None:
            self._response.close()
            self._response = None

    async def _events(self) -> AsyncIterator[WatchEvent]:
        mapping = await self._client.mapping(self._kind)
        path = mapping.collection_path(self.options.namespace if mapping.namespaced else None)
        try:
            while not self._closed:
                try:
                    async for event in self._one_connection(path):
                        yield event
                    self._failures = 0  # the server closed the stream normally: reconnect at once
                except errors.ResourceExpired:
                    self.resource_version = None  # nothing to resume from: the caller relists
                    raise
                except (
                    errors.TooManyRequests,
                    errors.InternalError,
                    errors.ServiceUnavailable,
                    errors.ServerTimeout,
                ) as exc:
                    await self._back_off(exc)
                except (TimeoutError, ConnectionError) as exc:
                    await self._back_off(exc)
        finally:
            await self.close()

    async def _back_off(self, cause: BaseException) -> None:
        if self._closed:
            return
        ceiling = min(self.options.max_backoff, 0.5 * (2**self._failures))
        delay = ceiling * uniform(0.5, 1.0)
        self._failures += 1
        log.info(
            "watch %s interrupted (%s); reconnecting from %s in %.2fs",
            self._kind,
            cause,
            self.resource_version,
            delay,
        )
        await asyncio.sleep(delay)

    def _params(self) -> dict[str, str]:
        options = self.options
        params = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(int(options.server_timeout_seconds * uniform(1.0, 2.0))),
        }
        if options.label_selector:
            params["labelSelector"] = options.label_selector
        if options.field_selector:
            params["fieldSelector"] = options.field_selector
        if self._send_initial_events:
            params["sendInitialEvents"] = "true"
            params["resourceVersionMatch"] = "NotOlderThan"
            params["resourceVersion"] = self.resource_version or ""
        elif self.resource_version is not None:
            params["resourceVersion"] = self.resource_version
        return params

    async def _one_connection(self, path: str) -> AsyncIterator[WatchEvent]:
        accept = _METADATA if self.options.metadata_only else _JSON
        try:  # a server that accepted the request but never answers is as silent as an idle stream
            async with asyncio.timeout(self.options.inactivity_timeout):
                response = await self._client.stream(path, self._params(), timeout=None, accept=accept)
        except TimeoutError:
            raise TimeoutError(
                f"no answer to the watch request in {self.options.inactivity_timeout}s"
            ) from None
        self._response = response
        pending: list[bytes] = []  # the start of an event whose end has not arrived yet
        try:
            while not self._closed:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation
                # that arrives as the read completes, and the watch then outlives its owner.
                async with asyncio.timeout(self.options.inactivity_timeout):
                    data = await response.read()
                if not data:
                    return  # the server ended the stream
                if b"\n" not in data:
                    pending.append(data)
                    continue
                if pending:
                    pending.append(data)
                    data = b"".join(pending)
                    pending.clear()
                lines = data.split(b"\n")
                if tail := lines.pop():
                    pending.append(tail)
                for line in lines:
                    if not line or line.isspace():
                        continue
                    try:
                        raw = orjson.loads(line)
                    except orjson.JSONDecodeError:
                        raise BadResponseError(f"malformed watch event: {line[:200]!r}") from None
                    event = self._event(raw)
                    if event is not None:
                        yield event
        except TimeoutError:
            raise TimeoutError(f"no event for {self.options.inactivity_timeout}s") from None
        finally:
            response.close()
            if self._response is response:
                self._response = None

    def _event(self, raw: Any) -> WatchEvent | None:
        if not isinstance(raw, dict) or not isinstance(raw.get("object"), dict):
            raise BadResponseError(f"malformed watch event: {str(raw)[:200]}")
        kind = str(raw.get("type"))
        obj: Obj = raw["object"]
        if kind == "ERROR":
            raise errors.error_from_status(int(obj.get("code") or 500), obj)
        event = WatchEvent(kind, obj)
        if event.resource_version:
            self.resource_version = event.resource_version
        self._failures = 0
        if kind == "BOOKMARK":
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            if annotations.get("k8s.io/initial-events-end") == "true":
                self._send_initial_events = False
            return event if self.options.yield_bookmarks else None
        return event
