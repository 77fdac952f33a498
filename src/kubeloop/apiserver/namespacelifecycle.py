"""The namespace controller: empties a terminating namespace, then finalizes it.

DELETE of a namespace only marks it (phase Terminating, deletionTimestamp); this loop deletes
every object in it (objects with finalizers wait for their controllers), then removes the
``kubernetes`` finalizer from ``spec.finalizers`` so that the namespace itself goes away — the
work kube-controller-manager's namespace controller does upstream.
"""

from __future__ import annotations

import logging

from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.registry.generic import DeleteOptions, ListOptions, Registry, WriteOptions
from kubeloop.apiserver.retryloop import RetryLoop

log = logging.getLogger("kubeloop.apiserver.namespaces")

NAMESPACES = ResourceType(
    "", "v1", "namespaces", "namespace", "Namespace", False, subresources=("status", "finalize")
)


class NamespaceLifecycle:
    """Owns one background task; ``start`` and ``stop`` are called by the server."""

    def __init__(self, registry: Registry, *, retry_interval: float = 0.5) -> None:
        self._registry = registry
        self._loop = RetryLoop(
            self._finalize, what="namespace-lifecycle", log=log, retry_interval=retry_interval
        )

    def terminating(self, name: str) -> None:
        """Queue a namespace for emptying (callable from any thread)."""
        self._loop.queue(name)

    def start(self) -> None:
        namespaces = self._registry.catalog.lookup("", "v1", "namespaces") or NAMESPACES
        for _key, obj in self._registry.store.items(namespaces.key_prefix()):
            if (obj.get("metadata") or {}).get("deletionTimestamp"):
                self.terminating(obj["metadata"]["name"])
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

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
