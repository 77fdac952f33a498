"""``/openapi/v2``: the Swagger 2.0 document, as JSON and as protobuf (gnostic's ``openapi.v2.Document``).

kubectl 1.27 and 1.28 validate ``create``/``apply`` against it and ask for the protobuf form
(``application/com.github.proto-openapi.spec.v2@v1.0+protobuf``); other clients (helm,
kubeconform, older tools) read the JSON. The document carries the definitions of every served
kind, custom resources' included (with ``x-kubernetes-group-version-kind``, which clients look
kinds up by); paths are left out — kubectl 1.29+ and every other client read ``/openapi/v3``.

Definitions come in two forms and leave in one (:func:`v2_schema`): built-in kinds from
kubernetes-validate's JSON-schema copies of upstream's, and custom resources' OpenAPI v3
schemas, converted as upstream publishes a CRD in v2 — no ``nullable`` (a nullable field loses
its type and is no longer required), no ``anyOf``/``oneOf``/``allOf``/``not``, no ``properties``
or ``items`` under ``x-kubernetes-preserve-unknown-fields`` (kubectl would then refuse unknown
fields there), no type on an array without items or on an int-or-string. Field numbers of the
protobuf form are gnostic's OpenAPIv2.proto; the wire format is ``protowire``'s, so no protobuf
runtime is needed.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from typing import Any

import orjson
import yaml

from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.catalog.resources import ResourceCatalog
from kubeloop.apiserver.protobuf import wire

MEDIA_TYPE = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
_REF_PREFIXES = ("#/$defs/", "/api/_definitions.json#/$defs/", "#/components/schemas/", "#/definitions/")
#: Keywords Swagger 2.0 schemas share with JSON schema and OpenAPI 3.0, kept as they are.
_KEPT = (
    "title",
    "description",
    "format",
    "default",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
)

Node = dict[str, Any]


# --------------------------------------------------------------------------- conversion


def _definition_ref(ref: str) -> str:
    for prefix in _REF_PREFIXES:
        if ref.startswith(prefix):
            return "#/definitions/" + ref[len(prefix) :]
    return ref


def _simple_types(options: Any) -> set[str] | None:
    """The types of a ``oneOf``/``anyOf`` whose options are bare ``{"type": ...}`` nodes."""
    if not isinstance(options, list) or not options:
        return None
    found: set[str] = set()
    for option in options:
        if not isinstance(option, Mapping) or set(option) - {"type"}:
            return None
        found.update(schemas.node_types(option))
    return found


def _single_ref(options: Any) -> str | None:
    """The reference of an ``allOf`` holding one ``$ref`` (OpenAPI 3's way to describe a $ref)."""
    if isinstance(options, list) and len(options) == 1 and isinstance(options[0], Mapping):
        ref = options[0].get("$ref")
        if isinstance(ref, str) and len(options[0]) == 1:
            return ref
    return None


def v2_schema(node: Any, *, builtin: bool = False) -> Node:
    """A schema node as a Swagger 2.0 schema (see the module's docstring). ``builtin``: a
    kubernetes-validate node, whose ``apiVersion``/``kind`` enums upstream does not publish."""
    if not isinstance(node, Mapping):
        return {}
    out: Node = {}
    ref = node.get("$ref")
    if not isinstance(ref, str):
        ref = _single_ref(node.get("allOf"))
    if isinstance(ref, str):
        out["$ref"] = _definition_ref(ref)
        if isinstance(node.get("description"), str):
            out["description"] = node["description"]
        return out
    for key in _KEPT:
        if key in node:
            out[key] = node[key]
    options = _simple_types(node.get("oneOf")) or _simple_types(node.get("anyOf"))
    types = [t for t in schemas.node_types(node) if t != "null"]
    if options == {"integer", "string"} or node.get("x-kubernetes-int-or-string"):
        out["type"], out["format"] = "string", "int-or-string"  # as kube-openapi publishes IntOrString
    elif types:
        out["type"] = types[0]
    elif options:
        out["type"] = "string" if "string" in options else sorted(options)[0]
    nullable = bool(node.get("nullable"))
    opaque = nullable or bool(node.get("x-kubernetes-preserve-unknown-fields"))
    if nullable:
        out.pop("type", None)
    properties = node.get("properties")
    if isinstance(properties, Mapping) and not opaque:
        converted: Node = {}
        for name, child in properties.items():
            value = v2_schema(child, builtin=builtin)
            if builtin and name in ("apiVersion", "kind"):
                value.pop("enum", None)
            converted[name] = value
        out["properties"] = converted
        required = [
            name
            for name in node.get("required") or ()
            if not (isinstance(properties.get(name), Mapping) and properties[name].get("nullable"))
        ]
        if required:
            out["required"] = required
    elif not opaque and node.get("required"):
        out["required"] = list(node["required"])
    items = node.get("items")
    if isinstance(items, Mapping) and not opaque:
        out["items"] = v2_schema(items, builtin=builtin)
    elif out.get("type") == "array":
        del out["type"]  # kubectl cannot take an array without an item schema
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping) and not opaque:
        out["additionalProperties"] = v2_schema(extra, builtin=builtin)
    elif isinstance(extra, bool) and not opaque:
        out["additionalProperties"] = extra
    for key, value in node.items():
        if key.startswith("x-kubernetes-"):
            out[key] = value
    return out


