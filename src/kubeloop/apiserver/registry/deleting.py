"""What a delete means (upstream's ``rest.BeforeDelete`` and the store's ``Delete``):
preconditions, graceful deletion, finalizers and propagation policies, and a delete collection.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

from kubeloop import errors
from kubeloop.api import timestamps
from kubeloop.api.object import Obj
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.registry.admissionhooks import (
    DELETE,
    AdmissionAttributes,
)
from kubeloop.apiserver.registry.admitting import AdmissionPoints
from kubeloop.apiserver.registry.registrybase import (
    StaleRead,
)
from kubeloop.apiserver.registry.verboptions import (
    DeleteOptions,
    DeleteResult,
    ListOptions,
    propagation_policy,
)
from kubeloop.apiserver.storage.objectstore import PreconditionFailed


class Deleting(AdmissionPoints):
    """Delete and delete collection."""

    async def delete(
        self, resource: ResourceType, namespace: str | None, name: str, options: DeleteOptions
    ) -> DeleteResult:
        """Delete or mark for deletion: the object, whether it is gone now, admission's warnings."""
        propagation_policy(resource, options)  # invalid options are refused before any lookup
        return await self._guaranteed(
            resource, namespace, name, lambda: self._delete_once(resource, namespace, name, options)
        )

    async def _delete_once(
        self, resource: ResourceType, namespace: str | None, name: str, options: DeleteOptions
    ) -> DeleteResult:
        key = resource.key(namespace, name)
        current = self.store.get(key)
        if current is None:
            raise errors.not_found(resource.group, resource.plural, name)
        obj = current.obj
        meta: Obj = obj.get("metadata") or {}
        if options.precondition_uid is not None and options.precondition_uid != meta.get("uid"):
            raise errors.Conflict(
                f'Operation cannot be fulfilled on {errors.resource_label(resource.group, resource.plural)} "{name}": '
                f"Precondition failed: UID in precondition: {options.precondition_uid}, UID in object meta: {meta.get('uid')}",
                name=name,
                group=resource.group,
                kind=resource.plural,
            )
        if (
            options.precondition_resource_version is not None
            and options.precondition_resource_version != meta.get("resourceVersion")
        ):
            raise errors.Conflict(
                f'Operation cannot be fulfilled on {errors.resource_label(resource.group, resource.plural)} "{name}": '
                f"Precondition failed: ResourceVersion in precondition: {options.precondition_resource_version}, "
                f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
                name=name,
                group=resource.group,
                kind=resource.plural,
            )
        strategy = self.strategy(resource)
        strategy.check_delete(name)
        policy = propagation_policy(resource, options)
        if self.admission is not None and self._admits(resource, options.user):
            served = await self.served(resource, obj)
            attributes = AdmissionAttributes(
                resource=resource,
                subresource="",
                operation=DELETE,
                name=name,
                namespace=(namespace or "") if resource.namespaced else "",
                user=options.user,
                dry_run=options.dry_run,
                options=options.admission_options(),
            )
            _, warnings = await self.admission.mutate(attributes, None, served)
            warnings = warnings + await self.admission.validate(attributes, None, served)
        else:
            warnings = []
        finalizers = list(meta.get("finalizers") or ())
        if policy == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
            finalizers = [f for f in finalizers if f != "foregroundDeletion"]
        elif policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
            finalizers = [f for f in finalizers if f != "orphan"]
        elif policy == "Background":
            finalizers = (
                [f for f in finalizers if f not in ("orphan", "foregroundDeletion")]
                if meta.get("deletionTimestamp")
                else finalizers
            )
        grace = strategy.deletion_grace_seconds(obj, options.grace_period_seconds)
        marked = _graceful_marks(meta, grace, options.grace_period_seconds)
        if marked is None and grace is not None and meta.get("deletionGracePeriodSeconds"):
            # Its grace period runs already and is not shortened: finalizers stay as they are.
            return DeleteResult(await self.served(resource, obj), False, warnings)
        graceful = bool(finalizers) or strategy.holds_deletion(obj) or bool(marked and marked[1])
        if not graceful:
            if options.dry_run:
                return DeleteResult(await self.served(resource, obj), True, warnings)
            try:
                event = await self.store.write(key, None, expected_revision=current.revision)
            except PreconditionFailed:
                raise StaleRead from None
            return DeleteResult(await self.served(resource, event.obj), True, warnings)
        new = copy.deepcopy(obj)
        new_meta: Obj = new["metadata"]
        new_meta.pop("resourceVersion", None)
        changed = False
        if marked is not None:
            first = not new_meta.get("deletionTimestamp")
            new_meta["deletionTimestamp"], new_meta["deletionGracePeriodSeconds"] = marked
            if first:
                if resource.tracks_generation:
                    new_meta["generation"] = int(new_meta.get("generation", 0)) + 1
                strategy.begin_deletion(new)
            changed = True
        elif not new_meta.get("deletionTimestamp"):
            new_meta["deletionTimestamp"] = timestamps.now()
            new_meta["deletionGracePeriodSeconds"] = 0
            if resource.tracks_generation:
                new_meta["generation"] = int(new_meta.get("generation", 0)) + 1
            strategy.begin_deletion(new)
            changed = True
        if finalizers != list(meta.get("finalizers") or ()):
            new_meta["finalizers"] = finalizers
            changed = True
        if not changed or options.dry_run:
            return DeleteResult(await self.served(resource, obj if not changed else new), False, warnings)
        try:
            event = await self.store.write(key, new, expected_revision=current.revision)
        except PreconditionFailed:
            raise StaleRead from None
        return DeleteResult(await self.served(resource, event.obj), False, warnings)

    async def delete_collection(
        self, resource: ResourceType, namespace: str | None, list_options: ListOptions, options: DeleteOptions
    ) -> list[Obj]:
        listed = await self.read(
            lambda: self.list_objects(
                resource,
                namespace,
                ListOptions(
                    label_selector=list_options.label_selector, field_selector=list_options.field_selector
                ),
            )
        )
        deleted: list[Obj] = []
        for item in listed.items:
            meta = item.get("metadata") or {}
            try:
                result = await self.delete(resource, meta.get("namespace"), meta.get("name", ""), options)
            except errors.NotFound:
                continue
            deleted.append(result.obj)
        return deleted


def _graceful_marks(meta: Obj, grace: int | None, requested: int | None) -> tuple[str, int] | None:
    """The deletionTimestamp and deletionGracePeriodSeconds a graceful delete writes (None: it
    writes none), as upstream's ``rest.BeforeDelete``: a first delete marks the object ``grace``
    seconds ahead; a later one may only shorten the period, counted from the first."""
    if grace is None:
        return None
    running = meta.get("deletionGracePeriodSeconds")
    if not meta.get("deletionTimestamp"):
        moment = datetime.now(UTC) + timedelta(seconds=grace)
        return timestamps.format_time(moment), grace
    if not running or requested is None or requested >= int(running):
        return None
    marked_at = timestamps.parse_time(meta["deletionTimestamp"]) or datetime.now(UTC)
    moment = marked_at - timedelta(seconds=int(running)) + timedelta(seconds=max(requested, 0))
    return timestamps.format_time(moment), max(requested, 0)
