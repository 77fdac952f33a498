"""The scale subresource: an ``autoscaling/v1`` Scale read from and written into the replicas of a
kind that has one, admitted as ``<resource>/scale`` with the Scale, as upstream's.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.registry import patching
from kubeloop.apiserver.registry.admissionhooks import (
    UPDATE,
)
from kubeloop.apiserver.registry.registrybase import (
    StaleRead,
)
from kubeloop.apiserver.registry.updating import Updating
from kubeloop.apiserver.registry.verboptions import (
    WriteOptions,
    WriteResult,
)

_SCALE_KIND = ("autoscaling", "v1", "Scale")


class Scaling(Updating):
    """The scale subresource."""

    def get_scale(self, resource: ResourceType, namespace: str | None, name: str) -> Obj:
        """The autoscaling/v1 Scale view of a Deployment, ReplicaSet or StatefulSet."""
        return self.strategy(resource).scale_of(self.get(resource, namespace, name))

    async def update_scale(
        self, resource: ResourceType, namespace: str | None, name: str, body: Any, options: WriteOptions
    ) -> WriteResult:
        async def attempt() -> WriteResult:
            current = await self.read(lambda: self.get(resource, namespace, name))
            return await self._write_scale(resource, namespace, name, current, body, options)

        return await self._guaranteed(resource, namespace, name, attempt)

    async def patch_scale(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        patch_type: str,
        patch: bytes,
        options: WriteOptions,
    ) -> WriteResult:
        async def attempt() -> WriteResult:
            current = await self.read(lambda: self.get(resource, namespace, name))
            scale = self.strategy(resource).scale_of(current)
            patched = patching.apply_patch(
                scale, patch_type, patch, schemas.kind_schema("autoscaling", "v1", "Scale")
            )
            return await self._write_scale(resource, namespace, name, current, patched, options)

        return await self._guaranteed(resource, namespace, name, attempt)

    async def _write_scale(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        current: Obj,
        body: Any,
        options: WriteOptions,
    ) -> WriteResult:
        """Write a Scale: admission sees ``<resource>/scale`` with the Scale (upstream's), and the
        workload is then updated without being admitted again."""
        if not isinstance(body, dict):
            raise errors.BadRequest("the body of the request must be an autoscaling/v1 Scale object")
        spec = body.get("spec") or {}
        replicas = spec.get("replicas", 0) if isinstance(spec, dict) else None
        if not isinstance(replicas, int) or isinstance(replicas, bool):
            raise errors.BadRequest("spec.replicas: Invalid value: must be an integer")
        if replicas < 0:
            raise errors.invalid(
                "autoscaling",
                "Scale",
                name,
                [
                    errors.StatusCause(
                        "FieldValueInvalid",
                        f"Invalid value: {replicas}: must be greater than or equal to 0",
                        "spec.replicas",
                    )
                ],
            )
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if rv and rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(resource.group, resource.plural, name)
        strategy = self.strategy(resource)
        warnings: list[str] = []
        if self.admission is not None and self._admits(resource, options.user):
            old_scale = strategy.scale_of(current)
            new_scale = copy.deepcopy(old_scale)
            new_scale["spec"] = {"replicas": replicas}
            admitted, warnings = await self._admitted_as(
                resource, namespace, name, "scale", UPDATE, new_scale, old_scale, _SCALE_KIND, options
            )
            if admitted is not new_scale:
                replicas = _scale_replicas(admitted, name)
            options = replace(options, user=None)  # the workload's write is not admitted again
            latest = self.store.get(resource.key(namespace, name))
            if latest is None or str(latest.revision) != current["metadata"]["resourceVersion"]:
                raise StaleRead  # written meanwhile: scale the new object (GuaranteedUpdate)
        updated = strategy.with_replicas(current, replicas)
        updated["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        result = await self._update_once(resource, namespace, name, updated, options, "")
        return WriteResult(strategy.scale_of(result.obj), warnings + result.warnings)


def _scale_replicas(scale: Obj, name: str) -> int:
    """The replicas of a Scale a mutating webhook answered with (a 500 when it broke them)."""
    spec = scale.get("spec")
    replicas = spec.get("replicas", 0) if isinstance(spec, dict) else None
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.internal_error(
            f"admission changed the Scale of {name} to invalid replicas: {replicas!r}"
        )
    return replicas
