"""Discovery, /version, OpenAPI v3/v2 and Tables as clients read them over HTTPS."""

from __future__ import annotations

import datetime
from typing import Any

from kubeloop.apiserver.catalog.resources import ResourceCatalog
from kubeloop.apiserver.groups import builtin_resources
from kubeloop.apiserver.printing import cells
from tests.apiserver.printing.printed import to_table
from tests.conftest import Client, ServerThread


def test_version_and_group_discovery(module_server: ServerThread) -> None:
    """On a server of its own: the shared one serves other tests' CRDs, in groups of any name."""
    api = Client(module_server)
    version = api.get("/version").json()
    assert version["major"] == "1" and version["gitVersion"].startswith("v1.")
    assert api.get("/api").json()["versions"] == ["v1"]
    groups = {g["name"]: g for g in api.get("/apis").json()["groups"]}
    assert set(groups) == {
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "autoscaling",
        "batch",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
        "storagemigration.k8s.io",
    }
    assert groups["apps"]["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
    assert api.get("/apis/apps").json()["kind"] == "APIGroup"


def test_every_builtin_resource_is_discoverable(api: Client) -> None:
    for resource in builtin_resources():
        path = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
        listed = {r["name"]: r for r in api.get(path).json()["resources"]}
        entry = listed[resource.plural]
        assert entry["kind"] == resource.kind
        assert entry["namespaced"] == resource.namespaced
        assert entry.get("shortNames", []) == list(resource.short_names)
        assert entry["verbs"] == sorted(resource.verbs)
        if resource.review:
            assert entry["verbs"] == ["create"]  # reviews are only ever created
        stored = "watch" in resource.verbs
        assert ("storageVersionHash" in entry) is stored
        for sub in resource.subresources:
            assert f"{resource.plural}/{sub}" in listed
    scale = {r["name"]: r for r in api.get("/apis/apps/v1").json()["resources"]}["deployments/scale"]
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    core = {r["name"]: r for r in api.get("/api/v1").json()["resources"]}
    eviction = core["pods/eviction"]
    assert (eviction["group"], eviction["version"], eviction["kind"], eviction["verbs"]) == (
        "policy",
        "v1",
        "Eviction",
        ["create"],
    )
    assert (core["pods/binding"]["kind"], core["pods/binding"]["verbs"]) == ("Binding", ["create"])


def _refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            found.add(node["$ref"])
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)


