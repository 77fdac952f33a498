"""OpenAPI v3 documents: one per group/version, what kubectl 1.29+ and ``kubectl explain`` read,
checked against upstream's shapes and an OpenAPI validator; CRD schemas converted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.groups import builtin_resources
from kubeloop.apiserver.openapi import v3


def walk(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def document(catalog: ResourceCatalog, path: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    raw = v3.openapi_v3_document(catalog, path, extra)
    assert raw is not None, path
    parsed: dict[str, Any] = orjson.loads(raw)
    return parsed


def test_index_lists_every_group_version(catalog: ResourceCatalog) -> None:
    index = v3.openapi_v3_index(catalog)
    paths = index["paths"]
    expected = {f"apis/{r.group}/{r.version}" if r.group else f"api/{r.version}" for r in builtin_resources()}
    assert set(paths) == expected
    assert "api/v1" in paths and "apis/apps/v1" in paths
    for path, entry in paths.items():
        url = entry["serverRelativeURL"]
        assert url.startswith(f"/openapi/v3/{path}?hash=")
        raw = v3.openapi_v3_document(catalog, path)
        assert raw is not None
        assert url.endswith(v3.document_hash(raw))
    assert v3.openapi_v3_index(ResourceCatalog(builtin_resources())) == index  # stable content hash


def test_document_paths_are_tolerant_and_unknown_ones_are_none(catalog: ResourceCatalog) -> None:
    raw = v3.openapi_v3_document(catalog, "apis/apps/v1")
    assert raw is not None
    assert v3.openapi_v3_document(catalog, "/apis/apps/v1") == raw
    assert v3.openapi_v3_document(catalog, "apis/apps/v1?hash=ABC") == raw
    assert v3.openapi_v3_document(catalog, "openapi/v3/apis/apps/v1") == raw
    for missing in ("apis/apps/v2", "apis/nope/v1", "api/v2", "apis", "api", "version", ""):
        assert v3.openapi_v3_document(catalog, missing) is None


def test_documents_are_cached(catalog: ResourceCatalog) -> None:
    first = v3.openapi_v3_document(catalog, "apis/apps/v1")
    second = v3.openapi_v3_document(ResourceCatalog(builtin_resources()), "apis/apps/v1")
    assert second is first  # the same object: built once (bench/openapi_documents.py times a build)


def test_catalog_change_rebuilds_only_the_changed_document(catalog: ResourceCatalog) -> None:
    before = v3.openapi_v3_index(catalog)["paths"]
    changed = ResourceCatalog(builtin_resources())
    changed.remove(changed.lookup("apps", "v1", "daemonsets"))  # type: ignore[arg-type]
    after = v3.openapi_v3_index(changed)["paths"]
    assert after["apis/apps/v1"] != before["apis/apps/v1"]
    assert after["api/v1"] == before["api/v1"]
    apps = document(changed, "apis/apps/v1")
    assert not any("daemonsets" in path for path in apps["paths"])


def query_param_supported(doc: dict[str, Any], gvk: dict[str, str], param: str) -> bool:
    """cli-runtime's supportsQueryParamV3: the first PATCH operation of the GVK decides."""
    for item in doc["paths"].values():
        op = item.get("patch")
        if op is None or op.get("x-kubernetes-group-version-kind") != gvk:
            continue
        return any(p["name"] == param and p["in"] == "query" for p in op.get("parameters", []))
    raise AssertionError(f"no PATCH path for {gvk}")


