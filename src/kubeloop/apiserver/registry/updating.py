"""What an update, a patch and an apply mean (upstream's ``rest.BeforeUpdate`` and the store's
``Update``): the new object from the old one and the request, optimistic concurrency on
resourceVersion, the status subresource's rules, managedFields, admission and validation, and a
write that changes nothing left unwritten.
"""

from __future__ import annotations

import copy
from typing import Any

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver import decoding
from kubeloop.apiserver.catalog.mediatypes import APPLY_PATCH, JSON_PATCH, STRATEGIC_MERGE_PATCH
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.patch import fieldmanager, serversideapply
from kubeloop.apiserver.registry import listing, patching
from kubeloop.apiserver.registry.admissionhooks import (
    UPDATE,
)
from kubeloop.apiserver.registry.claimretry import ClaimRetry
from kubeloop.apiserver.registry.creating import Creating
from kubeloop.apiserver.registry.registrybase import (
    StaleRead,
    set_managed,
    set_recorded_update,
)
from kubeloop.apiserver.registry.strategies import Strategy
from kubeloop.apiserver.registry.verboptions import (
    WriteOptions,
    WriteResult,
    check_patch_options,
)
from kubeloop.apiserver.storage.claims import ClaimTaken
from kubeloop.apiserver.storage.objectstore import PreconditionFailed


