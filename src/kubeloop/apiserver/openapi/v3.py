"""OpenAPI v3 as kube-apiserver serves it.

``/openapi/v3`` is an index ``{"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=…"}}}``
with one entry per served group-version; ``/openapi/v3/api/v1`` and ``/openapi/v3/apis/G/V`` are
OpenAPI 3.0 documents with

* ``paths`` for every resource and subresource, shaped like upstream's: per-operation
  ``x-kubernetes-action`` and ``x-kubernetes-group-version-kind``, the write parameters
  (``dryRun``, ``fieldManager``, ``fieldValidation``, ``force`` on PATCH) on the operation and the list
  parameters on list/watch. kubectl >= 1.27 looks for ``fieldValidation`` among the parameters of
  the PATCH operation of a GVK (cli-runtime ``QueryParamVerifierV3``) and for the strategic merge
  media type in its request body;
* ``components.schemas`` with every definition reachable from those paths, converted from the
  JSON-schema form of :mod:`kubeloop.apiserver.catalog.schemas` (``#/$defs/X`` → ``#/components/schemas/X``,
  a ``$ref`` with siblings wrapped in ``allOf`` like upstream, ``type: [x, "null"]`` → ``type: x``,
  IntOrString/Quantity as upstream's ``oneOf``). ``kubectl explain`` finds a kind's schema by its
  ``x-kubernetes-group-version-kind``.

Documents are built lazily, serialised once (orjson) and cached by the content of their inputs, so
a catalog change (a CRD added) rebuilds only what changed. Extra definitions (CRD schemas, by
OpenAPI name, in JSON-schema or OpenAPI form, carrying ``x-kubernetes-group-version-kind``) can be
passed to both functions.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.openapi.v3paths import (
    API_RESOURCE_LIST,
    DELETE_OPTIONS,
    LIST_META,
    OBJECT_META,
    PATCH,
    REF_PREFIX,
    SCALE,
    STATUS,
    WATCH_EVENT,
    Names,
    Node,
    gv_camel,
    gv_path,
    operation_responses,
    operation_tag,
    resource_paths,
    schema_ref,
)

#: JSON-schema keywords OpenAPI 3.0 does not have.
_DROPPED_KEYS = frozenset({"$schema", "$id", "id", "$defs", "definitions", "$comment"})

#: Bumped whenever the generated shape changes, so cached documents are rebuilt.
_FORMAT_VERSION = 1


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _simple_types(options: Any) -> list[str] | None:
    """The types of a ``oneOf``/``anyOf`` whose options are bare ``{"type": ...}`` nodes."""
    if not isinstance(options, list) or not options:
        return None
    found: list[str] = []
    for option in options:
        if not isinstance(option, Mapping) or set(option) - {"type"}:
            return None
        found.extend(t for t in schemas.node_types(option) if t not in found)
    return found


def convert_schema(node: Any, *, builtin: bool = False) -> Any:
    """A JSON-schema node (kubernetes-validate form, or already OpenAPI 3) as an OpenAPI 3.0 schema.

    ``builtin`` drops the ``enum`` kubernetes-validate adds to ``apiVersion``/``kind`` (upstream has none).
    ``nullable`` is kept where the input has it and never added.
    """
    if isinstance(node, list):
        return [convert_schema(item, builtin=builtin) for item in node]
    if not isinstance(node, Mapping):
        return node
    out: Node = {}
    ref: str | None = None
    for key, value in node.items():
        if key in _DROPPED_KEYS:
            continue
        if key == "$ref" and isinstance(value, str):
            ref = REF_PREFIX + _ref_name(value)
        elif key == "type":
            if isinstance(value, list):
                types = [t for t in value if t != "null"]
                if types:
                    out["type"] = types[0]
            elif value != "null":
                out["type"] = value
        elif key == "properties" and isinstance(value, Mapping):
            props: Node = {}
            for name, prop in value.items():
                converted = convert_schema(prop, builtin=builtin)
                if builtin and name in ("apiVersion", "kind") and isinstance(converted, dict):
                    converted.pop("enum", None)
                props[name] = converted
            out["properties"] = props
        elif key in ("patternProperties", "dependentSchemas"):
            continue  # not OpenAPI 3.0
        elif key in ("oneOf", "anyOf"):
            options = _simple_types(value)
            if options is not None and sorted(options) == ["integer", "string"]:
                out[key] = [{"type": "integer"}, {"type": "string"}]
                out["format"] = "int-or-string"
                out["x-kubernetes-int-or-string"] = True
            elif options is not None and sorted(options) == ["number", "string"]:
                out[key] = [{"type": "string"}, {"type": "number"}]
            else:
                out[key] = convert_schema(value, builtin=builtin)
        elif key in ("allOf", "not", "items", "additionalProperties"):
            out[key] = convert_schema(value, builtin=builtin)
        elif key == "const":
            out["enum"] = [value]
        elif key == "examples" and isinstance(value, list):
            if value:
                out["example"] = value[0]
        else:
            out[key] = value
    if ref is None:
        return out
    if not out:
        return {"$ref": ref}
    # OpenAPI 3.0 ignores siblings of $ref: upstream wraps the reference in allOf.
    return {"allOf": [{"$ref": ref}], **out}


def _collect_refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(REF_PREFIX):
            found.add(ref[len(REF_PREFIX) :])
        for value in node.values():
            _collect_refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _collect_refs(value, found)


@dataclass(frozen=True)
class _Component:
    schema: Node
    refs: frozenset[str]


def _component(schema: Node) -> _Component:
    refs: set[str] = set()
    _collect_refs(schema, refs)
    return _Component(schema, frozenset(refs))


@functools.cache
def _builtin_component(name: str) -> _Component | None:
    node = schemas.definitions().get(name)
    if node is None:
        return None
    return _component(convert_schema(node, builtin=True))


class _Extras:
    """Extra (CRD) definitions, converted once per content."""

    def __init__(self, definitions: Mapping[str, Any] | None, fingerprint: str) -> None:
        self.fingerprint = fingerprint
        self.components: dict[str, _Component] = {}
        self.by_gvk: dict[tuple[str, str, str], str] = {}
        for name, node in (definitions or {}).items():
            converted = convert_schema(node)
            if not isinstance(converted, dict):
                continue
            self.components[name] = _component(converted)
            for gvk in converted.get("x-kubernetes-group-version-kind") or ():
                if isinstance(gvk, Mapping):
                    key = (str(gvk.get("group", "")), str(gvk.get("version", "")), str(gvk.get("kind", "")))
                    self.by_gvk.setdefault(key, name)


def _json_default(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value, default=_json_default, option=orjson.OPT_SORT_KEYS)


_lock = threading.Lock()

_EMPTY_EXTRAS = _Extras(None, "")

_extras_cache: OrderedDict[str, _Extras] = OrderedDict()


def _extras(definitions: Mapping[str, Any] | None) -> _Extras:
    if not definitions:
        return _EMPTY_EXTRAS
    fingerprint = hashlib.sha256(_dumps(definitions)).hexdigest()
    with _lock:
        cached = _extras_cache.get(fingerprint)
        if cached is not None:
            _extras_cache.move_to_end(fingerprint)
            return cached
    extras = _Extras(definitions, fingerprint)
    with _lock:
        _extras_cache[fingerprint] = extras
        while len(_extras_cache) > 8:
            _extras_cache.popitem(last=False)
    return extras


def _crd_definition_name(group: str, version: str, kind: str) -> str:
    """Upstream's name of a custom resource's definition: ``com.example.stable.v1.CronTab``."""
    reversed_group = ".".join(reversed(group.split("."))) if group else "core"
    return f"{reversed_group}.{version}.{kind}"


_API_VERSION_PROP: Node = {
    "description": "APIVersion defines the versioned schema of this representation of an object.",
    "type": "string",
}

_KIND_PROP: Node = {
    "description": "Kind is a string value representing the REST resource this object represents.",
    "type": "string",
}


def _generic_kind_schema(group: str, version: str, kind: str) -> Node:
    return {
        "description": f"{kind} is a custom resource without a published schema.",
        "properties": {
            "apiVersion": dict(_API_VERSION_PROP),
            "kind": dict(_KIND_PROP),
            "metadata": {"allOf": [schema_ref(OBJECT_META)], "description": "Standard object's metadata."},
        },
        "type": "object",
        "x-kubernetes-group-version-kind": [{"group": group, "kind": kind, "version": version}],
        "x-kubernetes-preserve-unknown-fields": True,
    }


def _generic_list_schema(group: str, version: str, kind: str, item_schema: str) -> Node:
    return {
        "description": f"{kind}List is a list of {kind}",
        "properties": {
            "apiVersion": dict(_API_VERSION_PROP),
            "items": {
                "description": f"List of {kind.lower()}s.",
                "items": schema_ref(item_schema),
                "type": "array",
            },
            "kind": dict(_KIND_PROP),
            "metadata": {"allOf": [schema_ref(LIST_META)], "description": "Standard list metadata."},
        },
        "required": ["items"],
        "type": "object",
        "x-kubernetes-group-version-kind": [{"group": group, "kind": f"{kind}List", "version": version}],
    }


def _placeholder(name: str) -> Node:
    return {
        "description": f"{name} (schema not published)",
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }


def _schema_for(group: str, version: str, kind: str, extras: _Extras) -> tuple[str | None, bool]:
    """(definition name, whether it is a built-in kind) of a GVK."""
    name = extras.by_gvk.get((group, version, kind))
    if name is not None:
        return name, False
    builtin = schemas.definition_name(group, version, kind)
    return builtin, builtin is not None


def _build_document(resources: list[ResourceType], extras: _Extras, group: str, version: str) -> bytes:
    local: dict[str, _Component] = {}  # synthesised schemas of kinds without one
    roots: list[str] = [STATUS, DELETE_OPTIONS, WATCH_EVENT, PATCH, API_RESOURCE_LIST]
    paths: dict[str, Node] = {
        f"/{gv_path(group, version)}/": {
            "get": {
                "description": "get available resources",
                "operationId": f"get{gv_camel(group, version)}APIResources",
                "responses": operation_responses(API_RESOURCE_LIST, ("200",)),
                "tags": [operation_tag(group, version)],
            }
        }
    }
    for resource in sorted(resources, key=lambda r: r.plural):
        g, v = resource.group, resource.version
        kind_schema, builtin = _schema_for(g, v, resource.kind, extras)
        if kind_schema is None:
            kind_schema = _crd_definition_name(g, v, resource.kind)
            local[kind_schema] = _component(_generic_kind_schema(g, v, resource.kind))
        list_schema, _ = _schema_for(g, v, resource.list_kind, extras)
        if list_schema is None:
            list_schema = _crd_definition_name(g, v, resource.list_kind)
            local[list_schema] = _component(_generic_list_schema(g, v, resource.kind, kind_schema))
        roots.extend((kind_schema, list_schema))
        if "scale" in resource.subresources:
            roots.append(SCALE)
        paths.update(resource_paths(Names(resource, kind_schema, list_schema, builtin)))

    components: dict[str, Node] = {}
    stack = list(dict.fromkeys(roots))
    while stack:
        name = stack.pop()
        if name in components:
            continue
        component = local.get(name) or extras.components.get(name) or _builtin_component(name)
        if component is None:
            components[name] = _placeholder(name)  # never leave a dangling $ref
            continue
        components[name] = component.schema
        stack.extend(ref for ref in component.refs if ref not in components)
    document = {
        "components": {
            "schemas": components,
            "securitySchemes": {
                "BearerToken": {
                    "description": "Bearer Token authentication",
                    "in": "header",
                    "name": "authorization",
                    "type": "apiKey",
                }
            },
        },
        "info": {"title": "Kubernetes", "version": f"v{schemas.schema_release()}"},
        "openapi": "3.0.0",
        "paths": paths,
    }
    return _dumps(document)


def document_hash(document: bytes) -> str:
    """Upstream's ETag of a document (kube-openapi handler3): uppercase hex SHA-512."""
    return hashlib.sha512(document).hexdigest().upper()


