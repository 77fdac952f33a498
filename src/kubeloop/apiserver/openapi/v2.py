"""``/openapi/v2``: the Swagger 2.0 document, as JSON and as protobuf (gnostic's ``openapi.v2.Document``).

kubectl 1.27 and 1.28 validate ``create``/``apply`` against it and ask for the protobuf form
(``application/com.github.proto-openapi.spec.v2@v1.0+protobuf``); other clients (helm,
kubeconform, older tools) read the JSON. The document carries the definitions of every served
kind, custom resources' included (with ``x-kubernetes-group-version-kind``, which clients look
kinds up by). The JSON form also carries every path, converted from the ``/openapi/v3``
documents with upstream's descriptions (parameters such as "A selector to restrict the list of
returned objects by their labels"), for generators and tools that read Swagger 2.0; the protobuf
form, which kubectl 1.27–1.28 read only for the definitions, leaves the paths out.

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
from kubeloop.apiserver.openapi import v3
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


_V3_REF = "#/components/schemas/"


def _v2_refs(node: Any) -> Any:
    """``node`` with OpenAPI 3's component references made Swagger 2.0's definition ones."""
    if isinstance(node, dict):
        out = {key: _v2_refs(value) for key, value in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith(_V3_REF):
            out["$ref"] = "#/definitions/" + ref[len(_V3_REF) :]
        return out
    if isinstance(node, list):
        return [_v2_refs(item) for item in node]
    return node


def _v2_parameter(parameter: Mapping[str, Any]) -> Node:
    """A query or path parameter: its schema's type inline, as Swagger 2.0 has it."""
    out: Node = {key: parameter[key] for key in ("description", "in", "name", "required") if key in parameter}
    schema = parameter.get("schema") or {}
    for key in ("type", "format", "uniqueItems"):
        if key in schema:
            out[key] = schema[key]
    return out


def _first_schema(content: Mapping[str, Any]) -> Any:
    """The schema of a request's or response's content (every media type has the same)."""
    for entry in content.values():
        if isinstance(entry, Mapping):
            return entry.get("schema")
    return None


def _v2_operation(operation: Mapping[str, Any]) -> Node:
    """An OpenAPI 3 operation as Swagger 2.0's: the request body a ``body`` parameter, media
    types as ``consumes``/``produces``, responses with their schema."""
    out: Node = {
        key: _v2_refs(value)
        for key, value in operation.items()
        if key not in ("parameters", "requestBody", "responses")
    }
    parameters = [_v2_parameter(parameter) for parameter in operation.get("parameters") or ()]
    consumes = ["*/*"]
    body = operation.get("requestBody")
    if isinstance(body, Mapping):
        content: Mapping[str, Any] = body.get("content") or {}
        schema = _first_schema(content)
        parameters.insert(
            0, {"in": "body", "name": "body", "required": True, "schema": _v2_refs(schema or {})}
        )
        if len(content) > 1:  # a patch: its patch media types
            consumes = list(content)
    produces: list[str] = []
    responses: Node = {}
    for code, response in (operation.get("responses") or {}).items():
        answer: Node = {"description": response.get("description", "")}
        media: Mapping[str, Any] = response.get("content") or {}
        for media_type in media:
            if media_type not in produces:
                produces.append(media_type)
        schema = _first_schema(media)
        if schema:
            answer["schema"] = _v2_refs(schema)
        responses[code] = answer
    out["consumes"] = consumes
    if produces:
        out["produces"] = produces
    out["schemes"] = ["https"]
    if parameters:
        out["parameters"] = parameters
    out["responses"] = responses
    return out


def _paths(
    catalog: ResourceCatalog, extra_definitions: Mapping[str, Any]
) -> tuple[dict[str, Node], dict[str, Node]]:
    """Every path of every served group-version, from its ``/openapi/v3`` document, and the
    schemas those documents define (options, Status, WatchEvent, ...: the paths refer to them)."""
    paths: dict[str, Node] = {}
    components: dict[str, Node] = {}
    for path in v3.openapi_v3_index(catalog, extra_definitions)["paths"]:
        raw = v3.openapi_v3_document(catalog, path, extra_definitions)
        if raw is None:
            continue
        document = orjson.loads(raw)
        for name, schema in ((document.get("components") or {}).get("schemas") or {}).items():
            components.setdefault(name, schema)
        for route, item in (document.get("paths") or {}).items():
            converted: Node = {}
            for key, value in item.items():
                if key == "parameters":
                    converted[key] = [_v2_parameter(parameter) for parameter in value]
                elif isinstance(value, Mapping) and key in ("get", "put", "post", "patch", "delete"):
                    converted[key] = _v2_operation(value)
            paths[route] = converted
    return dict(sorted(paths.items())), components


def _json_document(definitions: Mapping[str, Node], paths: Mapping[str, Node]) -> bytes:
    document = {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": f"v{schemas.schema_release()}"},
        "paths": paths,
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
    """The last document built, in both forms (the JSON one on first use: only it carries the
    paths), with what it was built from."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.key: tuple[Any, ...] | None = None
        self.definitions: dict[str, Node] = {}
        self.protobuf = b""
        self.json: bytes | None = None


_documents = _Documents()


def _key(catalog: ResourceCatalog, extras: Mapping[str, Any]) -> tuple[Any, ...]:
    fingerprint = hashlib.sha256(orjson.dumps(extras, option=orjson.OPT_SORT_KEYS)).hexdigest()
    return (tuple(sorted((r.group, r.version, r.kind) for r in catalog.all())), fingerprint)


def _current(catalog: ResourceCatalog, extras: Mapping[str, Any]) -> _Documents:
    """The documents of this catalog and these custom resource schemas (built once)."""
    key = _key(catalog, extras)
    with _documents.lock:
        if _documents.key == key:
            return _documents
    definitions = _definitions(catalog, extras)
    protobuf = _protobuf_document(definitions)
    with _documents.lock:
        _documents.key, _documents.definitions, _documents.protobuf = key, definitions, protobuf
        _documents.json = None
    return _documents


def openapi_v2_json(catalog: ResourceCatalog, extra_definitions: Mapping[str, Any] | None = None) -> bytes:
    """The document as JSON, with the paths."""
    extras = extra_definitions or {}
    documents = _current(catalog, extras)
    with documents.lock:
        if documents.json is not None:
            return documents.json
        definitions = documents.definitions
    paths, components = _paths(catalog, extras)
    merged = {name: v2_schema(node) for name, node in components.items() if name not in definitions}
    built = _json_document(dict(sorted({**merged, **definitions}.items())), paths)
    with documents.lock:
        if documents.key == _key(catalog, extras):
            documents.json = built
    return built


def openapi_v2_protobuf(
    catalog: ResourceCatalog, extra_definitions: Mapping[str, Any] | None = None
) -> bytes:
    """The document as an encoded openapi.v2.Document (definitions only)."""
    return _current(catalog, extra_definitions or {}).protobuf
