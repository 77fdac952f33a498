"""The namespace controller: empties a terminating namespace, then lets it go.

DELETE of a namespace only marks it (``deletionTimestamp``, phase Terminating; creates in it get
403). This controller — a kubeloop reconciler of Namespaces — then deletes everything in it:
every namespaced resource that discovery lists as deletable, custom resources included: a kind
that holds objects there gets one delete-collection (Background propagation) or, without that
verb, one delete per object. It reports progress in the namespace's conditions as kube-controller-manager does
(NamespaceDeletionDiscoveryFailure, NamespaceDeletionGroupVersionParsingFailure,
NamespaceDeletionContentFailure, NamespaceContentRemaining, NamespaceFinalizersRemaining); while
objects remain (held by finalizers) it looks again every ``recheck_interval`` seconds. Once the
namespace is empty it removes the ``kubernetes`` finalizer through ``/finalize``, and the server
deletes the namespace.
"""

from __future__ import annotations

import collections
import contextlib
import logging
from typing import Any

from kubeloop import errors, kinds
from kubeloop.api import timestamps
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.object import Obj
from kubeloop.client.restclient import REQUEST_ERRORS
from kubeloop.controller.reconcile import Request, Result
from kubeloop.manager.builder import Builder
from kubeloop.manager.manager import Manager

log = logging.getLogger("kubeloop.controllermanager.namespace")

NAMESPACE = kinds.Namespace
FINALIZER = "kubernetes"

#: The conditions this controller keeps, in upstream's order, with their reason and message when
#: nothing is wrong.
CONDITIONS: dict[str, tuple[str, str]] = {
    "NamespaceDeletionDiscoveryFailure": ("ResourcesDiscovered", "All resources successfully discovered"),
    "NamespaceDeletionGroupVersionParsingFailure": (
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    "NamespaceDeletionContentFailure": (
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    "NamespaceContentRemaining": ("ContentRemoved", "All content successfully removed"),
    "NamespaceFinalizersRemaining": ("ContentRemoved", "All content successfully removed"),
}


class NamespaceController:
    """Registers its reconciler with ``manager`` (a controller named ``namespace``)."""

    def __init__(self, manager: Manager, *, recheck_interval: float = 1.0) -> None:
        self.manager = manager
        self.client = manager.api_reader
        self.recheck_interval = recheck_interval
        Builder(manager).named("namespace").for_(NAMESPACE).complete(self.reconcile)

    async def reconcile(self, request: Request) -> Result | None:
        try:
            namespace = await self.manager.client.get(NAMESPACE, request.name)
        except errors.NotFound:
            return None
        meta = namespace.get("metadata") or {}
        if not meta.get("deletionTimestamp"):
            return None
        if FINALIZER not in ((namespace.get("spec") or {}).get("finalizers") or ()):
            return None  # finalized; the server deletes it once its other finalizers are gone
        failures: dict[str, tuple[str, str]] = {}
        try:
            resources = [
                mapping
                for mapping in await self.client.preferred_resources()
                if mapping.namespaced and {"delete", "list"} <= mapping.verbs
            ]
        except REQUEST_ERRORS as exc:
            failures["NamespaceDeletionDiscoveryFailure"] = ("DiscoveryFailed", str(exc))
            await self._report(namespace, failures)
            return Result(requeue_after=self.recheck_interval)
        remaining: collections.Counter[str] = collections.Counter()
        held: collections.Counter[str] = collections.Counter()
        content_errors: list[str] = []
        for mapping in resources:
            try:
                left = (await self.client.list(mapping.gvk, namespace=request.name)).items
                if left and "deletecollection" in mapping.verbs:
                    await self.client.delete_collection(
                        mapping.gvk, namespace=request.name, propagation_policy="Background"
                    )
                    left = (await self.client.list(mapping.gvk, namespace=request.name)).items
                for obj in left:
                    obj_meta = obj.get("metadata") or {}
                    if "deletecollection" not in mapping.verbs and not obj_meta.get("deletionTimestamp"):
                        await self._delete(mapping.gvk, request.name, obj_meta)
                    for finalizer in obj_meta.get("finalizers") or ():
                        held[finalizer] += 1
                if left:
                    remaining[f"{mapping.resource}.{mapping.gvk.group}"] += len(left)
            except REQUEST_ERRORS as exc:
                content_errors.append(f"{mapping.resource}.{mapping.gvk.group}: {exc}")
        if content_errors:
            content_errors.sort()
            failures["NamespaceDeletionContentFailure"] = (
                "ContentDeletionFailed",
                f"Failed to delete all resource types, {len(content_errors)} remaining: {', '.join(content_errors)}",
            )
        if remaining:
            listed = sorted(
                f"{resource} has {count} resource instances" for resource, count in remaining.items()
            )
            failures["NamespaceContentRemaining"] = (
                "SomeResourcesRemain",
                f"Some resources are remaining: {', '.join(listed)}",
            )
        if held:
            listed = sorted(f"{finalizer} in {count} resource instances" for finalizer, count in held.items())
            failures["NamespaceFinalizersRemaining"] = (
                "SomeFinalizerRemain",
                f"Some finalizers are remaining: {', '.join(listed)}",
            )
        namespace = await self._report(namespace, failures)
        if failures:
            return Result(requeue_after=self.recheck_interval)
        await self._finalize(namespace)
        return None

    async def _delete(self, gvk: GroupVersionKind, namespace: str, meta: Obj) -> None:
        with contextlib.suppress(errors.NotFound):
            await self.client.delete(
                gvk, str(meta.get("name")), namespace=namespace, propagation_policy="Background"
            )

    async def _report(self, namespace: Obj, failures: dict[str, tuple[str, str]]) -> Obj:
        """Write the five conditions (those in ``failures`` True, the rest False) if they changed."""
        status = namespace.get("status") or {}
        current = {c.get("type"): c for c in status.get("conditions") or () if isinstance(c, dict)}
        conditions: list[dict[str, Any]] = [
            c
            for c in status.get("conditions") or ()
            if isinstance(c, dict) and c.get("type") not in CONDITIONS
        ]
        changed = False
        for kind, (ok_reason, ok_message) in CONDITIONS.items():
            state, (reason, message) = (
                ("True", failures[kind]) if kind in failures else ("False", (ok_reason, ok_message))
            )
            old = current.get(kind)
            if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (
                state,
                reason,
                message,
            ):
                conditions.append(old)
                continue
            changed = True
            since = (
                old.get("lastTransitionTime")
                if old is not None and old.get("status") == state
                else timestamps.now()
            )
            conditions.append(
                {
                    "type": kind,
                    "status": state,
                    "lastTransitionTime": since,
                    "reason": reason,
                    "message": message,
                }
            )
        if not changed:
            return namespace
        name = str((namespace.get("metadata") or {}).get("name"))
        try:
            return await self.client.patch(
                NAMESPACE, name, {"status": {"conditions": conditions}}, subresource="status"
            )
        except errors.NotFound:
            return namespace

    async def _finalize(self, namespace: Obj) -> None:
        name = str((namespace.get("metadata") or {}).get("name"))
        body = dict(namespace)
        spec = dict(body.get("spec") or {})
        spec["finalizers"] = [f for f in spec.get("finalizers") or () if f != FINALIZER]
        body["spec"] = spec
        try:
            await self.client.update(body, subresource="finalize")
        except errors.NotFound:
            return
        log.info("namespace %s: emptied and finalized", name)
