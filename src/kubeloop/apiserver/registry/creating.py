"""What a create means (upstream's ``rest.BeforeCreate`` and the store's ``Create``): the body
decoded and defaulted, system metadata cleared and set (uid, creationTimestamp, generation, a
generated name), admission, validation, and an object written only where none is.
"""

from __future__ import annotations

from typing import Any

from kubeloop import errors
from kubeloop.api import naming, timestamps
from kubeloop.api.object import Obj
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.patch import fieldmanager
from kubeloop.apiserver.registry.admissionhooks import (
    CREATE,
)
from kubeloop.apiserver.registry.admitting import AdmissionPoints
from kubeloop.apiserver.registry.claimretry import ClaimRetry
from kubeloop.apiserver.registry.registrybase import (
    set_created_managed,
    set_managed,
)
from kubeloop.apiserver.registry.verboptions import (
    WriteOptions,
    WriteResult,
)
from kubeloop.apiserver.storage.claims import ClaimTaken
from kubeloop.apiserver.storage.objectstore import PreconditionFailed
from kubeloop.uuids import random_uuid


class Creating(AdmissionPoints):
    """Create."""

    async def create(
        self,
        resource: ResourceType,
        namespace: str | None,
        body: Any,
        options: WriteOptions,
        *,
        managed: list[fieldmanager.ManagedEntry] | None = None,
        patch: bool = False,
        owned: bool = False,
    ) -> WriteResult:
        """Create an object. ``managed``: its managedFields as an apply recorded them;
        ``patch``: the create is an apply's (admission is told of PatchOptions); ``owned``:
        ``body`` was made for this call alone (a request's decoded body), and may become the
        object rather than be copied (a strict decoding error quotes the body as sent: never
        owned then)."""
        sent_metadata = body.get("metadata") if isinstance(body, dict) else None
        named = isinstance(sent_metadata, dict) and bool(sent_metadata.get("name"))
        obj, warnings = self._decode(
            resource, body, options, owned=owned and options.field_validation != "Strict"
        )
        obj = await self.stored(resource, obj)
        metadata: Obj = obj["metadata"]
        if metadata.get("resourceVersion"):
            raise errors.BadRequest("resourceVersion should not be set on objects to be created")
        self._check_namespace(resource, namespace, obj, creating=True)
        for key in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            metadata.pop(key, None)
        strategy = self.strategy(resource)
        if self._admits(resource, options.user):
            # Mutating admission sees the decoded, defaulted object, before the strategy
            # prepares it, its name is generated and its uid set (upstream's order).
            strategy.default(obj)
            obj, admitted = await self._mutated(
                resource, CREATE, obj, None, options, subresource="", patch=patch
            )
            warnings = warnings + admitted
            metadata = obj["metadata"]
            self._check_namespace(resource, namespace, obj, creating=True)
        generate_name = metadata.get("generateName")
        if not metadata.get("name") and not generate_name:
            raise errors.invalid(
                resource.group,
                resource.kind,
                "",
                [
                    errors.StatusCause(
                        "FieldValueRequired",
                        "Required value: name or generateName is required",
                        "metadata.name",
                    )
                ],
            )
        metadata["uid"] = random_uuid()
        metadata["creationTimestamp"] = timestamps.now()
        if resource.tracks_generation:
            metadata["generation"] = 1
        strategy.prepare_for_create(obj)
        strategy.default(obj)
        # Defaulting changes only the object's top level in place: a default in the metadata (a
        # CRD's schema may declare name and generateName; a null one is dropped) makes it a copy.
        metadata = obj["metadata"]
        if managed is None:
            set_created_managed(strategy, metadata, await self._served_writing(resource, obj), options)
        else:
            set_managed(metadata, managed)
        attempts = 0
        while True:
            if (generate_name and not metadata.get("name")) or attempts:
                metadata["name"] = (generate_name or "") + naming.generate_name_suffix()
            served = await self._served_writing(resource, obj)
            self._validate(resource, served)
            if options.admit is not None:
                options.admit(served, None)
            key = resource.key(metadata.get("namespace"), metadata["name"])
            if self.store.get(key) is not None:
                if generate_name and attempts < 8 and not named:
                    attempts += 1
                    continue
                raise errors.already_exists(resource.group, resource.plural, metadata["name"])
            break
        if self._admits(resource, options.user):
            warnings = warnings + await self._validated(
                resource, CREATE, served, None, options, subresource="", patch=patch
            )
        retry = ClaimRetry(strategy, obj)
        strategy.finish(obj, None)
        if options.dry_run:
            return WriteResult(await self.served(resource, obj), warnings, created=True)
        while True:
            try:
                event = await self.store.write(key, obj, expected_revision=0)
                break
            except PreconditionFailed:
                raise errors.already_exists(resource.group, resource.plural, metadata["name"]) from None
            except ClaimTaken as taken:
                obj = retry.again(obj, taken)
                strategy.finish(obj, None)
        return await self.written(resource, event, warnings, created=True)
