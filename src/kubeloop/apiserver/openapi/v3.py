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
from kubeloop.apiserver.catalog.mediatypes import APPLY_PATCH, JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType

Node = dict[str, Any]

_REF_PREFIX = "#/components/schemas/"
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
STATUS = _META + "Status"
DELETE_OPTIONS = _META + "DeleteOptions"
WATCH_EVENT = _META + "WatchEvent"
PATCH = _META + "Patch"
API_RESOURCE_LIST = _META + "APIResourceList"
OBJECT_META = _META + "ObjectMeta"
LIST_META = _META + "ListMeta"
SCALE = "io.k8s.api.autoscaling.v1.Scale"
_SCALE_GVK = {"group": "autoscaling", "kind": "Scale", "version": "v1"}


_RESPONSE_MEDIA = ("application/json", "application/yaml")
_WATCH_MEDIA = "application/json;stream=watch"
#: JSON-schema keywords OpenAPI 3.0 does not have.
_DROPPED_KEYS = frozenset({"$schema", "$id", "id", "$defs", "definitions", "$comment"})
#: Bumped whenever the generated shape changes, so cached documents are rebuilt.
_FORMAT_VERSION = 1


# --------------------------------------------------------------------------- schema conversion


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
            ref = _REF_PREFIX + _ref_name(value)
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
        if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
            found.add(ref[len(_REF_PREFIX) :])
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


# --------------------------------------------------------------------------- extra definitions


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


# --------------------------------------------------------------------------- naming


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _group_words(group: str) -> list[str]:
    if not group:
        return ["core"]
    trimmed = group.removesuffix(".k8s.io")
    return [word for part in trimmed.split(".") for word in part.split("-") if word]


def _gv_camel(group: str, version: str) -> str:
    """Upstream's operationId infix: ``CoreV1``, ``AppsV1``, ``RbacAuthorizationV1``, ``StableExampleComV1``."""
    return "".join(word[:1].upper() + word[1:] for word in _group_words(group)) + version.capitalize()


def _tag(group: str, version: str) -> str:
    """Upstream's tag: ``core_v1``, ``apps_v1``, ``rbacAuthorization_v1``."""
    words = _group_words(group)
    head = words[0] + "".join(word[:1].upper() + word[1:] for word in words[1:])
    return f"{head}_{version}"


def _crd_definition_name(group: str, version: str, kind: str) -> str:
    """Upstream's name of a custom resource's definition: ``com.example.stable.v1.CronTab``."""
    reversed_group = ".".join(reversed(group.split("."))) if group else "core"
    return f"{reversed_group}.{version}.{kind}"


# --------------------------------------------------------------------------- parameters