def test_apps_v1_deployment_patch(catalog: ResourceCatalog) -> None:
    doc = document(catalog, "apis/apps/v1")
    gvk = {"group": "apps", "kind": "Deployment", "version": "v1"}
    assert query_param_supported(doc, gvk, "fieldValidation")
    item = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
    patch = item["patch"]
    assert patch["x-kubernetes-action"] == "patch"
    assert patch["x-kubernetes-group-version-kind"] == gvk
    assert patch["operationId"] == "patchAppsV1NamespacedDeployment"
    names = [p["name"] for p in patch["parameters"]]
    assert names == ["dryRun", "fieldManager", "fieldValidation", "force"]
    assert set(patch["requestBody"]["content"]) == {
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    }
    assert {p["name"] for p in item["parameters"]} == {"name", "namespace", "pretty"}
    assert {"get", "put", "patch", "delete"} <= set(item)
    scale = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
    assert scale["patch"]["x-kubernetes-group-version-kind"] == {
        "group": "autoscaling",
        "kind": "Scale",
        "version": "v1",
    }
    status = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status"]
    assert status["put"]["x-kubernetes-action"] == "put"
    assert status["get"]["operationId"] == "readAppsV1NamespacedDeploymentStatus"


def test_list_operations_carry_the_list_parameters(catalog: ResourceCatalog) -> None:
    doc = document(catalog, "apis/apps/v1")
    listing = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments"]
    names = {p["name"] for p in listing["get"]["parameters"]}
    assert names == {
        "watch",
        "labelSelector",
        "fieldSelector",
        "limit",
        "continue",
        "resourceVersion",
        "resourceVersionMatch",
        "allowWatchBookmarks",
        "sendInitialEvents",
        "timeoutSeconds",
    }
    assert listing["get"]["x-kubernetes-action"] == "list"
    assert listing["post"]["x-kubernetes-action"] == "post"
    assert listing["delete"]["x-kubernetes-action"] == "deletecollection"
    all_namespaces = doc["paths"]["/apis/apps/v1/deployments"]
    assert all_namespaces["get"]["operationId"] == "listAppsV1DeploymentForAllNamespaces"
    assert "watch" in {p["name"] for p in all_namespaces["parameters"]}
    assert (
        doc["paths"]["/apis/apps/v1/watch/namespaces/{namespace}/deployments/{name}"]["get"][
            "x-kubernetes-action"
        ]
        == "watch"
    )


@pytest.mark.parametrize(
    "path", ["api/v1", "apis/apps/v1", "apis/batch/v1", "apis/rbac.authorization.k8s.io/v1"]
)
def test_every_patch_supports_field_validation(catalog: ResourceCatalog, path: str) -> None:
    doc = document(catalog, path)
    for item in doc["paths"].values():
        if "patch" in item:
            gvk = item["patch"]["x-kubernetes-group-version-kind"]
            assert query_param_supported(doc, gvk, "fieldValidation")
            assert "application/strategic-merge-patch+json" in item["patch"]["requestBody"]["content"]