_documents: OrderedDict[tuple[Any, ...], tuple[bytes, str]] = OrderedDict()

_MAX_DOCUMENTS = 256


def _fingerprint(resources: Iterable[ResourceType]) -> tuple[Any, ...]:
    """What of a group-version's resources its document depends on."""
    return tuple(
        sorted(
            (
                r.group,
                r.version,
                r.plural,
                r.kind,
                r.namespaced,
                tuple(r.verbs),
                tuple(r.subresources),
                r.returns_deleted_object,
            )
            for r in resources
        )
    )


def _grouped(catalog: ResourceCatalog) -> dict[tuple[str, str], list[ResourceType]]:
    grouped: dict[tuple[str, str], list[ResourceType]] = {}
    for resource in catalog.all():
        grouped.setdefault((resource.group, resource.version), []).append(resource)
    return grouped


def _document(resources: list[ResourceType], extras: _Extras, group: str, version: str) -> tuple[bytes, str]:
    key = (
        _FORMAT_VERSION,
        group,
        version,
        _fingerprint(resources),
        extras.fingerprint,
        schemas.schema_release(),
    )
    with _lock:
        cached = _documents.get(key)
        if cached is not None:
            _documents.move_to_end(key)
            return cached
    document = _build_document(resources, extras, group, version)
    entry = (document, document_hash(document))
    with _lock:
        _documents[key] = entry
        while len(_documents) > _MAX_DOCUMENTS:
            _documents.popitem(last=False)
    return entry


