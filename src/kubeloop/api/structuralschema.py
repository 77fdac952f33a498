"""A pydantic model's JSON schema turned into a CRD's structural OpenAPI v3 schema.

Kubernetes accepts only *structural* schemas: every node has a type (or is int-or-string or
keeps unknown fields), no ``$ref``, no unions of types, OpenAPI 3.0's boolean
``exclusiveMinimum``. pydantic writes JSON Schema 2020-12, so the conversion inlines ``$defs``,
turns ``T | None`` into an optional ``T`` (the server drops nulls, as for Go's pointers),
``int | str`` into ``x-kubernetes-int-or-string``, ``Literal``/``Enum`` into ``enum``, ``set[T]``
into a ``set`` list, ``Any`` and ``dict[str, Any]`` into fields that keep what they are given,
and keeps descriptions and defaults. What has no structural form (a union of models, a tuple,
a recursive model) is an error naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

#: The formats kube-apiserver validates (k8s.io/kube-openapi's strfmt registry); others are dropped.
KNOWN_FORMATS = frozenset(
    {
        "bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac", "uuid", "uuid3",
        "uuid4", "uuid5", "isbn", "isbn10", "isbn13", "creditcard", "ssn", "hexcolor", "rgbcolor",
        "byte", "password", "date", "date-time", "datetime", "int32", "int64", "float", "double",
    }
)  # fmt: skip

#: JSON Schema keys with no meaning in a CRD (or no structural form we keep).
DROPPED_KEYS = frozenset({"title", "examples", "deprecated", "readOnly", "writeOnly", "$schema", "$comment"})

#: Keys copied as they are.
KEPT_KEYS = frozenset(
    {
        "description", "minimum", "maximum", "multipleOf", "minLength", "maxLength", "pattern",
        "minItems", "maxItems", "minProperties", "maxProperties", "required",
    }
)  # fmt: skip

UNSTRUCTURAL_KEYS = {
    "prefixItems": "a tuple has no structural form; use a list or a model",
    "oneOf": "a union of types has no structural form; use one model with optional fields",
    "discriminator": "a union of types has no structural form; use one model with optional fields",
    "patternProperties": "patternProperties has no structural form",
    "propertyNames": "constrained map keys have no structural form; use dict[str, ...]",
    "if": "conditional schemas have no structural form",
    "not": "'not' has no structural form",
}


class SchemaConversionError(ValueError):
    """The model has a field whose type a structural schema cannot express."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class CRDJsonSchema(GenerateJsonSchema):
    """pydantic's generator, but an ObjectMeta below the root is an object that keeps its fields
    (a pod template's metadata), not the whole ObjectMeta schema."""

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        cls = schema["cls"]
        if cls.__name__ == "ObjectMeta" and cls.__module__ == "kubeloop.api.models.meta_v1":
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        return super().model_schema(schema)


def model_schema(model: type[BaseModel], root_path: str = "") -> dict[str, Any]:
    """The structural schema of ``model`` (its JSON form: aliases as property names)."""
    generated = model.model_json_schema(by_alias=True, mode="validation", schema_generator=CRDJsonSchema)
    definitions = generated.pop("$defs", {})
    return _Converter(definitions).convert(generated, root_path or model.__name__, ())