# --------------------------------------------------------------------------- the document


def _definitions(catalog: ResourceCatalog, extra_definitions: Mapping[str, Any]) -> dict[str, Node]:
    roots = [
        name
        for resource in catalog.all()
        for kind in (resource.kind, resource.list_kind)
        if (name := schemas.definition_name(resource.group, resource.version, kind)) is not None
    ]
    out = {name: v2_schema(node, builtin=True) for name, node in schemas.reachable(roots).items()}
    for name, node in extra_definitions.items():
        out[name] = v2_schema(node)
    return dict(sorted(out.items()))


def _json_document(definitions: Mapping[str, Node]) -> bytes:
    document = {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": f"v{schemas.schema_release()}"},
        "paths": {},
        "definitions": definitions,
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "type": "apiKey",
                "name": "authorization",
                "in": "header",
            }
        },
        "security": [{"BearerToken": []}],
    }
    return orjson.dumps(document)


def _named(name: str, value: bytes) -> bytes:
    """NamedSchema / NamedAny / NamedPathItem: name = 1, value = 2."""
    return wire.string_field(1, name) + wire.bytes_field(2, value)


def _vendor_extension(name: str, value: Any) -> bytes:
    any_message = wire.string_field(2, yaml.safe_dump(value, default_flow_style=False))  # Any.yaml = 2
    return wire.bytes_field(31, _named(name, any_message))  # Schema.vendor_extension = 31


def _schema_message(node: Mapping[str, Any]) -> bytes:
    """A :func:`v2_schema` node as an openapi.v2.Schema message (the fields kubectl reads)."""
    out = bytearray()
    if "$ref" in node:
        out += wire.string_field(1, str(node["$ref"]))  # _ref = 1
    out += wire.string_field(2, str(node.get("format", "")))
    out += wire.string_field(4, str(node.get("description", "")))
    for required in node.get("required", ()):
        out += wire.string_field(19, required)
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping):
        # AdditionalPropertiesItem.schema = 1
        out += wire.bytes_field(21, wire.bytes_field(1, _schema_message(extra)))
    if "type" in node:
        out += wire.bytes_field(22, wire.string_field(1, str(node["type"])))  # TypeItem.value = 1
    items = node.get("items")
    if isinstance(items, Mapping):
        out += wire.bytes_field(23, wire.bytes_field(1, _schema_message(items)))  # ItemsItem.schema = 1
    properties = node.get("properties")
    if isinstance(properties, Mapping):
        entries = b"".join(wire.bytes_field(1, _named(k, _schema_message(v))) for k, v in properties.items())
        out += wire.bytes_field(25, entries)  # Properties.additional_properties = 1
    for key, value in node.items():
        if key.startswith("x-kubernetes-"):
            out += _vendor_extension(key, value)
    return bytes(out)


def _protobuf_document(definitions: Mapping[str, Node]) -> bytes:
    info = wire.string_field(1, "Kubernetes") + wire.string_field(2, f"v{schemas.schema_release()}")
    body = b"".join(
        wire.bytes_field(1, _named(name, _schema_message(node))) for name, node in definitions.items()
    )
    return (
        wire.string_field(1, "2.0")
        + wire.bytes_field(2, info)
        + wire.bytes_field(8, b"")
        + wire.bytes_field(9, body)
    )


class _Documents:
    """The last document built, in both forms, with what it was built from."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.key: tuple[Any, ...] | None = None
        self.forms: tuple[bytes, bytes] = (b"", b"")


_documents = _Documents()


def _built(catalog: ResourceCatalog, extra_definitions: Mapping[str, Any] | None) -> tuple[bytes, bytes]:
    """(JSON, protobuf) of the document, built once per catalog and custom resource schemas."""
    extras = extra_definitions or {}
    fingerprint = hashlib.sha256(orjson.dumps(extras, option=orjson.OPT_SORT_KEYS)).hexdigest()
    key = (tuple(sorted((r.group, r.version, r.kind) for r in catalog.all())), fingerprint)
    with _documents.lock:
        if _documents.key == key:
            return _documents.forms
    definitions = _definitions(catalog, extras)
    forms = (_json_document(definitions), _protobuf_document(definitions))
    with _documents.lock:
        _documents.key, _documents.forms = key, forms
    return forms


def openapi_v2_json(catalog: ResourceCatalog, extra_definitions: Mapping[str, Any] | None = None) -> bytes:
    """The document as JSON."""
    return _built(catalog, extra_definitions)[0]


def openapi_v2_protobuf(
    catalog: ResourceCatalog, extra_definitions: Mapping[str, Any] | None = None
) -> bytes:
    """The document as an encoded openapi.v2.Document."""
    return _built(catalog, extra_definitions)[1]