_PARAMETERS: dict[str, tuple[str, str]] = {
    "allowWatchBookmarks": (
        "boolean",
        'allowWatchBookmarks requests watch events with type "BOOKMARK". Servers that do not implement '
        "bookmarks may ignore this flag and bookmarks are sent at the server's discretion. If this is "
        "not a watch, this field is ignored.",
    ),
    "continue": (
        "string",
        "The continue option should be set when retrieving more results from the server. Since this "
        "value is server defined, clients may only use the continue value from a previous query result "
        "with identical query parameters (except for the value of continue). An expired continue value "
        "is answered with 410 ResourceExpired. This field is not supported when watch is true.",
    ),
    "dryRun": (
        "string",
        "When present, indicates that modifications should not be persisted. An invalid or "
        "unrecognized dryRun directive will result in an error response and no further processing of "
        "the request. Valid values are: - All: all dry run stages will be processed",
    ),
    "fieldManager": (
        "string",
        "fieldManager is a name associated with the actor or entity that is making these changes. The "
        "value must be less than or 128 characters long, and only contain printable characters.",
    ),
    "fieldManagerApply": (
        "string",
        "fieldManager is a name associated with the actor or entity that is making these changes. The "
        "value must be less than or 128 characters long, and only contain printable characters. This "
        "field is required for apply requests (application/apply-patch) but optional for non-apply patch "
        "types (JsonPatch, MergePatch, StrategicMergePatch).",
    ),
    "fieldSelector": (
        "string",
        "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
    ),
    "fieldValidation": (
        "string",
        "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) "
        "containing unknown or duplicate fields. Valid values are: - Ignore: unknown fields are "
        "silently dropped. - Warn: a warning is sent via the standard warning response header for each "
        "unknown or duplicate field; this is the default. - Strict: the request fails with a BadRequest "
        "error if any unknown or duplicate fields are present.",
    ),
    "force": (
        "boolean",
        'Force is going to "force" Apply requests. It means user will re-acquire conflicting fields '
        "owned by other people. Force flag must be unset for non-apply patch requests.",
    ),
    "gracePeriodSeconds": (
        "integer",
        "The duration in seconds before the object should be deleted. Value must be non-negative "
        "integer. The value zero indicates delete immediately.",
    ),
    "ignoreStoreReadErrorWithClusterBreakingPotential": (
        "boolean",
        "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion "
        "flow fails with a corrupt object error.",
    ),
    "labelSelector": (
        "string",
        "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
    ),
    "limit": (
        "integer",
        "limit is a maximum number of responses to return for a list call. If more items exist, the "
        "server will set the `continue` field on the list metadata to a value that can be used with "
        "the same initial query to retrieve the next set of results. This field is not supported if "
        "watch is true.",
    ),
    "orphanDependents": (
        "boolean",
        "Deprecated: please use the PropagationPolicy. Should the dependent objects be orphaned.",
    ),
    "pretty": ("string", "If 'true', then the output is pretty printed."),
    "propagationPolicy": (
        "string",
        "Whether and how garbage collection will be performed. Acceptable values are: 'Orphan' - orphan "
        "the dependents; 'Background' - allow the garbage collector to delete the dependents in the "
        "background; 'Foreground' - a cascading policy that deletes all dependents in the foreground.",
    ),
    "resourceVersion": (
        "string",
        "resourceVersion sets a constraint on what resource versions a request may be served from. See "
        "https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.",
    ),
    "resourceVersionMatch": (
        "string",
        "resourceVersionMatch determines how resourceVersion is applied to list calls. See "
        "https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.",
    ),
    "sendInitialEvents": (
        "boolean",
        "`sendInitialEvents=true` may be set together with `watch=true`. In that case, the watch stream "
        "will begin with synthetic events to produce the current state of objects in the collection, "
        'followed by a "Bookmark" event annotated with `"k8s.io/initial-events-end": "true"`. Requires '
        "`resourceVersionMatch=NotOlderThan`.",
    ),
    "timeoutSeconds": (
        "integer",
        "Timeout for the list/watch call. This limits the duration of the call, regardless of any "
        "activity or inactivity.",
    ),
    "watch": (
        "boolean",
        "Watch for changes to the described resources and return them as a stream of add, update, and "
        "remove notifications. Specify resourceVersion.",
    ),
}

_LIST_PARAMS = (
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
)
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
_PATCH_PARAMS = ("dryRun", "fieldManagerApply", "fieldValidation", "force")
_DELETE_PARAMS = (
    "dryRun",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "orphanDependents",
    "propagationPolicy",
)
_DELETECOLLECTION_PARAMS = (
    "continue",
    "dryRun",
    "fieldSelector",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "labelSelector",
    "limit",
    "orphanDependents",
    "propagationPolicy",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
)


def _query(name: str) -> Node:
    kind, description = _PARAMETERS[name]
    wire = "fieldManager" if name == "fieldManagerApply" else name
    return {
        "description": description,
        "in": "query",
        "name": wire,
        "schema": {"type": kind, "uniqueItems": True},
    }


def _queries(names: Iterable[str]) -> list[Node]:
    return [_query(name) for name in names]


def _path_param(name: str, description: str) -> Node:
    return {
        "description": description,
        "in": "path",
        "name": name,
        "required": True,
        "schema": {"type": "string", "uniqueItems": True},
    }


_NAMESPACE_PARAM = _path_param("namespace", "object name and auth scope, such as for teams and projects")


# --------------------------------------------------------------------------- operations


def _ref(name: str) -> Node:
    return {"$ref": _REF_PREFIX + name}


def _content(schema_name: str, media: Iterable[str] = _RESPONSE_MEDIA) -> Node:
    return {m: {"schema": _ref(schema_name)} for m in media}


def _responses(schema_name: str, codes: Iterable[str], media: Iterable[str] = _RESPONSE_MEDIA) -> Node:
    descriptions = {"200": "OK", "201": "Created", "202": "Accepted"}
    media = tuple(media)
    out: Node = {
        code: {"content": _content(schema_name, media), "description": descriptions[code]} for code in codes
    }
    out["401"] = {"description": "Unauthorized"}
    return out


@dataclass(frozen=True)
class _Names:
    """Everything the paths of one resource refer to."""

    resource: ResourceType
    kind_schema: str
    list_schema: str
    builtin: bool

    @property
    def gvk(self) -> Node:
        r = self.resource
        return {"group": r.group, "kind": r.kind, "version": r.version}


