"""OpenAPI v3 as kube-apiserver serves it: ``/openapi/v3`` (an index of group-versions) and one
document per group-version with the paths (kubectl checks PATCH for ``fieldValidation`` and the
strategic-merge media type there) and the component schemas (``kubectl explain`` reads them by
their ``x-kubernetes-group-version-kind``)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from kubeloop.apiserver import schemas
from kubeloop.apiserver.resources import ResourceCatalog, ResourceType

_REF_PREFIXES = ("#/$defs/", "/api/_definitions.json#/$defs/")
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_META_TYPES = (
    _META + "Status",
    _META + "DeleteOptions",
    _META + "WatchEvent",
    _META + "APIResourceList",
    _META + "Patch",
)
_PATCH_MEDIA = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _convert(node: Any) -> Any:
    """JSON-schema node (kubernetes-validate form) → OpenAPI 3 schema node."""
    if isinstance(node, list):
        return [_convert(n) for n in node]
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    if "oneOf" in node and not node.get("properties"):
        kinds = {t for option in node["oneOf"] for t in schemas.node_types(option)}
        if kinds == {"string", "integer"}:
            out.update(type="string", format="int-or-string")
            out["x-kubernetes-int-or-string"] = True
        else:
            out.update(type="string")
        if "description" in node:
            out["description"] = node["description"]
        return out
    for key, value in node.items():
        if key == "$ref":
            name = value
            for prefix in _REF_PREFIXES:
                if name.startswith(prefix):
                    name = name[len(prefix) :]
            out["allOf"] = [{"$ref": f"#/components/schemas/{name}"}]
        elif key == "type":
            types = [t for t in (value if isinstance(value, list) else [value]) if t != "null"]
            if types:
                out["type"] = types[0]
        elif key in ("properties", "additionalProperties", "items"):
            if key == "properties":
                out[key] = {k: _convert(v) for k, v in value.items()}
            else:
                out[key] = _convert(value)
        elif key in ("enum",):
            out[key] = [v for v in value if v is not None]
        else:
            out[key] = value
    return out


def _parameters(names: list[str]) -> list[dict[str, Any]]:
    kinds = {
        "limit": "integer",
        "timeoutSeconds": "integer",
        "gracePeriodSeconds": "integer",
        "watch": "boolean",
        "allowWatchBookmarks": "boolean",
        "sendInitialEvents": "boolean",
        "force": "boolean",
    }
    return [
        {
            "name": n,
            "in": "query",
            "schema": {"type": kinds.get(n, "string"), "uniqueItems": True},
            "description": n,
        }
        for n in names
    ]


_WRITE_PARAMS = ["dryRun", "fieldManager", "fieldValidation", "pretty"]
_LIST_PARAMS = [
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
    "pretty",
]


def _content(schema_name: str) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{schema_name}"}
    return {media: {"schema": ref} for media in ("application/json", "application/yaml")}


def _operation(
    resource: ResourceType,
    action: str,
    schema_name: str,
    params: list[str],
    *,
    body: str | None = None,
    patch_media: tuple[str, ...] = (),
    response: str | None = None,
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": f"{action}{resource.kind}",
        "tags": [resource.group_version.replace("/", "_").replace(".", "")],
        "parameters": _parameters(params),
        "responses": {"200": {"description": "OK", "content": _content(response or schema_name)}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": resource.group,
            "version": resource.version,
            "kind": resource.kind,
        },
    }
    if body is not None:
        op["requestBody"] = {"content": _content(body), "required": True}
    if patch_media:
        op["requestBody"] = {
            "content": {m: {"schema": {"$ref": f"#/components/schemas/{_META}Patch"}} for m in patch_media},
            "required": True,
        }
    return op


def _paths(resource: ResourceType) -> dict[str, Any]:
    schema_name = schemas.definition_name(resource.group, resource.version, resource.kind) or ""
    list_name = schemas.definition_name(resource.group, resource.version, resource.list_kind) or schema_name
    base = f"/{_gv_path(resource.group, resource.version)}"
    prefix = (
        f"{base}/namespaces/{{namespace}}/{resource.plural}"
        if resource.namespaced
        else f"{base}/{resource.plural}"
    )
    patch_media = _PATCH_MEDIA if schema_name else _PATCH_MEDIA[:2] + _PATCH_MEDIA[3:]
    collection = {
        "get": _operation(resource, "list", list_name, _LIST_PARAMS),
        "post": _operation(resource, "post", schema_name, _WRITE_PARAMS, body=schema_name),
        "delete": _operation(
            resource, "deletecollection", schema_name, [*_LIST_PARAMS, "dryRun"], response=f"{_META}Status"
        ),
    }
    item = {
        "get": _operation(resource, "get", schema_name, ["pretty"]),
        "put": _operation(resource, "put", schema_name, _WRITE_PARAMS, body=schema_name),
        "patch": _operation(
            resource, "patch", schema_name, [*_WRITE_PARAMS, "force"], patch_media=patch_media
        ),
        "delete": _operation(
            resource,
            "delete",
            schema_name,
            ["dryRun", "gracePeriodSeconds", "propagationPolicy", "pretty"],
            response=f"{_META}Status",
        ),
    }
    name_param = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
    ns_param = [{"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}}]
    scope = ns_param if resource.namespaced else []
    paths: dict[str, Any] = {
        prefix: {**collection, "parameters": scope},
        f"{prefix}/{{name}}": {**item, "parameters": scope + name_param},
    }
    if resource.namespaced:
        paths[f"{base}/{resource.plural}"] = {"get": _operation(resource, "list", list_name, _LIST_PARAMS)}
    for sub in resource.subresources:
        if sub == "status":
            paths[f"{prefix}/{{name}}/status"] = {
                "get": item["get"],
                "put": item["put"],
                "patch": item["patch"],
                "parameters": scope + name_param,
            }
    return paths


class _Cache:
    def __init__(self) -> None:
        self.key: tuple[Any, ...] | None = None
        self.documents: dict[str, bytes] = {}
        self.index: dict[str, Any] = {}


_cache = _Cache()


def _build(catalog: ResourceCatalog, extra_definitions: Mapping[str, Any] | None) -> _Cache:
    key = (tuple(sorted((r.group, r.version, r.plural) for r in catalog.all())), id(extra_definitions))
    if _cache.key == key:
        return _cache
    grouped: dict[str, list[ResourceType]] = {}
    for resource in catalog.all():
        grouped.setdefault(_gv_path(resource.group, resource.version), []).append(resource)
    documents: dict[str, bytes] = {}
    for gv_path, resources in grouped.items():
        roots = [*_META_TYPES]
        paths: dict[str, Any] = {}
        for resource in sorted(resources, key=lambda r: r.plural):
            for kind in (resource.kind, resource.list_kind):
                name = schemas.definition_name(resource.group, resource.version, kind)
                if name:
                    roots.append(name)
            paths.update(_paths(resource))
        components = {name: _convert(node) for name, node in sorted(schemas.reachable(roots).items())}
        for name, node in (extra_definitions or {}).items():
            components[name] = node
        document = {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": f"v{schemas.schema_release()}"},
            "paths": paths,
            "components": {"schemas": components},
        }
        documents[gv_path] = orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
    _cache.key = key
    _cache.documents = documents
    _cache.index = {
        "paths": {
            gv: {
                "serverRelativeURL": f"/openapi/v3/{gv}?hash={hashlib.sha512(doc).hexdigest()[:128].upper()}"
            }
            for gv, doc in sorted(documents.items())
        }
    }
    return _cache


def openapi_v3_index(catalog: ResourceCatalog) -> dict[str, Any]:
    return _build(catalog, None).index


def openapi_v3_document(
    catalog: ResourceCatalog, path: str, extra_definitions: Mapping[str, Any] | None = None
) -> bytes | None:
    return _build(catalog, extra_definitions).documents.get(path.strip("/"))
