"""The client reconcilers use (controller-runtime's default client): reads from the shared
cache, writes straight to the API server.

Reading a kind for the first time creates its informer (started at once) and waits until it has
synced; what comes back is a fresh copy, so a reconciler may change it freely — a model when
``kind`` is a model class. ``list`` filters by namespace, a label selector (the full grammar)
and ``match_labels``, a field selector on indexed fields (``manager.add_index``) or an index
value. ``metadata_only`` reads go through a metadata-only informer (dicts with ``apiVersion``,
``kind`` and ``metadata``). ``uncached`` is the plain API client for reads that must see the
server's latest state. ``manager.cached_client`` is the manager's instance.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeloop.api.fields import FieldSelector
from kubeloop.api.labels import LabelSelector
from kubeloop.api.model import KubeObject
from kubeloop.cache.cache import Cache
from kubeloop.client.rest import Client, KindRef

Obj = dict[str, Any]


class CachedClient:
    def __init__(self, cache: Cache, client: Client) -> None:
        self.cache = cache
        self.client = client

    @property
    def uncached(self) -> Client:
        return self.client

    async def get(
        self, kind: KindRef, name: str, namespace: str | None = None, *, metadata_only: bool = False
    ) -> Any:
        """The cached object; NotFound if absent (``cache.OutOfScope`` outside the cache's namespaces)."""
        obj = await self.cache.get(kind, name, namespace, metadata_only=metadata_only)
        return obj if metadata_only else _typed(kind, obj)

    async def list(
        self,
        kind: KindRef,
        namespace: str | None = None,
        *,
        label_selector: str | LabelSelector | None = None,
        match_labels: Mapping[str, str] | None = None,
        field_selector: str | FieldSelector | None = None,
        index: tuple[str, str] | None = None,
        metadata_only: bool = False,
    ) -> list[Any]:
        """Cached objects of ``kind`` matching every filter (see ``Cache.list``)."""
        objects = await self.cache.list(
            kind,
            namespace,
            label_selector=label_selector,
            match_labels=match_labels,
            field_selector=field_selector,
            index=index,
            metadata_only=metadata_only,
        )
        return objects if metadata_only else [_typed(kind, obj) for obj in objects]

    # Writes go to the server.

    async def create(self, obj: Any, **options: Any) -> Any:
        return await self.client.create(obj, **options)

    async def update(self, obj: Any, **options: Any) -> Any:
        return await self.client.update(obj, **options)

    async def patch(self, kind: Any, name: str | None, patch: Any, **options: Any) -> Any:
        return await self.client.patch(kind, name, patch, **options)

    async def apply(self, obj: Any, *, field_manager: str, **options: Any) -> Any:
        return await self.client.apply(obj, field_manager=field_manager, **options)

    async def delete(self, kind: Any, name: str | None = None, **options: Any) -> Obj:
        return await self.client.delete(kind, name, **options)


def _typed(kind: KindRef, obj: Obj) -> Any:
    if isinstance(kind, type) and issubclass(kind, KubeObject):
        return kind.model_validate(obj)
    return obj