@dataclass(frozen=True)
class _Op:
    verb: str  # operationId verb: list, create, read, replace, patch, delete, watch
    suffix: str  # operationId tail after the group-version: NamespacedDeploymentStatus
    action: str  # x-kubernetes-action
    description: str
    responses: Node
    params: tuple[str, ...] = ()
    body: Node | None = None
    gvk: Node | None = None


def _operation(names: _Names, op: _Op) -> Node:
    r = names.resource
    out: Node = {
        "description": op.description,
        "operationId": f"{op.verb}{_gv_camel(r.group, r.version)}{op.suffix}",
        "responses": op.responses,
        "tags": [_tag(r.group, r.version)],
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": op.gvk or names.gvk,
    }
    if op.params:
        out["parameters"] = _queries(op.params)
    if op.body is not None:
        out["requestBody"] = op.body
    return out


def _patch_body(builtin: bool) -> Node:
    media = [APPLY_PATCH, JSON_PATCH, MERGE_PATCH]
    if builtin:  # strategic merge patch needs the Go types: built-in kinds only
        media.append(STRATEGIC_MERGE_PATCH)
    return {"content": {m: {"schema": _ref(PATCH)} for m in sorted(media)}, "required": True}


def _write_body(schema_name: str) -> Node:
    return {"content": {"*/*": {"schema": _ref(schema_name)}}, "required": True}


_DELETE_BODY: Node = {"content": {"*/*": {"schema": _ref(DELETE_OPTIONS)}}}
_LIST_MEDIA = (*_RESPONSE_MEDIA, _WATCH_MEDIA)


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _resource_paths(names: _Names) -> dict[str, Node]:
    r = names.resource
    verbs = set(r.verbs)
    root = "/" + _gv_path(r.group, r.version)
    scoped = ("Namespaced" if r.namespaced else "") + r.kind
    kind, kind_schema, list_schema = r.kind, names.kind_schema, names.list_schema
    scope_params = [_NAMESPACE_PARAM] if r.namespaced else []
    collection = f"{root}/namespaces/{{namespace}}/{r.plural}" if r.namespaced else f"{root}/{r.plural}"
    item = f"{collection}/{{name}}"
    name_param = _path_param("name", f"name of the {kind}")
    pretty = _query("pretty")
    paths: dict[str, Node] = {}

    # Collection: list, create, deletecollection.
    coll: Node = {}
    if "list" in verbs:
        coll["get"] = _operation(
            names,
            _Op("list", scoped, "list", f"list or watch objects of kind {kind}",
                _responses(list_schema, ("200",), _LIST_MEDIA), _LIST_PARAMS),
        )  # fmt: skip
    if "create" in verbs:
        coll["post"] = _operation(
            names,
            _Op("create", scoped, "post", f"create {_article(kind)} {kind}",
                _responses(kind_schema, ("200", "201", "202")), _WRITE_PARAMS, _write_body(kind_schema)),
        )  # fmt: skip
    if "deletecollection" in verbs:
        coll["delete"] = _operation(
            names,
            _Op("delete", f"Collection{scoped}", "deletecollection", f"delete collection of {kind}",
                _responses(STATUS, ("200",)), _DELETECOLLECTION_PARAMS, _DELETE_BODY),
        )  # fmt: skip
    if coll:
        paths[collection] = {**coll, "parameters": [*scope_params, pretty]}

    # Every namespace at once.
    if r.namespaced and "list" in verbs:
        paths[f"{root}/{r.plural}"] = {
            "get": _operation(
                names,
                _Op("list", f"{kind}ForAllNamespaces", "list", f"list or watch objects of kind {kind}",
                    _responses(list_schema, ("200",), _LIST_MEDIA)),
            ),
            "parameters": [*_queries(_LIST_PARAMS), pretty],
        }  # fmt: skip

    # Item: read, replace, patch, delete.
    single: Node = {}
    if "get" in verbs:
        single["get"] = _operation(
            names, _Op("read", scoped, "get", f"read the specified {kind}", _responses(kind_schema, ("200",)))
        )
    if "update" in verbs:
        single["put"] = _operation(
            names,
            _Op("replace", scoped, "put", f"replace the specified {kind}",
                _responses(kind_schema, ("200", "201")), _WRITE_PARAMS, _write_body(kind_schema)),
        )  # fmt: skip
    if "patch" in verbs:
        single["patch"] = _operation(
            names,
            _Op("patch", scoped, "patch", f"partially update the specified {kind}",
                _responses(kind_schema, ("200", "201")), _PATCH_PARAMS, _patch_body(names.builtin)),
        )  # fmt: skip
    if "delete" in verbs:
        deleted = kind_schema if r.returns_deleted_object else STATUS
        single["delete"] = _operation(
            names,
            _Op("delete", scoped, "delete", f"delete {_article(kind)} {kind}",
                _responses(deleted, ("200", "202")), _DELETE_PARAMS, _DELETE_BODY),
        )  # fmt: skip
    if single:
        paths[item] = {**single, "parameters": [name_param, *scope_params, pretty]}

    # Subresources.
    for sub in r.subresources:
        suffix = scoped + sub.capitalize()
        if sub in ("status", "scale"):
            schema_name, gvk = (SCALE, _SCALE_GVK) if sub == "scale" else (kind_schema, None)
            what = f"{sub} of the specified {kind}"
            paths[f"{item}/{sub}"] = {
                "get": _operation(
                    names, _Op("read", suffix, "get", f"read {what}", _responses(schema_name, ("200",)), gvk=gvk)
                ),
                "patch": _operation(
                    names,
                    _Op("patch", suffix, "patch", f"partially update {what}",
                        _responses(schema_name, ("200", "201")), _PATCH_PARAMS, _patch_body(names.builtin), gvk),
                ),
                "put": _operation(
                    names,
                    _Op("replace", suffix, "put", f"replace {what}",
                        _responses(schema_name, ("200", "201")), _WRITE_PARAMS, _write_body(schema_name), gvk),
                ),
                "parameters": [name_param, *scope_params, pretty],
            }  # fmt: skip
        elif sub == "finalize":
            paths[f"{item}/finalize"] = {
                "put": _operation(
                    names,
                    _Op("replace", suffix, "put", f"replace finalize of the specified {kind}",
                        _responses(kind_schema, ("200", "201")), _WRITE_PARAMS, _write_body(kind_schema)),
                ),
                "parameters": [name_param, *scope_params, pretty],
            }  # fmt: skip

    # The deprecated /watch/ paths, still served and documented upstream.
    if "watch" in verbs:
        list_params = _queries(_LIST_PARAMS)
        watched = _responses(WATCH_EVENT, ("200",), _LIST_MEDIA)
        deprecated = "deprecated: use the 'watch' parameter with a list operation instead"
        watch_root = (
            f"{root}/watch/namespaces/{{namespace}}/{r.plural}"
            if r.namespaced
            else f"{root}/watch/{r.plural}"
        )
        paths[watch_root] = {
            "get": _operation(
                names,
                _Op("watch", f"{scoped}List", "watchlist",
                    f"watch individual changes to a list of {kind}. {deprecated}.", watched),
            ),
            "parameters": [*list_params, *scope_params, pretty],
        }  # fmt: skip
        paths[f"{watch_root}/{{name}}"] = {
            "get": _operation(
                names,
                _Op("watch", scoped, "watch",
                    f"watch changes to an object of kind {kind}. {deprecated}, filtered to a single item with "
                    "the 'fieldSelector' parameter.", watched),
            ),
            "parameters": [*list_params, name_param, *scope_params, pretty],
        }  # fmt: skip
        if r.namespaced:
            paths[f"{root}/watch/{r.plural}"] = {
                "get": _operation(
                    names,
                    _Op("watch", f"{kind}ListForAllNamespaces", "watchlist",
                        f"watch individual changes to a list of {kind}. {deprecated}.", watched),
                ),
                "parameters": [*list_params, pretty],
            }  # fmt: skip
    return paths


