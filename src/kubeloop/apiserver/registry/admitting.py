"""Where the registry calls admission: the attributes of a write, mutating admission before the
strategy's checks, validating admission just before the write (``registry.admissionhooks`` says
when), and admission of subresource writes whose objects are of another kind (a Scale, an
Eviction's options).
"""

from __future__ import annotations

from dataclasses import replace

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.registry.admissionhooks import (
    CREATE,
    AdmissionAttributes,
)
from kubeloop.apiserver.registry.registrybase import (
    RegistryBase,
)
from kubeloop.apiserver.registry.verboptions import (
    WriteOptions,
)
from kubeloop.apiserver.userinfo import UserInfo


class AdmissionPoints(RegistryBase):
    """The admission steps of every write (none for what the server writes for itself)."""

    def _admits(self, resource: ResourceType, user: UserInfo | None) -> bool:
        """Whether a write of ``resource`` by ``user`` goes through admission: requests a client
        made do, when anything is configured for the resource."""
        return self.admission is not None and user is not None and self.admission.covers(resource)

    def _attributes(
        self,
        resource: ResourceType,
        operation: str,
        obj: Obj,
        options: WriteOptions,
        *,
        subresource: str,
        patch: bool,
    ) -> AdmissionAttributes:
        metadata = obj.get("metadata") or {}
        return AdmissionAttributes(
            resource=resource,
            subresource=subresource,
            operation=operation,
            name=str(metadata.get("name") or ""),
            namespace=str(metadata.get("namespace") or "") if resource.namespaced else "",
            user=options.user,
            dry_run=options.dry_run,
            options=options.admission_options(operation, patch=patch),
        )

    async def _mutated(
        self,
        resource: ResourceType,
        operation: str,
        obj: Obj,
        old: Obj | None,
        options: WriteOptions,
        *,
        subresource: str,
        patch: bool,
    ) -> tuple[Obj, list[str]]:
        """``obj`` (stored form) as mutating admission leaves it, and the warnings it gave.

        A changed object is decoded again as the kind's type (what a webhook added that the
        type does not have is dropped, a value of the wrong type is an internal error, as
        upstream's decoding of a webhook's patch) and defaulted again; its managedFields stay as
        recorded before admission."""
        assert self.admission is not None
        served = await self._served_writing(resource, obj)
        served_old = await self.served(resource, old) if old is not None else None
        attributes = self._attributes(resource, operation, obj, options, subresource=subresource, patch=patch)
        mutated, warnings = await self.admission.mutate(attributes, served, served_old)
        if mutated is None or mutated is served:
            return obj, warnings
        managed = (obj.get("metadata") or {}).get("managedFields")
        lenient = replace(options, field_validation="Ignore", duplicate_fields=())
        try:
            decoded, _ = self._decode(resource, mutated, lenient, subresource=subresource, owned=True)
        except errors.BadRequest as error:
            raise errors.internal_error(error.message) from None
        changed = await self.stored(resource, decoded)
        if managed is None:
            changed["metadata"].pop("managedFields", None)
        else:
            changed["metadata"]["managedFields"] = managed
        self.strategy(resource).default(changed)
        return changed, warnings

    async def _validated(
        self,
        resource: ResourceType,
        operation: str,
        served: Obj,
        served_old: Obj | None,
        options: WriteOptions,
        *,
        subresource: str,
        patch: bool,
    ) -> list[str]:
        """Validating admission of the object about to be written: the warnings it gave."""
        assert self.admission is not None
        attributes = self._attributes(
            resource, operation, served, options, subresource=subresource, patch=patch
        )
        return await self.admission.validate(attributes, served, served_old)

    async def admit_subresource(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        subresource: str,
        obj: Obj,
        object_kind: tuple[str, str, str],
        options: WriteOptions,
    ) -> tuple[Obj, list[str]]:
        """Admission of a CREATE through a subresource that takes an object of another kind (a
        pod's ``binding`` a Binding, its ``eviction`` an Eviction), as upstream admits them:
        the object as mutating admission leaves it, and the warnings."""
        return await self._admitted_as(
            resource, namespace, name, subresource, CREATE, obj, None, object_kind, options
        )

    async def _admitted_as(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        subresource: str,
        operation: str,
        obj: Obj,
        old: Obj | None,
        object_kind: tuple[str, str, str],
        options: WriteOptions,
    ) -> tuple[Obj, list[str]]:
        """Both admission phases of a subresource write whose objects are of ``object_kind``:
        the object as mutating admission leaves it, and the warnings."""
        if self.admission is None or not self._admits(resource, options.user):
            return obj, []
        attributes = AdmissionAttributes(
            resource=resource,
            subresource=subresource,
            operation=operation,
            name=name,
            namespace=(namespace or "") if resource.namespaced else "",
            user=options.user,
            dry_run=options.dry_run,
            options=options.admission_options(operation, patch=False),
            object_kind=object_kind,
        )
        mutated, warnings = await self.admission.mutate(attributes, obj, old)
        admitted = mutated if isinstance(mutated, dict) else obj
        warnings = warnings + await self.admission.validate(attributes, admitted, old)
        return admitted, warnings
