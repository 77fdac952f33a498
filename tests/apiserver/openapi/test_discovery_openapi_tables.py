"""Discovery documents, OpenAPI v3 and server-side Tables, checked against upstream's shapes."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.catalog.resources import BUILTIN_RESOURCES, ResourceCatalog, ResourceType
from kubeloop.apiserver.openapi import discoverydocs, v3
from kubeloop.apiserver.printing import tables

NOW = datetime.datetime(2024, 5, 1, 12, 0, 0, tzinfo=datetime.UTC)


def ago(seconds: float) -> str:
    return (NOW - datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def catalog() -> ResourceCatalog:
    return ResourceCatalog()


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


# ----------------------------------------------------------------------------------- discovery


def test_version_info_uses_the_schema_release() -> None:
    release = schemas.schema_release()
    info = discoverydocs.version_info(release)
    major, minor = release.split(".")[:2]
    assert (info["major"], info["minor"]) == (major, minor)
    assert info["gitVersion"] == f"v{release}-kubeloop"
    for key in ("gitCommit", "gitTreeState", "buildDate", "goVersion", "compiler", "platform"):
        assert info[key]
    assert "/" in info["platform"]
    assert discoverydocs.version_info("1.33.0")["gitVersion"] == "v1.33.0-kubeloop"


def test_core_api_versions() -> None:
    versions = discoverydocs.core_api_versions("10.0.0.1:6443")
    assert versions == {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.1:6443"}],
    }


def test_group_list_and_groups(catalog: ResourceCatalog) -> None:
    groups = discoverydocs.api_group_list(catalog)
    assert groups["kind"] == "APIGroupList" and groups["apiVersion"] == "v1"
    names = [g["name"] for g in groups["groups"]]
    expected = {r.group for r in BUILTIN_RESOURCES if r.group}
    assert set(names) == expected
    assert "" not in names
    assert names.index("apps") < names.index("batch")  # kube-apiserver's priority order
    for group in groups["groups"]:
        version = "v2" if group["name"] == "autoscaling" else "v1"
        assert group["preferredVersion"] == {"groupVersion": f"{group['name']}/{version}", "version": version}
        assert group["versions"][0] == group["preferredVersion"]  # the preferred version comes first
    authentication = next(g for g in groups["groups"] if g["name"] == "authentication.k8s.io")
    assert [v["version"] for v in authentication["versions"]] == ["v1", "v1beta1"]
    apps = discoverydocs.api_group(catalog, "apps")
    assert apps is not None
    assert apps["kind"] == "APIGroup" and apps["name"] == "apps"
    assert discoverydocs.api_group(catalog, "nope.example.com") is None
    assert discoverydocs.api_group(catalog, "") is None


def test_preferred_version_is_kube_aware() -> None:
    catalog = ResourceCatalog()
    for version in ("v1beta1", "v2alpha1", "v1", "v10"):
        catalog.add(ResourceType("stable.example.com", version, "widgets", "widget", "Widget", True))
    group = discoverydocs.api_group(catalog, "stable.example.com")
    assert group is not None
    assert [v["version"] for v in group["versions"]] == ["v10", "v1", "v1beta1", "v2alpha1"]
    assert group["preferredVersion"]["version"] == "v10"


@pytest.mark.parametrize("resource", BUILTIN_RESOURCES, ids=lambda r: f"{r.group or 'core'}/{r.plural}")
def test_every_builtin_resource_is_discoverable(catalog: ResourceCatalog, resource: ResourceType) -> None:
    listing = discoverydocs.api_resource_list(catalog, resource.group, resource.version)
    assert listing is not None
    assert listing["kind"] == "APIResourceList"
    assert listing["groupVersion"] == resource.group_version
    entries = {e["name"]: e for e in listing["resources"]}
    entry = entries[resource.plural]
    assert entry["singularName"] == resource.singular
    assert entry["namespaced"] is resource.namespaced
    assert entry["kind"] == resource.kind
    assert entry["verbs"] == list(resource.verbs)
    assert entry.get("shortNames", []) == list(resource.short_names)
    assert entry.get("categories", []) == list(resource.categories)
    # Only stored resources have a storage version (upstream: no hash for reviews, bindings and
    # component statuses).
    assert bool(entry.get("storageVersionHash")) is ("watch" in resource.verbs)
    for sub in resource.subresources:
        sub_entry = entries[f"{resource.plural}/{sub}"]
        assert sub_entry["namespaced"] is resource.namespaced
        assert sub_entry["singularName"] == ""
        assert "shortNames" not in sub_entry


def test_subresource_entries(catalog: ResourceCatalog) -> None:
    apps = discoverydocs.api_resource_list(catalog, "apps", "v1")
    core = discoverydocs.api_resource_list(catalog, "", "v1")
    assert apps is not None and core is not None
    by_name = {e["name"]: e for e in apps["resources"] + core["resources"]}
    assert by_name["deployments/status"] == {
        "name": "deployments/status",
        "singularName": "",
        "namespaced": True,
        "kind": "Deployment",
        "verbs": ["get", "patch", "update"],
    }
    scale = by_name["deployments/scale"]
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    assert scale["verbs"] == ["get", "patch", "update"]
    assert by_name["namespaces/finalize"]["verbs"] == ["update"]
    assert by_name["namespaces/finalize"]["namespaced"] is False
    names = [e["name"] for e in apps["resources"]]
    assert names == sorted(names)
    # Upstream's hash for apps/v1 Deployment.
    assert by_name["deployments"]["storageVersionHash"] == "8aSe+NMegvE="
    assert discoverydocs.api_resource_list(catalog, "apps", "v9") is None


# ----------------------------------------------------------------------------------- openapi


def test_index_lists_every_group_version(catalog: ResourceCatalog) -> None:
    index = v3.openapi_v3_index(catalog)
    paths = index["paths"]
    expected = {f"apis/{r.group}/{r.version}" if r.group else f"api/{r.version}" for r in BUILTIN_RESOURCES}
    assert set(paths) == expected
    assert "api/v1" in paths and "apis/apps/v1" in paths
    for path, entry in paths.items():
        url = entry["serverRelativeURL"]
        assert url.startswith(f"/openapi/v3/{path}?hash=")
        raw = v3.openapi_v3_document(catalog, path)
        assert raw is not None
        assert url.endswith(v3.document_hash(raw))
    assert v3.openapi_v3_index(ResourceCatalog()) == index  # stable content hash


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
    second = v3.openapi_v3_document(ResourceCatalog(), "apis/apps/v1")
    assert second is first  # the same object: built once (bench/openapi_documents.py times a build)


def test_catalog_change_rebuilds_only_the_changed_document(catalog: ResourceCatalog) -> None:
    before = v3.openapi_v3_index(catalog)["paths"]
    changed = ResourceCatalog()
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
    catalog = ResourceCatalog()
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


# ----------------------------------------------------------------------------------- tables


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (1, "1s"),
        (70, "70s"),
        (190, "3m10s"),
        (70 * 60, "70m"),
        (47 * 3600, "47h"),
        (49 * 3600, "2d1h"),
        ((8 * 24 + 2) * 3600, "8d"),
        (367 * 24 * 3600, "367d"),
        ((365 * 2 * 24 + 25) * 3600, "2y1d"),
        ((365 * 8 * 24 + 2) * 3600, "8y"),
        (-2, "<invalid>"),
        (-1.999, "0s"),
        (0, "0s"),
        (0.999, "0s"),
        (119.999, "119s"),
        (120, "2m"),
        (121, "2m1s"),
        (5, "5s"),
        (182, "3m2s"),
        (599.999, "9m59s"),
        (600, "10m"),
        (601, "10m"),
        (3 * 3600 - 0.001, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 60, "3h1m"),
        (8 * 3600 - 0.001, "7h59m"),
        (8 * 3600 + 59 * 60, "8h"),
        (2 * 86400 - 0.001, "47h"),
        (2 * 86400, "2d"),
        (2 * 86400 + 3 * 3600, "2d3h"),
        (8 * 86400 - 0.001, "7d23h"),
        (2 * 365 * 86400 - 0.001, "729d"),
        (2 * 365 * 86400, "2y"),
        (2 * 365 * 86400 + 86400, "2y1d"),
        (3 * 365 * 86400, "3y"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert tables.human_duration(seconds) == text


def pods() -> ResourceType:
    resource = ResourceCatalog().lookup("", "v1", "pods")
    assert resource is not None
    return resource


def pod(name: str, status: dict[str, Any], containers: int = 1, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": ago(300), **metadata},
        "spec": {"containers": [{"name": f"c{i}", "image": "busybox"} for i in range(containers)]},
        "status": status,
    }


def running(name: str, ready: bool = True, restarts: int = 0) -> dict[str, Any]:
    return {
        "name": name,
        "ready": ready,
        "restartCount": restarts,
        "state": {"running": {"startedAt": ago(100)}},
    }


def cells(resource: ResourceType, obj: dict[str, Any]) -> list[Any]:
    table = tables.to_table(resource, [obj], now=NOW)
    row_cells: list[Any] = table["rows"][0]["cells"]
    return row_cells


def test_pod_table_columns() -> None:
    table = tables.to_table(pods(), [], now=NOW, resource_version="7")
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "7"}
    assert table["rows"] == []
    columns = [(c["name"], c["type"], c["priority"]) for c in table["columnDefinitions"]]
    assert columns == [
        ("Name", "string", 0),
        ("Ready", "string", 0),
        ("Status", "string", 0),
        ("Restarts", "string", 0),
        ("Age", "string", 0),
        ("IP", "string", 1),
        ("Node", "string", 1),
        ("Nominated Node", "string", 1),
        ("Readiness Gates", "string", 1),
    ]
    assert table["columnDefinitions"][0]["format"] == "name"
    assert all(c["description"] for c in table["columnDefinitions"])


def test_pod_rows() -> None:
    running_pod = pod(
        "web",
        {
            "phase": "Running",
            "podIPs": [{"ip": "10.1.0.5"}],
            "containerStatuses": [running("c0"), running("c1", ready=False)],
        },
        containers=2,
    )
    running_pod["spec"]["nodeName"] = "node-1"
    assert cells(pods(), running_pod) == [
        "web",
        "1/2",
        "Running",
        "0",
        "5m",
        "10.1.0.5",
        "node-1",
        "<none>",
        "<none>",
    ]

    pending = pod("new", {"phase": "Pending"}, creationTimestamp=ago(5))
    assert cells(pods(), pending)[:5] == ["new", "0/1", "Pending", "0", "5s"]

    crashing = pod(
        "crash",
        {
            "phase": "Running",
            "podIP": "10.1.0.6",
            "containerStatuses": [
                {
                    "name": "c0",
                    "ready": False,
                    "restartCount": 4,
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
                    "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(42)}},
                }
            ],
        },
    )
    assert cells(pods(), crashing)[:6] == [
        "crash",
        "0/1",
        "CrashLoopBackOff",
        "4 (42s ago)",
        "5m",
        "10.1.0.6",
    ]

    terminating = pod(
        "bye",
        {"phase": "Running", "containerStatuses": [running("c0")]},
        deletionTimestamp=ago(1),
    )
    assert cells(pods(), terminating)[:3] == ["bye", "1/1", "Terminating"]

    done = pod(
        "done",
        {
            "phase": "Succeeded",
            "containerStatuses": [
                {
                    "name": "c0",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                }
            ],
        },
        deletionTimestamp=ago(1),
    )
    row = tables.to_table(pods(), [done], now=NOW)["rows"][0]
    assert row["cells"][:3] == ["done", "0/1", "Completed"]
    assert row["conditions"] == [
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }
    ]

    oom = pod(
        "oom",
        {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "c0",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 137, "signal": 9}},
                }
            ],
        },
    )
    assert cells(pods(), oom)[2] == "Signal:9"

    evicted = pod("evicted", {"phase": "Failed", "reason": "Evicted"})
    assert cells(pods(), evicted)[2] == "Evicted"


def test_pod_init_containers_and_gates() -> None:
    initializing = pod(
        "init",
        {
            "phase": "Pending",
            "initContainerStatuses": [
                {"name": "i0", "ready": False, "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
                {"name": "i1", "ready": False, "restartCount": 0, "state": {"running": {}}},
            ],
        },
    )
    initializing["spec"]["initContainers"] = [{"name": "i0"}, {"name": "i1"}]
    assert cells(pods(), initializing)[:3] == ["init", "0/1", "Init:1/2"]

    crash_init = pod(
        "init-crash",
        {
            "phase": "Pending",
            "initContainerStatuses": [
                {
                    "name": "i0",
                    "ready": False,
                    "restartCount": 2,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                }
            ],
        },
    )
    crash_init["spec"]["initContainers"] = [{"name": "i0"}]
    assert cells(pods(), crash_init)[2:4] == ["Init:CrashLoopBackOff", "2"]

    sidecar = pod(
        "sidecar",
        {
            "phase": "Running",
            "conditions": [{"type": "Initialized", "status": "True"}, {"type": "gate/x", "status": "True"}],
            "initContainerStatuses": [
                {"name": "s", "ready": True, "started": True, "restartCount": 1, "state": {"running": {}}}
            ],
            "containerStatuses": [running("c0")],
        },
    )
    sidecar["spec"]["initContainers"] = [{"name": "s", "restartPolicy": "Always"}]
    sidecar["spec"]["readinessGates"] = [{"conditionType": "gate/x"}, {"conditionType": "gate/y"}]
    result = cells(pods(), sidecar)
    assert result[1:4] == ["2/2", "Running", "1"]
    assert result[8] == "1/2"


def test_include_object_variants() -> None:
    obj = pod("web", {"phase": "Running"}, resourceVersion="12", labels={"app": "web"})
    metadata_row = tables.to_table(pods(), [obj], now=NOW)["rows"][0]
    assert metadata_row["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj["metadata"],
    }
    assert tables.to_table(pods(), [obj], include_object="Object", now=NOW)["rows"][0]["object"] == obj
    assert "object" not in tables.to_table(pods(), [obj], include_object="None", now=NOW)["rows"][0]
    single = tables.to_table(pods(), [obj], now=NOW)
    assert single["metadata"] == {"resourceVersion": "12"}
    listed = tables.to_table(pods(), [obj, obj], resource_version="20", continue_token="abc", now=NOW)
    assert listed["metadata"] == {"resourceVersion": "20", "continue": "abc"}


def test_partial_object_metadata_list() -> None:
    obj = pod("web", {"phase": "Running"}, resourceVersion="12")
    listing = tables.to_partial_object_metadata_list(pods(), [obj], "30", "next")
    assert listing == {
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": "30", "continue": "next"},
        "items": [
            {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}
        ],
    }


def resource(group: str, plural: str) -> ResourceType:
    found = next((r for r in BUILTIN_RESOURCES if r.group == group and r.plural == plural), None)
    assert found is not None
    return found


def column_names(group: str, plural: str) -> list[str]:
    return [c["name"] for c in tables.to_table(resource(group, plural), [], now=NOW)["columnDefinitions"]]


def test_deployment_rows() -> None:
    deployment = {
        "metadata": {"name": "web", "creationTimestamp": ago(3 * 86400 + 5 * 3600)},
        "spec": {
            "replicas": 3,
            "selector": {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}],
            },
            "template": {
                "spec": {
                    "containers": [
                        {"name": "nginx", "image": "nginx:1.27"},
                        {"name": "log", "image": "busybox"},
                    ]
                }
            },
        },
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    }
    assert column_names("apps", "deployments") == [
        "Name",
        "Ready",
        "Up-to-date",
        "Available",
        "Age",
        "Containers",
        "Images",
        "Selector",
    ]
    assert cells(resource("apps", "deployments"), deployment) == [
        "web",
        "2/3",
        3,
        2,
        "3d5h",
        "nginx,log",
        "nginx:1.27,busybox",
        "app=web,tier in (a,b)",
    ]
    fresh = {"metadata": {"name": "new", "creationTimestamp": ago(2)}, "spec": {"replicas": 1}}
    assert cells(resource("apps", "deployments"), fresh)[:5] == ["new", "0/1", 0, 0, "2s"]


def test_workload_rows() -> None:
    rs = {
        "metadata": {"name": "web-abc", "creationTimestamp": ago(60)},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"replicas": 2, "readyReplicas": 1},
    }
    assert column_names("apps", "replicasets")[:5] == ["Name", "Desired", "Current", "Ready", "Age"]
    assert cells(resource("apps", "replicasets"), rs)[:5] == ["web-abc", 2, 2, 1, "60s"]
    sts = {
        "metadata": {"name": "db", "creationTimestamp": ago(60)},
        "spec": {"replicas": 3},
        "status": {"readyReplicas": 3},
    }
    assert column_names("apps", "statefulsets") == ["Name", "Ready", "Age", "Containers", "Images"]
    assert cells(resource("apps", "statefulsets"), sts)[:3] == ["db", "3/3", "60s"]
    ds = {
        "metadata": {"name": "agent", "creationTimestamp": ago(60)},
        "spec": {"template": {"spec": {"nodeSelector": {"os": "linux", "arch": "amd64"}}}},
        "status": {
            "desiredNumberScheduled": 3,
            "currentNumberScheduled": 3,
            "numberReady": 2,
            "updatedNumberScheduled": 3,
            "numberAvailable": 2,
        },
    }
    assert column_names("apps", "daemonsets")[:8] == [
        "Name",
        "Desired",
        "Current",
        "Ready",
        "Up-to-date",
        "Available",
        "Node Selector",
        "Age",
    ]
    assert cells(resource("apps", "daemonsets"), ds)[:8] == [
        "agent",
        3,
        3,
        2,
        3,
        2,
        "arch=amd64,os=linux",
        "60s",
    ]


def test_job_and_cronjob_rows() -> None:
    job = {
        "metadata": {"name": "pi", "creationTimestamp": ago(600)},
        "spec": {"completions": 3, "template": {"spec": {"containers": [{"name": "pi", "image": "perl"}]}}},
        "status": {
            "succeeded": 3,
            "startTime": ago(590),
            "completionTime": ago(500),
            "conditions": [{"type": "Complete", "status": "True"}],
        },
    }
    assert column_names("batch", "jobs")[:5] == ["Name", "Status", "Completions", "Duration", "Age"]
    assert cells(resource("batch", "jobs"), job)[:5] == ["pi", "Complete", "3/3", "90s", "10m"]
    parallel = {"metadata": {"name": "p", "creationTimestamp": ago(10)}, "spec": {"parallelism": 2}}
    assert cells(resource("batch", "jobs"), parallel)[:4] == ["p", "Running", "0/1 of 2", ""]
    cronjob = {
        "metadata": {"name": "tick", "creationTimestamp": ago(7200)},
        "spec": {
            "schedule": "*/5 * * * *",
            "suspend": False,
            "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}},
        },
        "status": {"active": [{"name": "tick-1"}], "lastScheduleTime": ago(65)},
    }
    assert column_names("batch", "cronjobs")[:7] == [
        "Name",
        "Schedule",
        "Timezone",
        "Suspend",
        "Active",
        "Last Schedule",
        "Age",
    ]
    assert cells(resource("batch", "cronjobs"), cronjob)[:7] == [
        "tick",
        "*/5 * * * *",
        "<none>",
        "False",
        1,
        "65s",
        "120m",
    ]


def test_core_rows() -> None:
    svc = {
        "metadata": {"name": "web", "creationTimestamp": ago(30)},
        "spec": {
            "type": "NodePort",
            "clusterIP": "10.96.0.10",
            "selector": {"app": "web"},
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
        },
    }
    assert column_names("", "services") == [
        "Name",
        "Type",
        "Cluster-IP",
        "External-IP",
        "Port(s)",
        "Age",
        "Selector",
    ]
    assert cells(resource("", "services"), svc) == [
        "web",
        "NodePort",
        "10.96.0.10",
        "<none>",
        "80:30080/TCP,53/UDP",
        "30s",
        "app=web",
    ]
    lb = {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": []}}
    assert cells(resource("", "services"), lb)[1:5] == ["LoadBalancer", "<none>", "<pending>", "<none>"]
    cm = {
        "metadata": {"name": "cfg", "creationTimestamp": ago(30)},
        "data": {"a": "1", "b": "2"},
        "binaryData": {"c": ""},
    }
    assert cells(resource("", "configmaps"), cm) == ["cfg", 3, "30s"]
    secret = {
        "metadata": {"name": "s", "creationTimestamp": ago(30)},
        "type": "Opaque",
        "data": {"a": "MQ=="},
    }
    assert column_names("", "secrets") == ["Name", "Type", "Data", "Age"]
    assert cells(resource("", "secrets"), secret) == ["s", "Opaque", 1, "30s"]
    ns = {"metadata": {"name": "dev", "creationTimestamp": ago(30)}, "status": {"phase": "Terminating"}}
    assert cells(resource("", "namespaces"), ns) == ["dev", "Terminating", "30s"]
    sa = {"metadata": {"name": "default", "creationTimestamp": ago(30)}}
    assert cells(resource("", "serviceaccounts"), sa) == ["default", 0, "30s"]
    ep = {
        "metadata": {"name": "web", "creationTimestamp": ago(30)},
        "subsets": [{"addresses": [{"ip": f"10.0.0.{i}"} for i in range(5)], "ports": [{"port": 80}]}],
    }
    assert cells(resource("", "endpoints"), ep) == [
        "web",
        "10.0.0.0:80,10.0.0.1:80,10.0.0.2:80 + 2 more...",
        "30s",
    ]
    assert cells(resource("", "endpoints"), {"metadata": {"name": "none"}})[1] == "<none>"
    lease = {
        "metadata": {"name": "leader", "creationTimestamp": ago(30)},
        "spec": {"holderIdentity": "pod-1"},
    }
    assert cells(resource("coordination.k8s.io", "leases"), lease) == ["leader", "pod-1", "30s"]


def test_event_rows() -> None:
    event = {
        "metadata": {"name": "web.17a", "creationTimestamp": ago(600)},
        "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{c}"},
        "reason": "Pulled",
        "type": "Normal",
        "message": "Pulled image  \n",
        "source": {"component": "kubelet", "host": "node-1"},
        "count": 4,
        "firstTimestamp": ago(600),
        "lastTimestamp": ago(30),
    }
    assert column_names("", "events") == [
        "Last Seen",
        "Type",
        "Reason",
        "Object",
        "Subobject",
        "Source",
        "Message",
        "First Seen",
        "Count",
        "Name",
    ]
    expected = [
        "30s",
        "Normal",
        "Pulled",
        "pod/web",
        "spec.containers{c}",
        "kubelet, node-1",
        "Pulled image",
        "10m",
        4,
        "web.17a",
    ]
    assert cells(resource("", "events"), event) == expected
    v1 = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "x"},
        "eventTime": ago(20),
        "regarding": {"kind": "Deployment", "name": "web"},
        "reason": "ScalingReplicaSet",
        "type": "Normal",
        "note": "Scaled up",
        "reportingController": "deployment-controller",
        "series": {"count": 7, "lastObservedTime": ago(3)},
    }
    assert cells(resource("events.k8s.io", "events"), v1) == [
        "3s",
        "Normal",
        "ScalingReplicaSet",
        "deployment/web",
        "",
        "deployment-controller",
        "Scaled up",
        "20s",
        7,
        "x",
    ]


def test_rbac_rows() -> None:
    binding = {
        "metadata": {"name": "rb", "creationTimestamp": ago(30)},
        "roleRef": {"kind": "ClusterRole", "name": "view", "apiGroup": "rbac.authorization.k8s.io"},
        "subjects": [
            {"kind": "User", "name": "alice"},
            {"kind": "User", "name": "bob"},
            {"kind": "Group", "name": "devs"},
            {"kind": "ServiceAccount", "name": "sa", "namespace": "ns1"},
        ],
    }
    assert column_names("rbac.authorization.k8s.io", "rolebindings") == [
        "Name",
        "Role",
        "Age",
        "Users",
        "Groups",
        "ServiceAccounts",
    ]
    assert cells(resource("rbac.authorization.k8s.io", "clusterrolebindings"), binding) == [
        "rb",
        "ClusterRole/view",
        "30s",
        "alice, bob",
        "devs",
        "ns1/sa",
    ]
    role = {"metadata": {"name": "reader", "creationTimestamp": "2024-04-30T10:00:00+02:00"}}
    table = tables.to_table(resource("rbac.authorization.k8s.io", "roles"), [role], now=NOW)
    assert [(c["name"], c["type"]) for c in table["columnDefinitions"]] == [
        ("Name", "string"),
        ("Created At", "date"),
    ]
    assert table["rows"][0]["cells"] == ["reader", "2024-04-30T08:00:00Z"]


def test_custom_resources_without_printer_columns_get_name_and_age() -> None:
    crd = ResourceType(
        "stable.example.com",
        "v1",
        "crontabs",
        "crontab",
        "CronTab",
        True,
        definition="crontabs.stable.example.com",
    )
    table = tables.to_table(crd, [{"metadata": {"name": "c", "creationTimestamp": ago(3600 * 5)}}], now=NOW)
    assert [(c["name"], c["type"]) for c in table["columnDefinitions"]] == [
        ("Name", "string"),
        ("Age", "date"),
    ]
    assert table["rows"][0]["cells"] == ["c", "5h"]
    assert tables.to_table(crd, [{"metadata": {"name": "d"}}], now=NOW)["rows"][0]["cells"] == [
        "d",
        "<unknown>",
    ]
