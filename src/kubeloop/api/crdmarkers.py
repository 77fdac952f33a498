"""What a custom resource model declares beyond its fields: controller-gen's markers, as values.

Field-level markers go in ``Annotated`` beside the type and end up in the field's schema::

    replicas: Annotated[int, Field(ge=0), Rule("self <= 10", message="at most 10 replicas")] = 1
    config: Annotated[dict[str, Any], PreserveUnknownFields()] = {}
    ports: Annotated[list[Port], ListType("map", keys=("name",))] = []

Kind-level ones (printer columns, the scale subresource, selectable fields, rules on the whole
object) are keywords of the ``CustomResource`` class statement, kept as its ``CRDOptions``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from kubeloop.api.gvk import GroupVersionKind


class SchemaMarker:
    """A marker that adds keys to its field's schema (``extend``); pydantic calls the hook."""

    def extend(self, schema: dict[str, Any]) -> None:
        raise NotImplementedError

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = dict(handler(core_schema))
        self.extend(schema)
        return schema


@dataclass(frozen=True)
class Rule(SchemaMarker):
    """A CEL validation rule (``x-kubernetes-validations``): ``self`` is the field's value,
    ``oldSelf`` its previous value (a transition rule, checked on updates only)."""

    rule: str
    message: str | None = None
    message_expression: str | None = None
    #: FieldValueInvalid (the default), FieldValueForbidden, FieldValueRequired or FieldValueDuplicate.
    reason: str | None = None
    #: Where the error points, relative to the field (e.g. ".spec.max").
    field_path: str | None = None
    #: Check the transition rule on creates too, with oldSelf an optional that has no value.
    optional_old_self: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"rule": self.rule}
        if self.message is not None:
            entry["message"] = self.message
        if self.message_expression is not None:
            entry["messageExpression"] = self.message_expression
        if self.reason is not None:
            entry["reason"] = self.reason
        if self.field_path is not None:
            entry["fieldPath"] = self.field_path
        if self.optional_old_self is not None:
            entry["optionalOldSelf"] = self.optional_old_self
        return entry

    def extend(self, schema: dict[str, Any]) -> None:
        schema["x-kubernetes-validations"] = [*schema.get("x-kubernetes-validations", ()), self.to_dict()]


@dataclass(frozen=True)
class PreserveUnknownFields(SchemaMarker):
    """Keep fields the schema does not name (``x-kubernetes-preserve-unknown-fields``)."""

    def extend(self, schema: dict[str, Any]) -> None:
        schema["x-kubernetes-preserve-unknown-fields"] = True


@dataclass(frozen=True)
class EmbeddedResource(SchemaMarker):
    """The field holds a whole object with apiVersion, kind and metadata (``x-kubernetes-embedded-resource``)."""

    def extend(self, schema: dict[str, Any]) -> None:
        schema["x-kubernetes-embedded-resource"] = True


@dataclass(frozen=True)
class ListType(SchemaMarker):
    """How server-side apply merges the list, and which items must be unique: ``atomic`` (replaced
    whole), ``set`` (unique scalars) or ``map`` (items unique by ``keys``)."""

    type: Literal["atomic", "set", "map"]
    keys: tuple[str, ...] = ()

    def extend(self, schema: dict[str, Any]) -> None:
        schema["x-kubernetes-list-type"] = self.type
        if self.keys:
            schema["x-kubernetes-list-map-keys"] = list(self.keys)


@dataclass(frozen=True)
class MapType(SchemaMarker):
    """How server-side apply merges an object: ``granular`` (per field) or ``atomic`` (whole)."""

    type: Literal["granular", "atomic"]

    def extend(self, schema: dict[str, Any]) -> None:
        schema["x-kubernetes-map-type"] = self.type


@dataclass(frozen=True)
class PrinterColumn:
    """A column of ``kubectl get`` (``additionalPrinterColumns``)."""

    name: str
    json_path: str
    #: integer, number, string, boolean or date.
    type: str = "string"
    description: str | None = None
    format: str | None = None
    #: 0 is shown by default; higher only with ``-o wide``.
    priority: int = 0

    def to_dict(self) -> dict[str, Any]:
        column: dict[str, Any] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.description is not None:
            column["description"] = self.description
        if self.format is not None:
            column["format"] = self.format
        if self.priority:
            column["priority"] = self.priority
        return column


@dataclass(frozen=True)
class Scale:
    """The scale subresource (``kubectl scale``, HorizontalPodAutoscalers): where the replica counts are."""

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        scale = {"specReplicasPath": self.spec_replicas_path, "statusReplicasPath": self.status_replicas_path}
        if self.label_selector_path is not None:
            scale["labelSelectorPath"] = self.label_selector_path
        return scale


@dataclass(frozen=True)
class CRDOptions:
    """What the class keywords declared about a custom resource's kind and version."""

    gvk: GroupVersionKind
    plural: str
    singular: str
    scope: Literal["Namespaced", "Cluster"]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status: bool | None = None
    scale: Scale | None = None
    printer_columns: tuple[PrinterColumn, ...] = ()
    selectable_fields: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    storage: bool | None = None
    served: bool = True
    deprecated: bool = False
    deprecation_warning: str | None = None

    @property
    def name(self) -> str:
        """The CRD's name: ``<plural>.<group>``."""
        return f"{self.plural}.{self.gvk.group}"