class _Converter:
    def __init__(self, definitions: Mapping[str, Any]) -> None:
        self._definitions = definitions

    def convert(self, schema: Mapping[str, Any], path: str, expanding: tuple[str, ...]) -> dict[str, Any]:
        schema, expanding = self._resolved(schema, path, expanding)
        for key, reason in UNSTRUCTURAL_KEYS.items():
            if key in schema:
                raise SchemaConversionError(path, reason)
        if "anyOf" in schema:
            return self._union(schema, path, expanding)
        result: dict[str, Any] = {}
        for key, value in schema.items():
            if key in DROPPED_KEYS or key in ("$ref", "allOf"):
                continue
            if key in KEPT_KEYS or key.startswith("x-kubernetes-"):
                result[key] = value
            elif key == "type":
                result["type"] = self._type(value, path)
            elif key == "format":
                if value in KNOWN_FORMATS:
                    result["format"] = value
            elif key == "enum":
                result["enum"] = [item for item in value if item is not None]  # None: the field is optional
                if len({_json_type(item, path) for item in result["enum"]}) > 1:
                    raise SchemaConversionError(
                        path, "an enum of values of several types has no structural form"
                    )
            elif key == "const":
                result["enum"] = [value]
                result.setdefault("type", _json_type(value, path))
            elif key == "default":
                if value is not None:
                    result["default"] = _without_nulls(value)
            elif key == "exclusiveMinimum":
                result["minimum"], result["exclusiveMinimum"] = value, True
            elif key == "exclusiveMaximum":
                result["maximum"], result["exclusiveMaximum"] = value, True
            elif key == "uniqueItems":
                if value:
                    result.setdefault("x-kubernetes-list-type", "set")
            elif key == "properties":
                required = set(schema.get("required", ()))
                result["properties"] = {}
                for name, sub in value.items():
                    converted = self.convert(sub, f"{path}.{name}", expanding)
                    if name in required and _may_be_null(sub):
                        converted["nullable"] = True  # a required `T | None`: the key is sent, maybe null
                    result["properties"][name] = converted
            elif key == "items":
                result["items"] = self.convert(value, f"{path}[*]", expanding)
            elif key == "additionalProperties":
                continue  # below: it depends on whether the object has properties
            else:
                raise SchemaConversionError(path, f"the JSON Schema keyword {key!r} has no structural form")
        self._object_fields(schema, result, path, expanding)
        if "enum" in result and "type" not in result and "x-kubernetes-int-or-string" not in result:
            result["type"] = _json_type(result["enum"][0], path)
        if not _typed(result):
            result["x-kubernetes-preserve-unknown-fields"] = True  # Any: whatever JSON value it is given
        return result

    def _resolved(
        self, schema: Mapping[str, Any], path: str, expanding: tuple[str, ...]
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        """``schema`` with its ``$ref`` (or a one-element ``allOf`` around one) merged in."""
        merged = dict(schema)
        all_of = merged.get("allOf")
        if all_of is not None:
            if len(all_of) != 1:
                raise SchemaConversionError(path, "allOf has no structural form")
            del merged["allOf"]
            merged = {**all_of[0], **merged}
        reference = merged.pop("$ref", None)
        if reference is None:
            return merged, expanding
        name = reference.rpartition("/")[2]
        if name in expanding:
            raise SchemaConversionError(
                path,
                f"{name} contains itself; a structural schema cannot be recursive (use PreserveUnknownFields)",
            )
        target = self._definitions.get(name)
        if target is None:
            raise SchemaConversionError(path, f"unresolved reference {reference}")
        resolved, _ = self._resolved(target, path, expanding)
        return {**resolved, **merged}, (*expanding, name)

    def _union(self, schema: dict[str, Any], path: str, expanding: tuple[str, ...]) -> dict[str, Any]:
        branches = [self._resolved(branch, path, expanding) for branch in schema["anyOf"]]
        outer = {key: value for key, value in schema.items() if key != "anyOf"}
        present = [(branch, seen) for branch, seen in branches if branch.get("type") != "null"]
        types = {branch.get("type") for branch, _ in present}
        if len(present) == 1:  # T | None: an optional T
            branch, seen = present[0]
            return self.convert({**branch, **outer}, path, seen)
        # int | str, and Quantity's str | int | float (upstream's Quantity schema is int-or-string too)
        if types in ({"string", "integer"}, {"string", "integer", "number"}):
            result = self.convert(outer, path, expanding)
            result.pop("x-kubernetes-preserve-unknown-fields", None)
            result["x-kubernetes-int-or-string"] = True
            return result
        raise SchemaConversionError(
            path, "a union of types has no structural form (only T | None, int | str and Quantity have one)"
        )

    def _type(self, value: Any, path: str) -> str:
        if isinstance(value, list):
            raise SchemaConversionError(path, f"a union of types {value} has no structural form")
        if value == "null":
            raise SchemaConversionError(path, "a field that can only be null has no structural form")
        return str(value)

    def _object_fields(
        self, schema: Mapping[str, Any], result: dict[str, Any], path: str, expanding: tuple[str, ...]
    ) -> None:
        extra = schema.get("additionalProperties")
        if extra is None or extra is False:
            return
        if "properties" in schema:
            return  # a model that keeps unknown fields in Python; the server prunes them
        if extra is True or extra == {}:
            result["x-kubernetes-preserve-unknown-fields"] = True
        else:
            result["additionalProperties"] = self.convert(extra, f"{path}[*]", expanding)


def _may_be_null(schema: Mapping[str, Any]) -> bool:
    return any(branch.get("type") == "null" for branch in schema.get("anyOf", ()))


def _typed(schema: Mapping[str, Any]) -> bool:
    return bool(
        "type" in schema
        or schema.get("x-kubernetes-int-or-string")
        or schema.get("x-kubernetes-preserve-unknown-fields")
    )


def _json_type(value: Any, path: str) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    raise SchemaConversionError(path, f"an enum of {type(value).__name__} values has no structural form")


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value
