"""Serving what CustomResourceDefinitions define, and cleaning up after deleted ones.

Every durable CRD write reaches :meth:`CRDController.committed` before it is answered: the
served versions of an established CRD go into the catalog with their strategies (and out again
when a version stops being served), so discovery, OpenAPI and the resource paths show them at
once. A CRD marked deleted stops taking new objects; a background task deletes its objects
(waiting for their finalizers) and then removes the ``customresourcecleanup`` finalizer, after
which the CRD goes and its kinds leave the catalog — what upstream's finalizing controller does.

A CRD's names are judged when it is written, against the catalog of the process that takes the
write; two processes (``--workers``) can each accept one of two CRDs that name one kind at once.
Every process applies commits in revision order, so each serves the first and not the later;
the server that owns the store then writes the later one's status again (``NamesAccepted``
False, ``KindConflict``), and when the first goes, the later is judged again and served — what
upstream's naming controller does.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable, Mapping
from typing import Any

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.apiextensions.crdregistry import (
    CLEANUP_FINALIZER,
    CRDStrategy,
    CustomResourceStrategy,
    served_resources,
)
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
        #: CRD name → the spec its served strategies were made from, and those strategies: a write
        #: that leaves the spec as it was (the CRD's status, its labels) keeps them, and with them
        #: every cache made for their schemas (validators, typed plans, field-set plans).
        self._made_from: dict[str, tuple[Any, list[CustomResourceStrategy]]] = {}
        self._definitions: dict[str, dict[str, Any]] = {}
        self._cleanup = RetryLoop(self._clean_up, what="crd-cleanup", log=log, retry_interval=retry_interval)
        #: CRDs whose names are judged again (the owner's: a write that could not see another).
        self._naming = RetryLoop(self._judge_names, what="crd-naming", log=log, retry_interval=retry_interval)
        self._started = False

    def definitions(self) -> Mapping[str, Any]:
        """The OpenAPI definitions of every served custom resource kind, by definition name."""
        merged: dict[str, Any] = {}
        for defs in list(self._definitions.values()):
            merged.update(defs)
        return merged

    def load(self) -> None:
        """Serve the CRDs already stored (at start-up): the oldest first, so that of two naming one
        kind the first keeps it."""
        stored = [obj for _key, obj in self._registry.store.items(self._crds.key_prefix())]
        stored.sort(key=lambda obj: (str(obj["metadata"].get("creationTimestamp") or ""), obj["metadata"]["name"]))
        for obj in stored:
            self.committed(obj, None)

    def committed(self, obj: Obj | None, old: Obj | None) -> None:
        """A CRD write is durable: make the catalog match it."""
        name = ((obj or old or {}).get("metadata") or {}).get("name", "")
        if obj is None:
            self._unserve(name)
            self._judge_group_again(old)
            return
        if not _condition(obj, "Established", "True"):
            self._unserve(name)
            self._judge_group_again(old)
            return
        if self._served_with_names_of(name, obj):
            self._unserve(name)  # the first to name its kind keeps it
            self._queue_naming(name)
            return
        terminating = bool((obj.get("metadata") or {}).get("deletionTimestamp"))
        spec = obj.get("spec")
        made = self._made_from.get(name)
        if made is not None and name in self._served and made[0] == spec:
            for strategy in made[1]:
                strategy.terminating = terminating
            if terminating:
                self._queue(name)
            return
        served = served_resources(obj, self._converter(name, obj))
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
        self._made_from[name] = (spec, [strategy for _, strategy in served])
        self._definitions[name] = crd_definitions(obj)
        if terminating:
            self._queue(name)

    def _served_with_names_of(self, name: str, crd: Obj) -> bool:
        """Whether another CRD served here has the kind or plural ``crd`` names, in its group."""
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        return any(
            resource.group == spec.get("group")
            and (resource.kind == names.get("kind") or resource.plural == names.get("plural"))
            for other, resources in self._served.items()
            if other != name
            for resource in resources
        )

    def _judge_group_again(self, crd: Obj | None) -> None:
        """A CRD of ``crd``'s group stopped being served: judge again those refused for a conflict."""
        if crd is None or not self._started:
            return
        group = (crd.get("spec") or {}).get("group")
        for _key, other in self._registry.store.items(self._crds.key_prefix()):
            if (other.get("spec") or {}).get("group") == group and _condition(
                other, "NamesAccepted", "False", "KindConflict"
            ):
                self._naming.queue(other["metadata"]["name"])

    def _queue_naming(self, name: str) -> None:
        if self._started:  # the owner writes; front-ends see the result
            self._naming.queue(name)

    async def _judge_names(self, name: str) -> bool:
        """Write a CRD's status again: its strategy judges its names against this catalog."""
        stored = self._registry.store.get(self._crds.key(None, name))
        if stored is None:
            return True
        try:
            body = copy.deepcopy(stored.obj)
            await self._registry.update(self._crds, None, name, body, WriteOptions(), subresource="status")
        except errors.NotFound:
            return True
        except errors.Conflict:
            return False  # written meanwhile: judged with that write; once more to be sure
        return True

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
        self._made_from.pop(name, None)
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
        self._naming.start()
        for _key, obj in self._registry.store.items(self._crds.key_prefix()):
            name = obj["metadata"]["name"]
            if name not in self._served and _condition(obj, "Established", "True"):
                self._naming.queue(name)  # refused at load for a conflict, its status not yet written

    async def stop(self) -> None:
        await self._cleanup.stop()
        await self._naming.stop()

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


def _condition(crd: Obj, kind: str, status: str, reason: str | None = None) -> bool:
    """Whether ``crd`` has condition ``kind`` at ``status`` (and for ``reason``, if given)."""
    return any(
        c.get("type") == kind and c.get("status") == status and (reason is None or c.get("reason") == reason)
        for c in (crd.get("status") or {}).get("conditions") or ()
        if isinstance(c, dict)
    )