def test_core_document_has_namespace_finalize_and_pod_delete(catalog: ResourceCatalog) -> None:
    doc = document(catalog, "api/v1")
    finalize = doc["paths"]["/api/v1/namespaces/{name}/finalize"]
    assert set(finalize) == {"put", "parameters"}
    assert finalize["put"]["operationId"] == "replaceCoreV1NamespaceFinalize"
    pod_delete = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["delete"]
    ref = pod_delete["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert ref == "#/components/schemas/io.k8s.api.core.v1.Pod"
    cm_delete = doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["delete"]
    ref = cm_delete["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert ref == "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Status"
    assert "/api/v1/namespaces" in doc["paths"]  # cluster-scoped collection
    assert "/api/v1/namespaces/{name}" in doc["paths"]


@pytest.mark.parametrize(
    "path",
    [
        "api/v1",
        "apis/apps/v1",
        "apis/batch/v1",
        "apis/coordination.k8s.io/v1",
        "apis/events.k8s.io/v1",
        "apis/rbac.authorization.k8s.io/v1",
    ],
)
def test_document_is_structurally_openapi3_without_dangling_refs(catalog: ResourceCatalog, path: str) -> None:
    doc = document(catalog, path)
    assert doc["openapi"].startswith("3.0")
    assert doc["info"]["title"] and doc["info"]["version"]
    assert isinstance(doc["paths"], dict) and doc["paths"]
    component_schemas = doc["components"]["schemas"]
    for node in walk(doc):
        if isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            assert ref.startswith("#/components/schemas/"), ref
            assert ref.removeprefix("#/components/schemas/") in component_schemas, ref
            assert set(node) == {"$ref"}, node  # OpenAPI 3.0 ignores siblings of $ref
    for name, schema in component_schemas.items():
        for node in walk(schema):
            if isinstance(node, dict):
                kind = node.get("type")
                assert kind is None or isinstance(kind, (str, dict)), (name, node)
                assert "$defs" not in node
    for route, item in doc["paths"].items():
        assert route.startswith("/")
        for method, op in item.items():
            if method == "parameters":
                for param in op:
                    assert {"name", "in", "schema"} <= set(param)
                continue
            assert method in {"get", "put", "post", "patch", "delete"}
            assert op["responses"]
            if method != "get" or route.endswith("/"):
                continue
            assert op["x-kubernetes-action"] in {"get", "list", "watch", "watchlist"}
            assert set(op["x-kubernetes-group-version-kind"]) == {"group", "version", "kind"}


def test_openapi_spec_validator_accepts_the_documents(catalog: ResourceCatalog) -> None:
    import openapi_spec_validator as validator  # a test dependency: never skipped

    for path in ("apis/apps/v1", "apis/coordination.k8s.io/v1"):
        validator.validate(document(catalog, path))


def resolve(doc: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while True:
        if "$ref" in node:
            node = doc["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
        elif "allOf" in node and len(node["allOf"]) == 1 and "properties" not in node:
            node = node["allOf"][0]
        else:
            return node


def test_components_serve_kubectl_explain(catalog: ResourceCatalog) -> None:
    doc = document(catalog, "apis/apps/v1")
    component_schemas = doc["components"]["schemas"]
    deployment = component_schemas["io.k8s.api.apps.v1.Deployment"]
    gvk = {"group": "apps", "kind": "Deployment", "version": "v1"}
    assert gvk in deployment["x-kubernetes-group-version-kind"]
    assert deployment["type"] == "object"
    assert "enum" not in deployment["properties"]["apiVersion"]
    spec = deployment["properties"]["spec"]
    assert spec["allOf"] == [{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}]
    assert spec["description"]
    replicas = resolve(doc, spec)["properties"]["replicas"]
    assert replicas["type"] == "integer" and replicas["format"] == "int32"
    strategy = resolve(doc, spec)["properties"]["strategy"]
    assert strategy["x-kubernetes-patch-strategy"] == "retainKeys"
    containers = resolve(
        doc, resolve(doc, resolve(doc, spec)["properties"]["template"])["properties"]["spec"]
    )
    containers = containers["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-list-type"] == "map"
    int_or_string = component_schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]
    assert int_or_string["format"] == "int-or-string"
    assert int_or_string["x-kubernetes-int-or-string"] is True
    assert int_or_string["oneOf"] == [{"type": "integer"}, {"type": "string"}]
    quantity = component_schemas["io.k8s.apimachinery.pkg.api.resource.Quantity"]
    assert quantity["oneOf"] == [{"type": "string"}, {"type": "number"}]
    for meta in ("DeleteOptions", "Status", "WatchEvent", "Patch", "APIResourceList", "ObjectMeta"):
        assert f"io.k8s.apimachinery.pkg.apis.meta.v1.{meta}" in component_schemas
    assert "io.k8s.api.autoscaling.v1.Scale" in component_schemas
    assert "io.k8s.api.core.v1.PodSpec" in component_schemas
    assert not any(name.startswith("io.k8s.api.batch.") for name in component_schemas)
    for node in walk(component_schemas):
        if isinstance(node, dict) and isinstance(node.get("type"), str):
            assert node["type"] != "null"
        assert not (isinstance(node, dict) and "nullable" in node)


def test_convert_schema() -> None:
    converted = v3.convert_schema(
        {
            "type": ["object", "null"],
            "properties": {
                "a": {"$ref": "#/$defs/X"},
                "b": {"$ref": "#/$defs/Y", "description": "why"},
                "c": {"oneOf": [{"type": ["string", "null"]}, {"type": ["integer", "null"]}]},
                "d": {"type": "string", "nullable": True},
                "e": {"const": 3},
            },
            "additionalProperties": {"type": ["string", "null"]},
        }
    )
    assert converted == {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/components/schemas/X"},
            "b": {"allOf": [{"$ref": "#/components/schemas/Y"}], "description": "why"},
            "c": {
                "oneOf": [{"type": "integer"}, {"type": "string"}],
                "format": "int-or-string",
                "x-kubernetes-int-or-string": True,
            },
            "d": {"type": "string", "nullable": True},
            "e": {"enum": [3]},
        },
        "additionalProperties": {"type": "string"},
    }


CRD_SCHEMA = {
    "type": "object",
    "x-kubernetes-group-version-kind": [{"group": "stable.example.com", "kind": "CronTab", "version": "v1"}],
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
        "spec": {
            "type": "object",
            "properties": {
                "cronSpec": {"type": "string"},
                "port": {
                    "x-kubernetes-int-or-string": True,
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                },
            },
        },
    },
}


def crd_catalog() -> ResourceCatalog:
    catalog = ResourceCatalog(builtin_resources())
    catalog.add(
        ResourceType(
            "stable.example.com",
            "v1",
            "crontabs",
            "crontab",
            "CronTab",
            True,
            subresources=("status", "scale"),
        )
    )
    return catalog


def test_custom_resource_with_extra_definitions() -> None:
    catalog = crd_catalog()
    extra = {"com.example.stable.v1.CronTab": CRD_SCHEMA}
    index = v3.openapi_v3_index(catalog, extra)
    assert "apis/stable.example.com/v1" in index["paths"]
    doc = document(catalog, "apis/stable.example.com/v1", extra)
    gvk = {"group": "stable.example.com", "kind": "CronTab", "version": "v1"}
    assert query_param_supported(doc, gvk, "fieldValidation")
    patch = doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"]["patch"]
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    assert "application/merge-patch+json" in patch["requestBody"]["content"]
    assert patch["operationId"] == "patchStableExampleComV1NamespacedCronTab"
    assert patch["tags"] == ["stableExampleCom_v1"]
    component_schemas = doc["components"]["schemas"]
    crontab = component_schemas["com.example.stable.v1.CronTab"]
    assert crontab["properties"]["spec"]["properties"]["port"]["x-kubernetes-int-or-string"] is True
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in component_schemas
    assert "com.example.stable.v1.CronTabList" in component_schemas  # synthesised
    for node in walk(doc):
        if isinstance(node, dict) and "$ref" in node:
            assert node["$ref"].removeprefix("#/components/schemas/") in component_schemas
    # A changed CRD schema changes the index hash.
    changed = {"com.example.stable.v1.CronTab": {**CRD_SCHEMA, "description": "changed"}}
    assert v3.openapi_v3_index(catalog, changed) != index


def test_custom_resource_without_schema_gets_a_generic_one() -> None:
    catalog = crd_catalog()
    doc = document(catalog, "apis/stable.example.com/v1")
    component_schemas = doc["components"]["schemas"]
    crontab = component_schemas["com.example.stable.v1.CronTab"]
    assert crontab["x-kubernetes-preserve-unknown-fields"] is True
    assert crontab["x-kubernetes-group-version-kind"] == [
        {"group": "stable.example.com", "kind": "CronTab", "version": "v1"}
    ]
    for node in walk(doc):
        if isinstance(node, dict) and "$ref" in node:
            assert node["$ref"].removeprefix("#/components/schemas/") in component_schemas
