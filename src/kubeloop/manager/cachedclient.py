"""The client reconcilers use (controller-runtime's default client): reads from the shared
informer cache, writes straight to the API server.

Reading a kind for the first time creates its informer (started at once when the manager runs)
and waits until it has synced; what comes back is a copy, so a reconciler may change it freely.
``list`` filters by namespace, by labels (equality, like ``matchLabels``) and by a registered
index (a field index is an index function reading a field). ``uncached`` is the plain API client
for reads that must see the server's latest state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeloop.api.model import KubeObject
from kubeloop.cache.store import NAMESPACE_INDEX
from kubeloop.client import errors
from kubeloop.client.rest import Client, KindRef, gvk_of
from kubeloop.manager.manager import Manager

Obj = dict[str, Any]


class CachedClient:
    def __init__(self, manager: Manager, *, sync_timeout: float = 120.0) -> None:
        self.manager = manager
        self.sync_timeout = sync_timeout

    @property
    def uncached(self) -> Client:
        return self.manager.client

    async def get(self, kind: KindRef, name: str, namespace: str | None = None) -> Any:
        """The cached object (a copy; a model when ``kind`` is a model class); NotFound if absent."""
        await self._synced(kind)
        obj = self.manager.get_cached(kind, name, namespace)
        if obj is None:
            gvk = gvk_of(kind)
            raise errors.NotFound(
                {"message": f'{gvk.kind.lower()} "{name}" not found', "reason": "NotFound", "code": 404}, 404
            )
        return _typed(kind, obj)

    async def list(
        self,
        kind: KindRef,
        namespace: str | None = None,
        *,
        match_labels: Mapping[str, str] | None = None,
        index: tuple[str, str] | None = None,
    ) -> list[Any]:
        """Cached objects of ``kind`` (copies), filtered by namespace, labels and an index value."""
        await self._synced(kind)
        store = self.manager.informer_for(kind).store
        if index is not None:
            candidates = store.by_index(*index)
            if namespace is not None:
                candidates = [
                    o for o in candidates if (o.get("metadata") or {}).get("namespace") == namespace
                ]
        elif namespace is not None:
            candidates = store.by_index(NAMESPACE_INDEX, namespace)
        else:
            candidates = store.objects()
        wanted = dict(match_labels or {})
        out = []
        for obj in candidates:
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if all(labels.get(k) == v for k, v in wanted.items()):
                out.append(_typed(kind, self.manager.copy(obj)))
        return out

    # Writes go to the server.

    async def create(self, obj: Any, **options: Any) -> Any:
        return await self.manager.client.create(obj, **options)

    async def update(self, obj: Any, **options: Any) -> Any:
        return await self.manager.client.update(obj, **options)

    async def patch(self, kind: Any, name: str | None, patch: Any, **options: Any) -> Any:
        return await self.manager.client.patch(kind, name, patch, **options)

    async def apply(self, obj: Any, *, field_manager: str, **options: Any) -> Any:
        return await self.manager.client.apply(obj, field_manager=field_manager, **options)

    async def delete(self, kind: Any, name: str | None = None, **options: Any) -> Obj:
        return await self.manager.client.delete(kind, name, **options)

    async def _synced(self, kind: KindRef) -> None:
        informer = self.manager.informer_for(kind)
        informer.start()  # no-op when already running
        if not await informer.wait_for_sync(self.sync_timeout):
            raise TimeoutError(f"the cache of {gvk_of(kind)} did not sync within {self.sync_timeout}s")


def _typed(kind: KindRef, obj: Obj) -> Any:
    if isinstance(kind, type) and issubclass(kind, KubeObject):
        return kind.model_validate(obj)
    return obj