def test_openapi_v3_has_patch_parameters_and_no_dangling_refs(api: Client) -> None:
    index = api.get("/openapi/v3").json()["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/batch/v1"} <= set(index)
    document = api.get(index["apis/apps/v1"]["serverRelativeURL"]).json()
    assert document["openapi"].startswith("3.")
    patch = document["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    schemas = document["components"]["schemas"]
    deployment = schemas["io.k8s.api.apps.v1.Deployment"]
    assert deployment["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "kind": "Deployment", "version": "v1"}
    ]
    found: set[str] = set()
    _refs(document, found)
    missing = [r for r in found if r.rsplit("/", 1)[-1] not in schemas]
    assert not missing


def test_openapi_v2_as_protobuf_and_as_json(api: Client) -> None:
    protobuf = api.get(
        "/openapi/v2", headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"}
    )
    assert protobuf.status_code == 200
    assert protobuf.content[:5] == b"\x0a\x032.0"  # field 1 (swagger) = "2.0"
    assert b"io.k8s.api.apps.v1.Deployment" in protobuf.content
    for accept in ("application/json", "*/*", None):
        response = api.get("/openapi/v2", headers={"Accept": accept} if accept else {})
        assert response.status_code == 200 and response.headers["Content-Type"].startswith("application/json")
        document = response.json()
        assert document["swagger"] == "2.0"
        definitions = document["definitions"]
        deployment = definitions["io.k8s.api.apps.v1.Deployment"]
        assert deployment["x-kubernetes-group-version-kind"] == [
            {"group": "apps", "kind": "Deployment", "version": "v1"}
        ]
        assert deployment["properties"]["metadata"]["$ref"] == (
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        )
        assert deployment["description"].startswith("Deployment enables declarative updates")
        assert "enum" not in deployment["properties"]["kind"]
        assert definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == "int-or-string"
        found: set[str] = set()
        _refs(document, found)  # the paths' references too
        assert not [r for r in found if r.removeprefix("#/definitions/") not in definitions]
        assert b"/api/v1/namespaces/{namespace}/configmaps" not in protobuf.content  # definitions only
    # The JSON form carries the paths, with upstream's words (generators read Swagger 2.0).
    paths = document["paths"]
    listing = paths["/api/v1/namespaces/{namespace}/configmaps"]["get"]
    assert listing["description"] == "list or watch objects of kind ConfigMap"
    assert listing["operationId"] == "listCoreV1NamespacedConfigMap"
    assert listing["x-kubernetes-action"] == "list"
    by_name = {parameter["name"]: parameter for parameter in listing["parameters"]}
    assert by_name["labelSelector"] == {
        "description": "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
        "in": "query",
        "name": "labelSelector",
        "type": "string",
        "uniqueItems": True,
    }
    assert by_name["fieldSelector"]["description"] == (
        "A selector to restrict the list of returned objects by their fields. Defaults to everything."
    )
    assert by_name["limit"]["type"] == "integer"
    assert listing["responses"]["200"] == {
        "description": "OK",
        "schema": {"$ref": "#/definitions/io.k8s.api.core.v1.ConfigMapList"},
    }
    assert "application/json" in listing["produces"] and listing["schemes"] == ["https"]
    create = paths["/api/v1/namespaces/{namespace}/configmaps"]["post"]
    assert create["parameters"][0] == {
        "in": "body",
        "name": "body",
        "required": True,
        "schema": {"$ref": "#/definitions/io.k8s.api.core.v1.ConfigMap"},
    }
    one = paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
    assert {(p["name"], p["in"], p.get("required")) for p in one["parameters"]} >= {
        ("name", "path", True),
        ("namespace", "path", True),
    }
    assert "application/apply-patch+yaml" in one["patch"]["consumes"]
    assert "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale" in paths
    refused = api.get("/openapi/v2", headers={"Accept": "application/xml"})
    assert refused.status_code == 406 and refused.json()["reason"] == "NotAcceptable"


def test_table_columns_for_pods_and_deployments() -> None:
    catalog = ResourceCatalog(builtin_resources())
    pods = catalog.lookup("", "v1", "pods")
    deployments = catalog.lookup("apps", "v1", "deployments")
    assert pods is not None and deployments is not None
    now = datetime.datetime(2026, 1, 1, 1, 0, 0, tzinfo=datetime.UTC)
    created = {"name": "p", "creationTimestamp": "2026-01-01T00:57:00Z"}
    crashing = {
        "metadata": created,
        "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "a", "ready": True, "restartCount": 3, "state": {"running": {}}},
                {
                    "name": "b",
                    "ready": False,
                    "restartCount": 4,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                },
            ],
        },
    }
    terminating = {
        "metadata": {**created, "deletionTimestamp": "x"},
        "spec": {"containers": [{}]},
        "status": {"phase": "Running"},
    }
    table = to_table(pods, [crashing, terminating], now=now)
    assert [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
    ]
    # Upstream: ready counts containers that are ready and running; restarts is a string cell.
    assert table["rows"][0]["cells"][:5] == ["p", "1/2", "CrashLoopBackOff", "7", "3m"]
    assert table["rows"][1]["cells"][2] == "Terminating"
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    deployment = {
        "metadata": created,
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "w"}},
            "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}},
        },
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    }
    row = to_table(deployments, [deployment], now=now)["rows"][0]["cells"]
    assert row == ["p", "2/3", 3, 2, "3m", "c", "nginx", "app=w"]


def test_human_duration() -> None:
    cases = {
        0: "0s",
        59: "59s",
        119: "119s",
        125: "2m5s",
        600: "10m",
        3 * 3600 + 120: "3h2m",
        30 * 3600: "30h",
        3 * 86400 + 3600: "3d1h",
        400 * 86400: "400d",
        3 * 365 * 86400: "3y",
    }
    for seconds, text in cases.items():
        assert cells.human_duration(seconds) == text, seconds


def test_table_accept_header_over_http(api: Client, namespace: str) -> None:
    api.post(
        f"/api/v1/namespaces/{namespace}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t"}, "data": {"a": "1", "b": "2"}},
    )
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    table = api.get(f"/api/v1/namespaces/{namespace}/configmaps", headers={"Accept": accept}).json()
    assert table["kind"] == "Table"
    assert table["rows"][0]["cells"][:2] == ["t", 2]
    partial = api.get(
        f"/api/v1/namespaces/{namespace}/configmaps",
        headers={"Accept": "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"},
    ).json()
    assert partial["kind"] == "PartialObjectMetadataList"
    assert "data" not in partial["items"][0]


def test_client_certificate_authenticates_end_to_end(api: Client, tmp_path: Any) -> None:
    import base64

    import requests
    import yaml

    config = yaml.safe_load(api.server.kubeconfig.read_text())
    user = next(u["user"] for u in config["users"] if "client-certificate-data" in u["user"])
    cert, key = tmp_path / "c.crt", tmp_path / "c.key"
    cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
    key.write_bytes(base64.b64decode(user["client-key-data"]))
    session = requests.Session()
    session.trust_env = False
    response = session.get(
        api.server.url + "/api/v1/namespaces",
        verify=api.server.ca_file,
        cert=(str(cert), str(key)),
        timeout=10,
    )
    assert response.status_code == 200
    assert (
        session.get(api.server.url + "/api/v1/namespaces", verify=api.server.ca_file, timeout=10).status_code
        == 401
    )