class Updating(Creating):
    """Update, patch (JSON, merge, strategic merge) and server-side apply (which creates what
    is not there yet)."""

    async def update(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        options: WriteOptions,
        *,
        subresource: str = "",
    ) -> WriteResult:
        return await self._guaranteed(
            resource,
            namespace,
            name,
            lambda: self._update_once(resource, namespace, name, body, options, subresource),
        )

    async def _update_once(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        options: WriteOptions,
        subresource: str,
    ) -> WriteResult:
        obj, warnings = self._decode(resource, body, options, subresource=subresource)
        obj = await self.stored(resource, obj)
        body_name = obj["metadata"].get("name")
        if body_name and body_name != name:
            raise errors.BadRequest(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        obj["metadata"]["name"] = name
        self._check_namespace(resource, namespace, obj, creating=False)
        key = resource.key(namespace, name)
        current = self.store.get(key)
        if current is None:
            raise errors.not_found(resource.group, resource.plural, name)
        rv = obj["metadata"].get("resourceVersion")
        if rv and listing.parse_resource_version(rv) != current.revision:
            raise errors.conflict(resource.group, resource.plural, name)
        if not rv and not self.strategy(resource).allow_unconditional_update:
            cause = errors.StatusCause(
                "FieldValueInvalid",
                "Invalid value: 0x0: must be specified for an update",
                "metadata.resourceVersion",
            )
            raise errors.invalid(resource.group, resource.kind, name, [cause])
        return await self._finish_update(
            resource, key, current.obj, current.revision, obj, options, warnings, subresource
        )

    async def patch(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        patch_type: str,
        patch: bytes,
        options: WriteOptions,
        *,
        subresource: str = "",
    ) -> WriteResult:
        check_patch_options(patch_type, options)
        accepted = self.strategy(resource).patch_types
        if patch_type not in accepted:
            raise patching.unsupported_patch_type(accepted)
        return await self._guaranteed(
            resource,
            namespace,
            name,
            lambda: self._patch_once(resource, namespace, name, patch_type, patch, options, subresource),
        )

    async def _patch_once(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        patch_type: str,
        patch: bytes,
        options: WriteOptions,
        subresource: str,
    ) -> WriteResult:
        if patch_type == APPLY_PATCH:
            return await self._apply(resource, namespace, name, patch, options, subresource)
        key = resource.key(namespace, name)
        current = self.store.get(key)
        if current is None:
            raise errors.not_found(resource.group, resource.plural, name)
        served = await self.served(resource, current.obj)
        patched = patching.apply_patch(served, patch_type, patch, self.strategy(resource).schema)
        if not isinstance(patched, dict):
            raise errors.BadRequest("the patched object is not a JSON object")
        # A merge patch's result (strategic or not) is made of the stored object's parts and the
        # patch's, each within the depth limit, at the paths they had: it nests no deeper.
        shallow = patch_type != JSON_PATCH
        try:
            obj, warnings = self._decode(
                resource,
                patched,
                options,
                subresource=subresource,
                # A strict error shows the patched object as it was, before pruning.
                owned=options.field_validation != "Strict",
                shallow=shallow,
                converter=patch_type == STRATEGIC_MERGE_PATCH,
            )
        except decoding.DecodingError as failed:
            raise patching.undecodable(patch_type, patch, patched, failed.detail) from None
        obj = await self.stored(resource, obj)
        metadata = obj["metadata"]
        if metadata.get("name") != name:
            raise errors.BadRequest(
                f'metadata.name: Invalid value: "{metadata.get("name")}": field is immutable'
            )
        if resource.namespaced and metadata.get("namespace") != namespace:
            raise errors.BadRequest(
                f'metadata.namespace: Invalid value: "{metadata.get("namespace")}": field is immutable'
            )
        rv = metadata.get("resourceVersion")
        if rv and listing.parse_resource_version(rv) != current.revision:
            raise errors.conflict(resource.group, resource.plural, name)
        return await self._finish_update(
            resource, key, current.obj, current.revision, obj, options, warnings, subresource, patch=True
        )

    async def _apply(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        patch: bytes,
        options: WriteOptions,
        subresource: str,
    ) -> WriteResult:
        """Server-side apply: merge the applied configuration, track ownership, create if absent."""
        document = decoding.decode_yaml(patch, "the apply patch")
        applied, warnings = self._decode(resource, document, options, subresource=subresource)
        metadata: Obj = applied["metadata"]
        if metadata.get("name") not in (None, "", name):
            raise errors.BadRequest(
                f"the name of the object ({metadata.get('name')}) does not match the name on the URL ({name})"
            )
        metadata["name"] = name
        if resource.namespaced and metadata.get("namespace") not in (None, "", namespace):
            raise errors.BadRequest(
                f"the namespace of the object ({metadata.get('namespace')}) does not match the namespace on "
                f"the URL ({namespace})"
            )
        if "managedFields" in metadata:
            raise errors.BadRequest("metadata.managedFields must be nil in an apply configuration")
        schema = self.strategy(resource).schema
        key = resource.key(namespace, name)
        current = self.store.get(key)
        live = await self.served(resource, current.obj) if current is not None else None
        if live is None and subresource:
            raise errors.not_found(resource.group, resource.plural, name)
        entries = fieldmanager.starting_entries(live, {})
        result = serversideapply.apply(
            live,
            applied,
            entries,
            schema,
            manager=options.field_manager,
            api_version=resource.api_version,
            subresource=subresource,
            has_status=resource.has_status,
            force=bool(options.force),
            group=resource.group,
            kind=resource.plural,
            name=name,
        )
        if current is None:
            result.obj.setdefault("metadata", {})["namespace"] = namespace
            try:
                created = await self.create(
                    resource, namespace, result.obj, options, managed=result.entries, patch=True
                )
            except errors.AlreadyExists:
                raise StaleRead from None  # created meanwhile: apply to it
            return WriteResult(created.obj, warnings + created.warnings, created=True, encoded=created.encoded)
        merged = await self.stored(resource, result.obj)
        merged["metadata"]["resourceVersion"] = str(current.revision)
        return await self._finish_update(
            resource,
            key,
            current.obj,
            current.revision,
            merged,
            options,
            warnings,
            subresource,
            managed=result.entries,
            patch=True,
        )

    def _prepared_update(
        self, resource: ResourceType, strategy: Strategy, new: Obj, old: Obj, subresource: str
    ) -> Obj:
        """``new`` as an update through ``subresource`` may leave it: what the strategy keeps,
        the metadata no update may change taken from ``old``, defaulted."""
        old_meta: Obj = old.get("metadata") or {}
        new = strategy.prepare_for_update(new, old, subresource)
        meta: Obj = new["metadata"]
        for immutable in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if immutable in old_meta:
                meta[immutable] = old_meta[immutable]
            else:
                meta.pop(immutable, None)
        meta["namespace"] = old_meta.get("namespace") if resource.namespaced else meta.pop("namespace", None)
        if not resource.namespaced:
            meta.pop("namespace", None)
        meta.pop("resourceVersion", None)
        # Every write is defaulted, a subresource's too: upstream decodes the patched or sent
        # object with the kind's defaults (a status field's default included) whatever the path.
        strategy.default(new)
        return new

    async def _finish_update(
        self,
        resource: ResourceType,
        key: str,
        old: Obj,
        old_revision: int,
        new: Obj,
        options: WriteOptions,
        warnings: list[str],
        subresource: str,
        *,
        managed: list[fieldmanager.ManagedEntry] | None = None,
        patch: bool = False,
    ) -> WriteResult:
        old_meta: Obj = old.get("metadata") or {}
        sent_managed = (new.get("metadata") or {}).get("managedFields")
        strategy = self.strategy(resource)
        new = self._prepared_update(resource, strategy, new, old, subresource)
        if self._admits(resource, options.user):
            new, admitted = await self._mutated(
                resource, UPDATE, new, old, options, subresource=subresource, patch=patch
            )
            warnings = warnings + admitted
            # What admission changed is held to the same rules as the request (status through
            # /status only, the fields no update may change).
            new = self._prepared_update(resource, strategy, new, old, subresource)
        meta: Obj = new["metadata"]
        if resource.tracks_generation and subresource == "" and strategy.generation_changed(old, new):
            meta["generation"] = int(old_meta.get("generation", 0)) + 1
        served_old = await self.served(resource, old)
        if managed is None:
            meta["managedFields"] = sent_managed
            # Field sets are of the version the manager wrote (autoscaling/v1 fields for a v1 client).
            set_recorded_update(
                meta, strategy, served_old, await self._served_writing(resource, new), options, subresource
            )
        else:
            set_managed(meta, managed)
        if old_meta.get("deletionTimestamp"):
            old_finalizers = set(old_meta.get("finalizers") or ())
            added = [f for f in meta.get("finalizers") or () if f not in old_finalizers]
            if added:
                raise errors.invalid(
                    resource.group,
                    resource.kind,
                    meta.get("name", ""),
                    [
                        errors.StatusCause(
                            "FieldValueForbidden",
                            "Forbidden: no new finalizers can be added if the object is being deleted",
                            "metadata.finalizers",
                        )
                    ],
                )
        served_new = await self._served_writing(resource, new)  # again: managedFields and more were set since
        warnings = warnings + self._validate(resource, served_new, served_old, subresource)
        if options.admit is not None:
            options.admit(served_new, served_old)
        if self._admits(resource, options.user):
            warnings = warnings + await self._validated(
                resource, UPDATE, served_new, served_old, options, subresource=subresource, patch=patch
            )
        retry = ClaimRetry(strategy, new)
        _finish(strategy, new, old)
        if _same_object(old, new):
            # A no-op update does not write (and keeps the resourceVersion), like upstream.
            return WriteResult(await self.served(resource, old), warnings)
        deleting = (
            bool(old_meta.get("deletionTimestamp"))
            and not meta.get("finalizers")
            and not strategy.holds_deletion(new)
            and not meta.get("deletionGracePeriodSeconds")  # a grace period runs: its node removes it
        )
        if options.dry_run:
            out = copy.deepcopy(new)
            out["metadata"]["resourceVersion"] = str(old_revision)
            return WriteResult(await self.served(resource, out), warnings)
        while True:
            try:
                if deleting:
                    event = await self.store.write(key, None, expected_revision=old_revision)
                    return WriteResult(await self.served(resource, _merge_final(event.obj, new)), warnings)
                event = await self.store.write(key, new, expected_revision=old_revision)
                break
            except PreconditionFailed:
                raise StaleRead from None
            except ClaimTaken as taken:
                new = retry.again(new, taken)
                _finish(strategy, new, old)
        return await self.written(resource, event, warnings)


def _finish(strategy: Strategy, new: Obj, old: Obj) -> None:
    strategy.finish(new, old)
    meta = new["metadata"]
    if not meta.get("finalizers"):
        meta.pop("finalizers", None)


def _same_object(old: Obj, new: Obj) -> bool:
    old_cmp = dict(old)
    old_meta = dict(old_cmp.get("metadata") or {})
    old_meta.pop("resourceVersion", None)
    old_cmp["metadata"] = old_meta
    return old_cmp == new


def _merge_final(final: Obj, new: Obj) -> Obj:
    out = copy.deepcopy(new)
    out["metadata"]["resourceVersion"] = (final.get("metadata") or {}).get("resourceVersion")
    return out
