"""The client reconcilers use (controller-runtime's default client, ``manager.client``): reads
from the shared cache, writes straight to the API server.

It implements the ``Client`` protocol with the same arguments as ``APIClient``. Reading a kind
for the first time creates its informer (started at once) and waits until it has synced; what
comes back is a fresh copy, so a reconciler may change it freely — a model when ``kind`` is a
model class or a model. ``list`` filters by namespace, a label selector (the full grammar) and
``match_labels``, a field selector on indexed fields (``manager.add_index``) or an ``index``
value. ``metadata_only`` reads go through a metadata-only informer (dicts with ``apiVersion``,
``kind`` and ``metadata``). The kinds of ``CacheOptions.disable_for`` are read from the API
server instead, never cached. Writes are ``APIClient``'s own methods. ``manager.api_reader`` is
the plain API client, for reads that must see the server's latest state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Unpack, cast, overload

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.model import KubeObject
from kubeloop.api.object import Obj
from kubeloop.cache.cache import Cache
from kubeloop.client.calloptions import ListOptions
from kubeloop.client.interface import Client, KindRef, M, ObjectList, gvk_of, model_class
from kubeloop.client.rest import APIClient


class CachedClient:
    """The manager's client (``manager.client``): reads from the cache, writes to the server.

    ``get`` and ``list`` answer from the shared informer cache (the first read of a kind starts
    its informer and waits for it to sync) and so cost no request; writes go to the API
    server through ``writer``. It implements :class:`~kubeloop.Client`, like the API client.
    """

    def __init__(self, cache: Cache, writer: APIClient) -> None:
        self.cache = cache
        #: The kinds read from the API server instead of the cache.
        self.uncached = frozenset(gvk_of(kind) for kind in cache.options.disable_for)
        #: The API client the writes go to.
        self.writer = writer
        self.create = writer.create
        self.update = writer.update
        self.patch = writer.patch
        self.apply = writer.apply
        self.delete = writer.delete
        self.delete_collection = writer.delete_collection

    @overload
    async def get(
        self,
        kind: type[M] | M,
        name: str,
        *,
        namespace: str | None = None,
        metadata_only: Literal[False] = False,
    ) -> M: ...

    @overload
    async def get(
        self,
        kind: KindRef,
        name: str,
        *,
        namespace: str | None = None,
        metadata_only: Literal[True],
    ) -> Obj: ...

    @overload
    async def get(
        self,
        kind: GroupVersionKind | Mapping[str, Any],
        name: str,
        *,
        namespace: str | None = None,
        metadata_only: bool = False,
    ) -> Obj: ...

    async def get(
        self, kind: KindRef, name: str, *, namespace: str | None = None, metadata_only: bool = False
    ) -> Obj | KubeObject:
        """The cached object; NotFound if absent (``cache.OutOfScope`` outside the cache's namespaces).
        A kind of the cache's ``disable_for`` is read from the API server."""
        if self._uncached(kind):
            found: Obj | KubeObject = await self.writer.get(cast(Any, kind), name, namespace=namespace)
            return found
        obj = await self.cache.get(kind, name, namespace=namespace, metadata_only=metadata_only)
        cls = None if metadata_only else model_class(kind)
        return cls.model_validate(obj) if cls is not None else obj

    @overload
    async def list(
        self,
        kind: KindRef,
        *,
        namespace: str | None = None,
        index: tuple[str, str] | None = None,
        metadata_only: Literal[True],
        **options: Unpack[ListOptions],
    ) -> ObjectList[Obj]: ...

    @overload
    async def list(
        self,
        kind: type[M],
        *,
        namespace: str | None = None,
        index: tuple[str, str] | None = None,
        metadata_only: Literal[False] = False,
        **options: Unpack[ListOptions],
    ) -> ObjectList[M]: ...

    @overload
    async def list(
        self,
        kind: GroupVersionKind | Mapping[str, Any],
        *,
        namespace: str | None = None,
        index: tuple[str, str] | None = None,
        metadata_only: bool = False,
        **options: Unpack[ListOptions],
    ) -> ObjectList[Obj]: ...

    async def list(
        self,
        kind: KindRef,
        *,
        namespace: str | None = None,
        index: tuple[str, str] | None = None,
        metadata_only: bool = False,
        **options: Unpack[ListOptions],
    ) -> ObjectList[Any]:
        """Cached objects of ``kind`` matching every filter (see ``Cache.list``), ordered by key.
        A kind of the cache's ``disable_for`` is listed by the API server (no ``index`` then)."""
        if self._uncached(kind):
            if index is not None:
                raise ValueError(f"{gvk_of(kind).kind} is not cached (disable_for): it has no index to list by")
            listed: ObjectList[Any] = await self.writer.list(cast(Any, kind), namespace=namespace, **options)
            return listed
        objects = await self.cache.list(
            kind,
            namespace=namespace,
            index=index,
            metadata_only=metadata_only,
            **options,
        )
        cls = None if metadata_only else model_class(kind)
        if cls is not None:
            return ObjectList([cls.model_validate(obj) for obj in objects])
        return ObjectList(objects)


    def _uncached(self, kind: KindRef) -> bool:
        return bool(self.uncached) and gvk_of(kind) in self.uncached


if TYPE_CHECKING:  # mypy proves both clients implement the protocol helpers take

    def _implements_client(cached: CachedClient, api: APIClient) -> tuple[Client, Client]:
        return cached, api
