"""Serving what CustomResourceDefinitions define, and cleaning up after deleted ones.

Every durable CRD write reaches :meth:`CRDController.committed` before it is answered: the
served versions of an established CRD go into the catalog with their strategies (and out again
when a version stops being served), so discovery, OpenAPI and the resource paths show them at
once. A CRD marked deleted stops taking new objects; a background task deletes its objects
(waiting for their finalizers) and then removes the ``customresourcecleanup`` finalizer, after
which the CRD goes and its kinds leave the catalog — what upstream's finalizing controller does.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.apiextensions.crdregistry import CLEANUP_FINALIZER, CRDStrategy, served_resources
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.openapi.v3 import crd_definitions
from kubeloop.apiserver.registry.generic import Registry
from kubeloop.apiserver.registry.verboptions import DeleteOptions, ListOptions, WriteOptions
from kubeloop.apiserver.registry.versionconversion import VersionConverter
from kubeloop.apiserver.retryloop import RetryLoop

log = logging.getLogger("kubeloop.apiserver.crds")


class CRDController:
    """Keeps the catalog to the CRDs committed (a registry commit listener) and owns one
    cleanup task (``start``/``stop``)."""

    def __init__(
        self,
        registry: Registry,
        *,
        retry_interval: float = 0.5,
        webhook_converter: Callable[[Obj], VersionConverter] | None = None,
    ) -> None:
        self._registry = registry
        #: Makes the converter of a CRD whose conversion strategy is Webhook.
        self._webhook_converter = webhook_converter
        #: CRD name → (the spec's generation, its converter): kept while the spec is unchanged.
        self._converters: dict[str, tuple[int, VersionConverter]] = {}
        crds = registry.catalog.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        if crds is None:
            raise RuntimeError("the catalog does not serve CustomResourceDefinitions")
        self._crds = crds
        registry.set_strategy(CRDStrategy(crds, registry.catalog))
        registry.add_commit_listener("apiextensions.k8s.io", "customresourcedefinitions", self.committed)
        #: CRD name → the resources it serves now.
        self._served: dict[str, list[ResourceType]] = {}
        self._definitions: dict[str, dict[str, Any]] = {}
        self._cleanup = RetryLoop(self._clean_up, what="crd-cleanup", log=log, retry_interval=retry_interval)
        self._started = False

    def definitions(self) -> Mapping[str, Any]:
        """The OpenAPI definitions of every served custom resource kind, by definition name."""
        merged: dict[str, Any] = {}
        for defs in list(self._definitions.values()):
            merged.update(defs)
        return merged

    def load(self) -> None:
        """Serve the CRDs already stored (at start-up)."""
        for _key, obj in self._registry.store.items(self._crds.key_prefix()):
            self.committed(obj, None)

    def committed(self, obj: Obj | None, old: Obj | None) -> None:
        """A CRD write is durable: make the catalog match it."""
        name = ((obj or old or {}).get("metadata") or {}).get("name", "")
        if obj is None:
            self._unserve(name)
            return
        established = any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in (obj.get("status") or {}).get("conditions") or ()
            if isinstance(c, dict)
        )
        if not established:
            self._unserve(name)
            return
        served = served_resources(obj, self._converter(name, obj))
        terminating = bool((obj.get("metadata") or {}).get("deletionTimestamp"))
        kept = {(r.group, r.version, r.plural) for r, _ in served}
        for resource in self._served.get(name, ()):
            if (resource.group, resource.version, resource.plural) not in kept:
                self._registry.drop_strategy(resource)
                self._registry.catalog.remove(resource)
        for resource, strategy in served:
            strategy.terminating = terminating
            self._registry.set_strategy(strategy)
            self._registry.catalog.add(resource)
        self._served[name] = [r for r, _ in served]
        self._definitions[name] = crd_definitions(obj)
        if terminating:
            self._queue(name)

    def _converter(self, name: str, crd: Obj) -> VersionConverter | None:
        conversion = (crd.get("spec") or {}).get("conversion") or {}
        if conversion.get("strategy") != "Webhook" or self._webhook_converter is None:
            self._converters.pop(name, None)
            return None
        generation = int((crd.get("metadata") or {}).get("generation") or 0)
        kept = self._converters.get(name)
        if kept is not None and kept[0] == generation:
            return kept[1]
        converter = self._webhook_converter(crd)
        self._converters[name] = (generation, converter)
        return converter

    def _unserve(self, name: str) -> None:
        self._converters.pop(name, None)
        for resource in self._served.pop(name, ()):
            self._registry.drop_strategy(resource)
            self._registry.catalog.remove(resource)
        self._definitions.pop(name, None)

    def _queue(self, name: str) -> None:
        if self._started:  # start() queues what is terminating
            self._cleanup.queue(name)

    def start(self, *, clean_up: bool = True) -> None:
        """Serve the stored CRDs; with ``clean_up``, also delete the objects of terminating ones
        (the server that owns the store does that; its front-ends only serve)."""
        self.load()
        if not clean_up:
            return
        for _key, obj in self._registry.store.items(self._crds.key_prefix()):
            if (obj.get("metadata") or {}).get("deletionTimestamp"):
                self._cleanup.queue(obj["metadata"]["name"])
        self._started = True
        self._cleanup.start()

    async def stop(self) -> None:
        await self._cleanup.stop()

    async def _clean_up(self, name: str) -> bool:
        """Delete a terminating CRD's objects, then let it go; True when nothing is left to do."""
        registry = self._registry
        stored = registry.store.get(self._crds.key(None, name))
        if stored is None or not (stored.obj.get("metadata") or {}).get("deletionTimestamp"):
            return True
        remaining = 0
        for resource in self._served.get(name, ())[:1]:  # every version shares the storage
            await registry.delete_collection(
                resource, None, ListOptions(), DeleteOptions(propagation_policy="Background")
            )
            remaining += registry.store.count_with_prefix(resource.key_prefix(None))
        if remaining:
            return False
        body = dict(stored.obj)
        metadata = dict(body["metadata"])
        metadata["finalizers"] = [f for f in metadata.get("finalizers") or () if f != CLEANUP_FINALIZER]
        body["metadata"] = metadata
        with contextlib.suppress(errors.NotFound):
            await registry.update(self._crds, None, name, body, WriteOptions())
        return True
