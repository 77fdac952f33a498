"""The ``paths`` of an OpenAPI v3 group-version document, shaped like upstream's: every resource's
and subresource's operations with their ``x-kubernetes-action`` and group-version-kind, the list,
write, patch and delete parameters, request bodies by media type and responses.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubeloop.apiserver.catalog.mediatypes import APPLY_PATCH, JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH
from kubeloop.apiserver.catalog.resources import ResourceType

Node = dict[str, Any]

REF_PREFIX = "#/components/schemas/"

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


def gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _group_words(group: str) -> list[str]:
    if not group:
        return ["core"]
    trimmed = group.removesuffix(".k8s.io")
    return [word for part in trimmed.split(".") for word in part.split("-") if word]


def gv_camel(group: str, version: str) -> str:
    """Upstream's operationId infix: ``CoreV1``, ``AppsV1``, ``RbacAuthorizationV1``, ``StableExampleComV1``."""
    return "".join(word[:1].upper() + word[1:] for word in _group_words(group)) + version.capitalize()


def operation_tag(group: str, version: str) -> str:
    """Upstream's tag: ``core_v1``, ``apps_v1``, ``rbacAuthorization_v1``."""
    words = _group_words(group)
    head = words[0] + "".join(word[:1].upper() + word[1:] for word in words[1:])
    return f"{head}_{version}"


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


def schema_ref(name: str) -> Node:
    return {"$ref": REF_PREFIX + name}


def _content(schema_name: str, media: Iterable[str] = _RESPONSE_MEDIA) -> Node:
    return {m: {"schema": schema_ref(schema_name)} for m in media}


def operation_responses(
    schema_name: str, codes: Iterable[str], media: Iterable[str] = _RESPONSE_MEDIA
) -> Node:
    descriptions = {"200": "OK", "201": "Created", "202": "Accepted"}
    media = tuple(media)
    out: Node = {
        code: {"content": _content(schema_name, media), "description": descriptions[code]} for code in codes
    }
    out["401"] = {"description": "Unauthorized"}
    return out


@dataclass(frozen=True)
class Names:
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


def _operation(names: Names, op: _Op) -> Node:
    r = names.resource
    out: Node = {
        "description": op.description,
        "operationId": f"{op.verb}{gv_camel(r.group, r.version)}{op.suffix}",
        "responses": op.responses,
        "tags": [operation_tag(r.group, r.version)],
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
    return {"content": {m: {"schema": schema_ref(PATCH)} for m in sorted(media)}, "required": True}


def _write_body(schema_name: str) -> Node:
    return {"content": {"*/*": {"schema": schema_ref(schema_name)}}, "required": True}


_DELETE_BODY: Node = {"content": {"*/*": {"schema": schema_ref(DELETE_OPTIONS)}}}

_LIST_MEDIA = (*_RESPONSE_MEDIA, _WATCH_MEDIA)


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def resource_paths(names: Names) -> dict[str, Node]:
    r = names.resource
    verbs = set(r.verbs)
    root = "/" + gv_path(r.group, r.version)
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
                operation_responses(list_schema, ("200",), _LIST_MEDIA), _LIST_PARAMS),
        )  # fmt: skip
    if "create" in verbs:
        coll["post"] = _operation(
            names,
            _Op("create", scoped, "post", f"create {_article(kind)} {kind}",
                operation_responses(kind_schema, ("200", "201", "202")), _WRITE_PARAMS, _write_body(kind_schema)),
        )  # fmt: skip
    if "deletecollection" in verbs:
        coll["delete"] = _operation(
            names,
            _Op("delete", f"Collection{scoped}", "deletecollection", f"delete collection of {kind}",
                operation_responses(STATUS, ("200",)), _DELETECOLLECTION_PARAMS, _DELETE_BODY),
        )  # fmt: skip
    if coll:
        paths[collection] = {**coll, "parameters": [*scope_params, pretty]}

    # Every namespace at once.
    if r.namespaced and "list" in verbs:
        paths[f"{root}/{r.plural}"] = {
            "get": _operation(
                names,
                _Op("list", f"{kind}ForAllNamespaces", "list", f"list or watch objects of kind {kind}",
                    operation_responses(list_schema, ("200",), _LIST_MEDIA)),
            ),
            "parameters": [*_queries(_LIST_PARAMS), pretty],
        }  # fmt: skip

    # Item: read, replace, patch, delete.
    single: Node = {}
    if "get" in verbs:
        single["get"] = _operation(
            names,
            _Op(
                "read",
                scoped,
                "get",
                f"read the specified {kind}",
                operation_responses(kind_schema, ("200",)),
            ),
        )
    if "update" in verbs:
        single["put"] = _operation(
            names,
            _Op("replace", scoped, "put", f"replace the specified {kind}",
                operation_responses(kind_schema, ("200", "201")), _WRITE_PARAMS, _write_body(kind_schema)),
        )  # fmt: skip
    if "patch" in verbs:
        single["patch"] = _operation(
            names,
            _Op("patch", scoped, "patch", f"partially update the specified {kind}",
                operation_responses(kind_schema, ("200", "201")), _PATCH_PARAMS, _patch_body(names.builtin)),
        )  # fmt: skip
    if "delete" in verbs:
        deleted = kind_schema if r.returns_deleted_object else STATUS
        single["delete"] = _operation(
            names,
            _Op("delete", scoped, "delete", f"delete {_article(kind)} {kind}",
                operation_responses(deleted, ("200", "202")), _DELETE_PARAMS, _DELETE_BODY),
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
                    names, _Op("read", suffix, "get", f"read {what}", operation_responses(schema_name, ("200",)), gvk=gvk)
                ),
                "patch": _operation(
                    names,
                    _Op("patch", suffix, "patch", f"partially update {what}",
                        operation_responses(schema_name, ("200", "201")), _PATCH_PARAMS, _patch_body(names.builtin), gvk),
                ),
                "put": _operation(
                    names,
                    _Op("replace", suffix, "put", f"replace {what}",
                        operation_responses(schema_name, ("200", "201")), _WRITE_PARAMS, _write_body(schema_name), gvk),
                ),
                "parameters": [name_param, *scope_params, pretty],
            }  # fmt: skip
        elif sub == "finalize":
            paths[f"{item}/finalize"] = {
                "put": _operation(
                    names,
                    _Op("replace", suffix, "put", f"replace finalize of the specified {kind}",
                        operation_responses(kind_schema, ("200", "201")), _WRITE_PARAMS, _write_body(kind_schema)),
                ),
                "parameters": [name_param, *scope_params, pretty],
            }  # fmt: skip

    # The deprecated /watch/ paths, still served and documented upstream.
    if "watch" in verbs:
        list_params = _queries(_LIST_PARAMS)
        watched = operation_responses(WATCH_EVENT, ("200",), _LIST_MEDIA)
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
