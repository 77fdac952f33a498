"""``/openapi/v2`` as protobuf (gnostic's ``openapi.v2.Document``), for kubectl 1.27 and 1.28.

Those kubectl releases validate ``create``/``apply`` against the v2 document and accept it only as
``application/com.github.proto-openapi.spec.v2@v1.0+protobuf``. The document carries the
definitions of every served kind (with ``x-kubernetes-group-version-kind``, which kubectl looks
kinds up by); paths are left out — kubectl 1.29+ and every other client read ``/openapi/v3``.
Field numbers are gnostic's OpenAPIv2.proto; the wire format is ``protowire``'s, so no protobuf
runtime is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.catalog.resources import ResourceCatalog
from kubeloop.apiserver.protobuf import wire

MEDIA_TYPE = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
_REF_PREFIXES = ("#/$defs/", "/api/_definitions.json#/$defs/")


def _named(name: str, value: bytes) -> bytes:
    """NamedSchema / NamedAny / NamedPathItem: name = 1, value = 2."""
    return wire.string_field(1, name) + wire.bytes_field(2, value)


def _vendor_extension(name: str, value: Any) -> bytes:
    any_message = wire.string_field(2, yaml.safe_dump(value, default_flow_style=False))  # Any.yaml = 2
    return wire.bytes_field(31, _named(name, any_message))  # Schema.vendor_extension = 31


def _schema(node: Mapping[str, Any]) -> bytes:
    """A JSON-schema node (kubernetes-validate form) as an openapi.v2.Schema message."""
    out = bytearray()
    if "oneOf" in node and "properties" not in node:
        kinds = {t for option in node["oneOf"] for t in schemas.node_types(option)}
        out += wire.string_field(2, "int-or-string" if kinds == {"string", "integer"} else "")  # format = 2
        out += wire.string_field(4, str(node.get("description", "")))
        out += wire.bytes_field(22, wire.string_field(1, "string"))  # type = 22 (TypeItem.value = 1)
        return bytes(out)
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref
        for prefix in _REF_PREFIXES:
            if name.startswith(prefix):
                name = name[len(prefix) :]
        out += wire.string_field(1, f"#/definitions/{name}")  # _ref = 1
    out += wire.string_field(2, str(node.get("format", "")))
    out += wire.string_field(4, str(node.get("description", "")))
    for required in node.get("required", ()):
        out += wire.string_field(19, required)
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping):
        out += wire.bytes_field(
            21, wire.bytes_field(1, _schema(extra))
        )  # AdditionalPropertiesItem.schema = 1
    types = schemas.node_types(node)
    if types:
        out += wire.bytes_field(22, b"".join(wire.string_field(1, t) for t in types))
    items = node.get("items")
    if isinstance(items, Mapping):
        out += wire.bytes_field(23, wire.bytes_field(1, _schema(items)))  # ItemsItem.schema = 1
    properties = node.get("properties")
    if isinstance(properties, Mapping):
        entries = b"".join(wire.bytes_field(1, _named(k, _schema(v))) for k, v in properties.items())
        out += wire.bytes_field(25, entries)  # Properties.additional_properties = 1
    for key, value in node.items():
        if key.startswith("x-kubernetes-"):
            out += _vendor_extension(key, value)
    return bytes(out)


class _Cache:
    key: tuple[tuple[str, str, str], ...] | None = None
    document: bytes = b""


_cache = _Cache()


def openapi_v2_protobuf(catalog: ResourceCatalog) -> bytes:
    """The encoded Document, built once per catalog content."""
    key = tuple(sorted((r.group, r.version, r.kind) for r in catalog.all()))
    if _cache.key == key:
        return _cache.document
    roots = [
        name
        for resource in catalog.all()
        for kind in (resource.kind, resource.list_kind)
        if (name := schemas.definition_name(resource.group, resource.version, kind)) is not None
    ]
    definitions = schemas.reachable(roots)
    info = wire.string_field(1, "Kubernetes") + wire.string_field(2, f"v{schemas.schema_release()}")
    body = b"".join(
        wire.bytes_field(1, _named(name, _schema(node))) for name, node in sorted(definitions.items())
    )
    document = (
        wire.string_field(1, "2.0")
        + wire.bytes_field(2, info)
        + wire.bytes_field(8, b"")
        + wire.bytes_field(9, body)
    )
    _cache.key = key
    _cache.document = document
    return document
