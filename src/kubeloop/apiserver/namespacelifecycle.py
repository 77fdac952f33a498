"""The namespace controller: empties a terminating namespace, then finalizes it.

DELETE of a namespace only marks it (phase Terminating, deletionTimestamp); this loop deletes
every object in it (objects with finalizers wait for their controllers), then removes the
``kubernetes`` finalizer from ``spec.finalizers`` so that the namespace itself goes away — the
work kube-controller-manager's namespace controller does upstream.
"""

from __future__ import annotations

import asyncio
import logging

from kubeloop import errors
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.registry.generic import DeleteOptions, ListOptions, Registry, WriteOptions
from kubeloop.lifecycle import cancel_and_wait

log = logging.getLogger("kubeloop.apiserver.namespaces")

NAMESPACES = ResourceType(
    "", "v1", "namespaces", "namespace", "Namespace", False, subresources=("status", "finalize")
)


class NamespaceLifecycle:
    """Owns one background task; ``start`` and ``stop`` are called by the server."""

    def __init__(self, registry: Registry, *, retry_interval: float = 0.5) -> None:
        self._registry = registry
        self._retry = retry_interval
        self._pending: asyncio.Queue[str] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def terminating(self, name: str) -> None:
        """Queue a namespace for emptying (callable from any thread)."""
        if self._loop is not None and self._loop is not _running_loop():
            self._loop.call_soon_threadsafe(self._pending.put_nowait, name)
        else:
            self._pending.put_nowait(name)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        namespaces = self._registry.catalog.lookup("", "v1", "namespaces") or NAMESPACES
        for _key, obj in self._registry.store.items(namespaces.key_prefix()):
            if (obj.get("metadata") or {}).get("deletionTimestamp"):
                self.terminating(obj["metadata"]["name"])
        self._task = asyncio.create_task(self._run(), name="kubeloop-namespace-lifecycle")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None

    async def _run(self) -> None:
        while True:
            name = await self._pending.get()
            try:
                done = await self._finalize(name)
            except errors.APIError as error:
                log.warning("namespace %s: %s", name, error.message)
                done = False
            except Exception:
                log.exception("namespace %s: finalization failed", name)
                done = False
            if not done:
                asyncio.get_running_loop().call_later(self._retry, self._pending.put_nowait, name)

    async def _finalize(self, name: str) -> bool:
        """Delete the namespace's content; True once the namespace is finalized or gone."""
        registry = self._registry
        namespaces = registry.catalog.lookup("", "v1", "namespaces") or NAMESPACES
        stored = registry.store.get(namespaces.key(None, name))
        if stored is None or not (stored.obj.get("metadata") or {}).get("deletionTimestamp"):
            return True
        remaining = 0
        for resource in registry.catalog.all():
            if not resource.namespaced or resource.storage_of is not None:
                continue
            await registry.delete_collection(
                resource, name, ListOptions(), DeleteOptions(propagation_policy="Background")
            )
            remaining += sum(1 for _ in registry.store.keys_with_prefix(resource.key_prefix(name)))
        if remaining:
            return False
        current = registry.store.get(namespaces.key(None, name))
        if current is None:
            return True
        body = dict(current.obj)
        spec = dict(body.get("spec") or {})
        spec["finalizers"] = [f for f in spec.get("finalizers") or () if f != "kubernetes"]
        body["spec"] = spec
        await registry.update(namespaces, None, name, body, WriteOptions(), subresource="finalize")
        return True


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