# --------------------------------------------------------------------------- documents

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
            "metadata": {"allOf": [_ref(OBJECT_META)], "description": "Standard object's metadata."},
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
                "items": _ref(item_schema),
                "type": "array",
            },
            "kind": dict(_KIND_PROP),
            "metadata": {"allOf": [_ref(LIST_META)], "description": "Standard list metadata."},
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
        f"/{_gv_path(group, version)}/": {
            "get": {
                "description": "get available resources",
                "operationId": f"get{_gv_camel(group, version)}APIResources",
                "responses": _responses(API_RESOURCE_LIST, ("200",)),
                "tags": [_tag(group, version)],
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
        paths.update(_resource_paths(_Names(resource, kind_schema, list_schema, builtin)))

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


# --------------------------------------------------------------------------- caches

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
        path = _gv_path(group, version)
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
        properties["metadata"] = {"allOf": [_ref(OBJECT_META)], "description": "Standard object's metadata."}
        schema["properties"] = properties
        schema["x-kubernetes-group-version-kind"] = [{"group": group, "kind": kind, "version": name}]
        kind_name = _crd_definition_name(group, name, kind)
        out[kind_name] = schema
        out[_crd_definition_name(group, name, f"{kind}List")] = _generic_list_schema(
            group, name, kind, kind_name
        )
    return out