def _parse_path(path: str) -> tuple[str, str] | None:
    path = path.split("?", 1)[0].strip("/").removeprefix("openapi/v3/")
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "api" and parts[1]:
        return "", parts[1]
    if len(parts) == 3 and parts[0] == "apis" and parts[1] and parts[2]:
        return parts[1], parts[2]
    return None


def openapi_v3_index(
    catalog: ResourceCatalog, extra_definitions: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``/openapi/v3``: ``{"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=…"}, …}}``.

    The hash is the SHA-512 of the document the URL serves (documents are built on first use and
    cached until their inputs change)."""
    extras = _extras(extra_definitions)
    entries: dict[str, Any] = {}
    for (group, version), resources in sorted(_grouped(catalog).items()):
        path = gv_path(group, version)
        _raw, etag = _document(resources, extras, group, version)
        entries[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={etag}"}
    return {"paths": entries}


def openapi_v3_document(
    catalog: ResourceCatalog, path: str, extra_definitions: Mapping[str, Any] | None = None
) -> bytes | None:
    """The OpenAPI 3.0 document of ``api/v1`` or ``apis/G/V`` as JSON bytes, or None when that
    group-version is not served. A leading ``/``, an ``openapi/v3/`` prefix and a ``?hash=`` query
    are tolerated."""
    parsed = _parse_path(path)
    if parsed is None:
        return None
    group, version = parsed
    resources = catalog.in_group_version(group, version)
    if not resources:
        return None
    raw, _etag = _document(resources, _extras(extra_definitions), group, version)
    return raw


def openapi_v3_document_hash(
    catalog: ResourceCatalog, path: str, extra_definitions: Mapping[str, Any] | None = None
) -> str | None:
    """The hash (upstream's ETag) of :func:`openapi_v3_document`, for ``ETag`` headers."""
    parsed = _parse_path(path)
    if parsed is None:
        return None
    resources = catalog.in_group_version(*parsed)
    if not resources:
        return None
    return _document(resources, _extras(extra_definitions), *parsed)[1]


def clear_caches() -> None:
    """Forget every built document and converted schema (tests; a changed schema release)."""
    with _lock:
        _documents.clear()
        _extras_cache.clear()
    _builtin_component.cache_clear()


def crd_definitions(crd: Mapping[str, Any]) -> dict[str, Any]:
    """The definitions of a CustomResourceDefinition's served versions, as upstream publishes them
    (``com.example.stable.v1.CronTab``: the version's schema with apiVersion, kind and an
    ObjectMeta ``metadata``; and its ``CronTabList``), for ``extra_definitions``."""
    spec = crd.get("spec") or {}
    group = str(spec.get("group") or "")
    kind = str((spec.get("names") or {}).get("kind") or "")
    out: dict[str, Any] = {}
    for version in spec.get("versions") or ():
        if not isinstance(version, Mapping) or not version.get("served", True):
            continue
        name = str(version.get("name") or "")
        schema = dict((version.get("schema") or {}).get("openAPIV3Schema") or {"type": "object"})
        properties = dict(schema.get("properties") or {})
        properties["apiVersion"] = {**_API_VERSION_PROP, **(properties.get("apiVersion") or {})}
        properties["kind"] = {**_KIND_PROP, **(properties.get("kind") or {})}
        properties["metadata"] = {
            "allOf": [schema_ref(OBJECT_META)],
            "description": "Standard object's metadata.",
        }
        schema["properties"] = properties
        schema["x-kubernetes-group-version-kind"] = [{"group": group, "kind": kind, "version": name}]
        kind_name = _crd_definition_name(group, name, kind)
        out[kind_name] = schema
        out[_crd_definition_name(group, name, f"{kind}List")] = _generic_list_schema(
            group, name, kind, kind_name
        )
    return out
