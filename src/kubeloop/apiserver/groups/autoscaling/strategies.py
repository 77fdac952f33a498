"""autoscaling/v1 HorizontalPodAutoscalers: a view of the v2 objects' storage."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeloop.api.object import Obj
from kubeloop.apiserver import decoding
from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.groups.autoscaling import hpaconversion
from kubeloop.apiserver.registry.strategies import BuiltinStrategy, KindRules, required_zeros
from kubeloop.errors import StatusCause


class HorizontalPodAutoscalerV1Strategy(BuiltinStrategy):
    """autoscaling/v1 HorizontalPodAutoscalers: the v2 objects' storage, converted on the way in
    and out; the rules (upstream's, which see the internal form) run on the v2 form."""

    def __init__(self, resource: ResourceType, kind: KindRules) -> None:
        super().__init__(resource, kind)
        self._stored_schema = schemas.kind_schema(resource.group, resource.stored_version, resource.kind)
        # finish() completes the stored form: v2's required status fields.
        self._status_zeros = required_zeros(self._stored_schema, "status")

    def to_served(self, stored: Obj, *, defaulted: bool = False) -> Obj:
        return hpaconversion.v2_to_v1(stored)

    def to_stored(self, served: Obj) -> Obj:
        """The v2 object, decoded as Go decodes v2: what the round-trip annotations carried is
        typed like any body (a string for a number is a 400 naming the field), as upstream's
        conversion unmarshals them into typed structs."""
        converted = hpaconversion.v1_to_v2(served)
        if self._stored_schema is None:
            return converted
        decoded, _warnings = decoding.decode_against_schema(
            converted,
            self._stored_schema,
            kind=self.resource.kind,
            version=self.resource.stored_version,
            mode="Ignore",
        )
        return decoded

    def kind_rules(self, obj: Mapping[str, Any]) -> list[StatusCause]:
        return super().kind_rules(hpaconversion.v1_to_v2(obj))
