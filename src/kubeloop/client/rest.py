"""The async REST client: every verb of the Kubernetes API on asyncio and orjson, objects as dicts.

``APIClient`` addresses a kind by ``GroupVersionKind`` or by an object dict (its apiVersion/kind);
the ``RESTMapper`` finds the resource from discovery. Objects travel as plain dicts (the fast
path; typed models convert at the edges). Requests carry the credentials of the configuration
(refreshed once after a 401: an exec plugin re-runs, a token file is re-read), are rate limited
only when the configuration asks, and are retried with jittered backoff on 429 and 5xx — always
when the server sends ``Retry-After``, otherwise only for reads and other idempotent verbs.
``Warning`` headers are logged, once per object and text. Errors are the ``errors`` module's classes; a connection that
fails raises ``OSError`` (``ConnectionError``, ``ssl.SSLError``) or ``TimeoutError``. Requests and
watches go over ``http1``'s keep-alive pool, or through ``proxied`` (aiohttp, imported only then)
when the configuration names a proxy.
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
import urllib.parse
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Unpack, cast, overload

import orjson

from kubeloop import errors
from kubeloop.api.applyconfiguration import ObjectApplyConfiguration
from kubeloop.api.fields import FieldSelector
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.labels import LabelSelector
from kubeloop.api.model import KubeModel, KubeObject, as_dict
from kubeloop.api.object import Obj
from kubeloop.client.calloptions import (
    ApplyOptions,
    DeleteOptions,
    ListOptions,
    PatchOptions,
    WriteOptions,
    delete_body,
    write_params,
)
from kubeloop.client.config import ClientConfig, Credentials, ssl_context
from kubeloop.client.connectionpool import BodyStream, ConnectionPool, Response
from kubeloop.client.fence import check_write
from kubeloop.client.interface import ApplyRef, KindRef, M, ObjectList, ObjectRef, gvk_of, model_class
from kubeloop.client.ratelimit import TokenBucket
from kubeloop.client.restmapper import ResourceMapping, RESTMapper
from kubeloop.client.watch import Watch, WatchOptions
from kubeloop.client.writejournal import note_write
from kubeloop.jitter import uniform

if TYPE_CHECKING:
    from kubeloop.client.proxied import ProxiedTransport

log = logging.getLogger("kubeloop.client")


JSON = "application/json"
#: Accept headers asking for metadata only (``PartialObjectMetadata``), JSON as the fallback.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
#: Request headers, in the order they are sent.
_Headers = list[tuple[str, str]]
_PLAIN_PATH = re.compile(r"[A-Za-z0-9/:@!$&'()*+,;=%._~-]*")


class PatchType(StrEnum):
    """The patch formats the API server takes, by their media types."""

    JSON = "application/json-patch+json"
    MERGE = "application/merge-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"


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


class APIClient:
    """An async client for one API server. Use ``async with APIClient(config) as client``."""

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
        self.mapper = RESTMapper(self._discovery, errors.NotFound)
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

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> APIClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        transport, self._transport = self._transport, None
        await _close(transport)

    # ------------------------------------------------------------------ addressing

    async def mapping(self, kind: KindRef) -> ResourceMapping:
        return await self.mapper.mapping(gvk_of(kind))

    async def preferred_resources(self) -> list[ResourceMapping]:
        """Every resource the server serves, in each group's preferred version (read afresh)."""
        return await self.mapper.preferred_resources()

    def _namespace(
        self, mapping: ResourceMapping, namespace: str | None, obj: Mapping[str, Any] | None = None
    ) -> str | None:
        if not mapping.namespaced:
            return None
        if namespace:
            return namespace
        meta = obj.get("metadata") if obj is not None else None
        from_object = meta.get("namespace") if isinstance(meta, Mapping) else None
        return str(from_object) if from_object else self.config.namespace

    async def _object_path(
        self,
        kind: KindRef,
        name: str,
        namespace: str | None,
        subresource: str | None,
        obj: Mapping[str, Any] | None = None,
    ) -> str:
        if not name:
            raise ValueError("a name is required")
        mapping = await self.mapping(kind)
        path = f"{mapping.collection_path(self._namespace(mapping, namespace, obj))}/{name}"
        return f"{path}/{subresource}" if subresource else path

    # ------------------------------------------------------------------ verbs

    @overload
    async def get(
        self, kind: type[M] | M, name: str, *, namespace: str | None = None, subresource: str | None = None
    ) -> M: ...

    @overload
    async def get(
        self,
        kind: GroupVersionKind | Mapping[str, Any],
        name: str,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Obj: ...

    async def get(
        self, kind: KindRef, name: str, *, namespace: str | None = None, subresource: str | None = None
    ) -> Obj | KubeObject:
        """One object (or a subresource: ``status``, or ``scale`` given a GVK or dict kind).

        Given a model class (or a model) the answer is an instance of its class, else a dict.
        """
        _check_typed_subresource(kind, subresource)
        path = await self._object_path(kind, name, namespace, subresource)
        return _typed(kind, await self._json("GET", path))

    @overload
    async def list(
        self,
        kind: KindRef,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        page_size: int | None = 500,
        metadata_only: Literal[True],
        **options: Unpack[ListOptions],
    ) -> ObjectList[Obj]: ...

    @overload
    async def list(
        self,
        kind: type[M],
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        page_size: int | None = 500,
        metadata_only: Literal[False] = False,
        **options: Unpack[ListOptions],
    ) -> ObjectList[M]: ...

    @overload
    async def list(
        self,
        kind: GroupVersionKind | Mapping[str, Any],
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        page_size: int | None = 500,
        metadata_only: bool = False,
        **options: Unpack[ListOptions],
    ) -> ObjectList[Obj]: ...

    async def list(
        self,
        kind: KindRef,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        page_size: int | None = 500,
        metadata_only: bool = False,
        **options: Unpack[ListOptions],
    ) -> ObjectList[Any]:
        """All objects (``namespace=None``: across all namespaces) matching the selectors.

        ``match_labels`` is a label selector of exact matches (ANDed with ``label_selector``).
        Pages (``page_size`` objects each) share one snapshot: their ``continue`` tokens carry the
        first page's resourceVersion, which the answer's ``resource_version`` reports. Given a
        model class the items are its instances, else dicts; ``metadata_only`` asks for a
        ``PartialObjectMetadataList`` (items with metadata only; always dicts).
        """
        listed = await self._list_dict(
            kind,
            namespace=namespace,
            label_selector=_label_selector(options.get("label_selector"), options.get("match_labels")),
            field_selector=_field_selector(options.get("field_selector")),
            resource_version=resource_version,
            page_size=page_size,
            metadata_only=metadata_only,
        )
        snapshot = str(listed["metadata"].get("resourceVersion", ""))
        cls = model_class(kind)
        if cls is None or metadata_only:
            return ObjectList(listed["items"], snapshot)
        return ObjectList([cls.model_validate(item) for item in listed["items"]], snapshot)

    async def _list_dict(
        self,
        kind: KindRef,
        *,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
        resource_version: str | None,
        page_size: int | None,
        metadata_only: bool = False,
    ) -> Obj:
        items: list[Obj] = []
        first: Obj | None = None
        async for page in self.list_pages(
            kind,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            resource_version=resource_version,
            page_size=page_size,
            metadata_only=metadata_only,
        ):
            if first is None:
                first = page
            items.extend(page.get("items") or ())
        assert first is not None
        metadata = dict(first.get("metadata") or {})
        metadata.pop("continue", None)
        metadata.pop("remainingItemCount", None)
        return {**first, "metadata": metadata, "items": items}

    async def list_pages(
        self,
        kind: KindRef,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        page_size: int | None = 500,
        metadata_only: bool = False,
    ) -> AsyncIterator[Obj]:
        """Each page of a list as the server returns it (for lists too large to hold at once).

        The next page is asked for before a page is handed over, so the server makes it while the
        caller handles this one (one page read ahead; cancelled if the caller stops early).
        """
        accept = METADATA_LIST if metadata_only else JSON
        mapping = await self.mapping(kind)
        path = mapping.collection_path(namespace if mapping.namespaced else None)
        params = _selector_params(label_selector, field_selector)
        if page_size:
            params["limit"] = str(page_size)
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        page = await self._json("GET", path, params=params, accept=accept)
        ahead: asyncio.Task[Obj] | None = None
        try:
            while True:
                token = (page.get("metadata") or {}).get("continue")
                if token:
                    params = {
                        k: v
                        for k, v in params.items()
                        if k not in ("resourceVersion", "resourceVersionMatch")
                    }
                    params["continue"] = token
                    ahead = asyncio.create_task(self._json("GET", path, params=params, accept=accept))
                    await asyncio.sleep(0)  # the task sends its request before this page is handled
                yield page
                if ahead is None:
                    return
                page = await ahead
                ahead = None
        finally:
            if ahead is not None:
                ahead.cancel()
                await asyncio.wait([ahead])
                if not ahead.cancelled():
                    ahead.exception()  # the caller stopped: what became of the next page is moot

    @overload
    async def create(
        self,
        obj: M,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        name: str | None = None,
        of: KindRef | None = None,
        **options: Unpack[WriteOptions],
    ) -> M: ...

    @overload
    async def create(
        self,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        name: str | None = None,
        of: KindRef | None = None,
        **options: Unpack[WriteOptions],
    ) -> Obj: ...

    async def create(
        self,
        obj: ObjectRef,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        name: str | None = None,
        of: KindRef | None = None,
        **options: Unpack[WriteOptions],
    ) -> Obj | KubeObject:
        """POST ``obj`` to its collection, or to the ``subresource`` of the object ``name`` (of
        the kind ``of``, default ``obj``'s: a ServiceAccount's ``token`` takes a TokenRequest)."""
        body = _as_dict(obj)
        mapping = await self.mapping(of if of is not None and subresource else obj)
        path = mapping.collection_path(self._namespace(mapping, namespace, body))
        if subresource:
            path = f"{path}/{name or _name_of(body)}/{subresource}"
        params = write_params(options)
        created = await self._json("POST", path, params=params, body=orjson.dumps(body), content_type=JSON)
        return created if subresource else _typed(obj, created)

    @overload
    async def update(
        self,
        obj: M,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[WriteOptions],
    ) -> M: ...

    @overload
    async def update(
        self,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[WriteOptions],
    ) -> Obj: ...

    async def update(
        self,
        obj: ObjectRef,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[WriteOptions],
    ) -> Obj | KubeObject:
        """PUT ``obj`` (optimistic concurrency: its resourceVersion must be current, else Conflict)."""
        _check_typed_subresource(obj, subresource)
        body = _as_dict(obj)
        path = await self._object_path(obj, _name_of(body), namespace, subresource, body)
        params = write_params(options)
        updated = await self._json("PUT", path, params=params, body=orjson.dumps(body), content_type=JSON)
        return _typed(obj, updated)

    @overload
    async def patch(
        self,
        kind: type[M] | M,
        name: str | None,
        patch: Any,
        *,
        patch_type: PatchType = PatchType.MERGE,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[PatchOptions],
    ) -> M: ...

    @overload
    async def patch(
        self,
        kind: GroupVersionKind | Mapping[str, Any],
        name: str | None,
        patch: Any,
        *,
        patch_type: PatchType = PatchType.MERGE,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[PatchOptions],
    ) -> Obj: ...

    async def patch(
        self,
        kind: KindRef,
        name: str | None,
        patch: Any,
        *,
        patch_type: PatchType = PatchType.MERGE,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[PatchOptions],
    ) -> Obj | KubeObject:
        """PATCH with any patch type; ``patch`` is a dict/list/model (encoded as JSON) or raw bytes."""
        _check_typed_subresource(kind, subresource)
        obj = _identity(kind) if isinstance(kind, Mapping | KubeModel) else None
        path = await self._object_path(kind, name or _name_of(obj), namespace, subresource, obj)
        params = write_params(options, options.get("force"))
        if isinstance(patch, KubeModel):
            patch = patch.to_dict()
        body = patch if isinstance(patch, bytes) else orjson.dumps(patch)
        patched = await self._json("PATCH", path, params=params, body=body, content_type=str(patch_type))
        return _typed(kind, patched)

    @overload
    async def apply(
        self,
        obj: M,
        *,
        field_manager: str,
        force: bool = False,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[ApplyOptions],
    ) -> M: ...

    @overload
    async def apply(
        self,
        obj: ObjectApplyConfiguration[M],
        *,
        field_manager: str,
        force: bool = False,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[ApplyOptions],
    ) -> M: ...

    @overload
    async def apply(
        self,
        obj: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = False,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[ApplyOptions],
    ) -> Obj: ...

    async def apply(
        self,
        obj: ApplyRef,
        *,
        field_manager: str,
        force: bool = False,
        namespace: str | None = None,
        subresource: str | None = None,
        **options: Unpack[ApplyOptions],
    ) -> Obj | KubeObject:
        """Server-side apply of ``obj`` (the fields this manager wants to own, nothing else); an
        apply configuration sends the fields set in it and is answered with its kind's model."""
        body = obj.to_dict() if isinstance(obj, ObjectApplyConfiguration) else _as_dict(obj)
        return await self.patch(
            cast(KubeObject, obj),  # an apply configuration names its kind as its model does
            _name_of(body),
            body,
            patch_type=PatchType.APPLY,
            namespace=namespace,
            subresource=subresource,
            field_manager=field_manager,
            force=force,
            **options,
        )

    async def delete(
        self,
        kind: KindRef,
        name: str | None = None,
        *,
        namespace: str | None = None,
        **options: Unpack[DeleteOptions],
    ) -> Obj:
        """DELETE; returns the object (still there while finalizers run) or the Success Status, as a dict."""
        obj = _identity(kind) if isinstance(kind, Mapping | KubeObject) else None
        path = await self._object_path(kind, name or _name_of(obj), namespace, None, obj)
        body = delete_body(options)
        return await self._json("DELETE", path, body=orjson.dumps(body), content_type=JSON)

    async def delete_collection(
        self,
        kind: KindRef,
        *,
        namespace: str | None = None,
        label_selector: str | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
        **options: Unpack[DeleteOptions],
    ) -> Obj:
        """Delete every object of ``kind`` in ``namespace`` that the selectors match."""
        mapping = await self.mapping(kind)
        path = mapping.collection_path(self._namespace(mapping, namespace))
        params = _selector_params(_label_selector(label_selector, None), field_selector)
        body = delete_body(options)
        return await self._json("DELETE", path, params=params, body=orjson.dumps(body), content_type=JSON)

    def watch(
        self,
        kind: KindRef,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        send_initial_events: bool = False,
        inactivity_timeout: float = 90.0,
        yield_bookmarks: bool = False,
        metadata_only: bool = False,
    ) -> Watch:
        """A self-reconnecting watch (``async for event in client.watch(...)``); 410 raises ResourceExpired.

        ``metadata_only``: events carry ``PartialObjectMetadata`` objects.
        """
        options = WatchOptions(
            metadata_only=metadata_only,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            resource_version=resource_version,
            send_initial_events=send_initial_events,
            inactivity_timeout=inactivity_timeout,
            yield_bookmarks=yield_bookmarks,
        )
        return Watch(self, kind, options)

    # ------------------------------------------------------------------ transport

    async def _discovery(self, path: str) -> Obj:
        return await self._json("GET", path)

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
        decoded = orjson.loads(payload) if payload else {}
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


def _typed(kind: KindRef, answer: Obj) -> Obj | KubeObject:
    """The answer as the caller's model class when it gave one (a class or an instance)."""
    cls = model_class(kind)
    return cls.model_validate(answer) if cls is not None else answer


def _as_dict(obj: ObjectRef | KindRef) -> Obj:
    """A copy of the object's JSON form (the caller's dict is never changed)."""
    if isinstance(obj, KubeModel | Mapping):
        return dict(as_dict(obj))
    raise TypeError(f"an object dict or model is needed, not {obj!r}")


def _identity(obj: Mapping[str, Any] | KubeObject) -> Mapping[str, Any]:
    """What a path needs of an object: its metadata's name and namespace (a model's read off its
    metadata, not dumped whole)."""
    if not isinstance(obj, KubeModel):
        return obj
    meta = getattr(obj, "metadata", None)
    return {"metadata": {"name": getattr(meta, "name", None), "namespace": getattr(meta, "namespace", None)}}


def _check_typed_subresource(kind: KindRef, subresource: str | None) -> None:
    if subresource not in (None, "status") and model_class(kind) is not None:
        raise ValueError(
            f"the {subresource} subresource is not a {gvk_of(kind).kind}: address it with a GroupVersionKind"
        )


def _name_of(obj: Mapping[str, Any] | None) -> str:
    """The object's metadata.name; a kind given as a GroupVersionKind needs an explicit name."""
    meta = obj.get("metadata") if obj is not None else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ValueError("a name is required (the object has no metadata.name)")
    return name


def _label_selector(
    selector: str | LabelSelector | None, match_labels: Mapping[str, str] | None
) -> str | None:
    """The label selector's text (the server parses it), with ``match_labels`` ANDed in (validated
    here, as the cache does: ``labels.ValidatedSelectorFromSet``)."""
    terms = [str(selector)] if selector is not None and str(selector) else []
    if match_labels:
        terms.append(str(LabelSelector.validated_from_set(match_labels)))
    return ",".join(terms) or None


def _field_selector(selector: str | FieldSelector | None) -> str | None:
    return str(selector) if selector is not None else None


def _selector_params(
    label_selector: str | None, field_selector: str | FieldSelector | None
) -> dict[str, str]:
    params: dict[str, str] = {}
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector is not None and str(field_selector):
        params["fieldSelector"] = str(field_selector)
    return params


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
