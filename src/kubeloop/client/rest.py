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
from collections.abc import AsyncIterator, Mapping
from enum import StrEnum
from typing import Any, Literal, Unpack, cast, overload

import orjson

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
from kubeloop.client.interface import ApplyRef, KindRef, M, ObjectList, ObjectRef, gvk_of, model_class
from kubeloop.client.restclient import JSON, RESTClient
from kubeloop.client.restmapper import ResourceMapping
from kubeloop.client.watch import Watch, WatchOptions
from kubeloop.gcpause import gc_paused

#: Accept headers asking for metadata only (``PartialObjectMetadata``), JSON as the fallback.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


class PatchType(StrEnum):
    """The patch formats the API server takes, by their media types."""

    JSON = "application/json-patch+json"
    MERGE = "application/merge-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"


class APIClient(RESTClient):
    """An async client for one API server. Use ``async with APIClient(config) as client``."""

    # ------------------------------------------------------------------ addressing

    async def mapping(self, kind: KindRef) -> ResourceMapping:
        """The resource serving ``kind``: its plural, scope, verbs and paths (from discovery)."""
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
        with gc_paused():  # thousands of models made at once hold no cycles (see decode_json)
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
        obj = _identity(kind) if isinstance(kind, (Mapping, KubeModel)) else None
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
        obj = _identity(kind) if isinstance(kind, (Mapping, KubeObject)) else None
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


def _typed(kind: KindRef, answer: Obj) -> Obj | KubeObject:
    """The answer as the caller's model class when it gave one (a class or an instance)."""
    cls = model_class(kind)
    return cls.model_validate(answer) if cls is not None else answer


def _as_dict(obj: ObjectRef | KindRef) -> Obj:
    """A copy of the object's JSON form (the caller's dict is never changed)."""
    if isinstance(obj, (KubeModel, Mapping)):
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
