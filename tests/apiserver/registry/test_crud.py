"""Create/get/update/patch/delete semantics of built-in kinds over real HTTPS."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from kubeloop.apiserver.http import negotiation, reads
from tests.conftest import ONE_PROCESS_AND_FRONT_END, Client, ServerThread, served_by


@pytest.fixture(scope="module", params=ONE_PROCESS_AND_FRONT_END)
def shared_server(request: pytest.FixtureRequest, kube_apiserver: ServerThread) -> Iterator[ServerThread]:
    """Every test here runs against one process and against a front-end over its store."""
    yield from served_by(request.param, kube_apiserver)


CM = "/api/v1/namespaces/{ns}/configmaps"
DEPLOY = "/apis/apps/v1/namespaces/{ns}/deployments"


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]},
            },
        },
    }


def test_create_fills_metadata_and_get_returns_it(api: Client, namespace: str) -> None:
    created = api.post(CM.format(ns=namespace), configmap("a", k="v"))
    assert created.status_code == 201
    meta = created.json()["metadata"]
    assert re.fullmatch(r"[0-9a-f-]{36}", meta["uid"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])
    assert meta["namespace"] == namespace
    assert int(meta["resourceVersion"]) > 0
    assert "generation" not in meta  # ConfigMaps have no generation upstream
    got = api.get(CM.format(ns=namespace) + "/a")
    assert got.status_code == 200
    assert got.json() == created.json()


def test_deployment_gets_generation_defaults_and_empty_status(api: Client, namespace: str) -> None:
    body = deployment("web")
    body["status"] = {"replicas": 9}
    created = api.post(DEPLOY.format(ns=namespace), body).json()
    assert created["metadata"]["generation"] == 1
    assert created["status"] == {}
    assert created["spec"]["strategy"]["type"] == "RollingUpdate"
    assert created["spec"]["revisionHistoryLimit"] == 10


def test_generate_name(api: Client, namespace: str) -> None:
    body = configmap("")
    body["metadata"] = {"generateName": "gen-"}
    created = api.post(CM.format(ns=namespace), body)
    assert created.status_code == 201
    assert re.fullmatch(r"gen-[bcdfghjklmnpqrstvwxz2456789]{5}", created.json()["metadata"]["name"])


def test_create_duplicate_is_409_already_exists(api: Client, namespace: str) -> None:
    api.post(CM.format(ns=namespace), configmap("dup"))
    again = api.post(CM.format(ns=namespace), configmap("dup"))
    assert again.status_code == 409
    status = again.json()
    assert status["reason"] == "AlreadyExists"
    assert status["message"] == 'configmaps "dup" already exists'
    assert status["details"] == {"name": "dup", "kind": "configmaps"}


def test_get_missing_is_404_status(api: Client, namespace: str) -> None:
    response = api.get(CM.format(ns=namespace) + "/nope")
    assert response.status_code == 404
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'configmaps "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "kind": "configmaps"},
        "code": 404,
    }


def test_create_with_resource_version_is_rejected(api: Client, namespace: str) -> None:
    body = configmap("rv")
    body["metadata"]["resourceVersion"] = "5"
    response = api.post(CM.format(ns=namespace), body)
    assert response.status_code == 400
    assert "resourceVersion should not be set" in response.json()["message"]
    assert api.get(CM.format(ns=namespace) + "/rv").status_code == 404


def test_namespace_mismatch_is_400(api: Client, namespace: str) -> None:
    body = configmap("x")
    body["metadata"]["namespace"] = "other"
    response = api.post(CM.format(ns=namespace), body)
    assert response.status_code == 400
    assert "does not match the namespace" in response.json()["message"]


def test_create_in_missing_namespace_is_404(api: Client) -> None:
    response = api.post(CM.format(ns="does-not-exist"), configmap("x"))
    assert response.status_code == 404
    assert response.json()["message"] == 'namespaces "does-not-exist" not found'


def test_update_with_stale_resource_version_is_409_conflict(api: Client, namespace: str) -> None:
    created = api.post(CM.format(ns=namespace), configmap("c", a="1")).json()
    first = dict(created, data={"a": "2"})
    assert api.put(CM.format(ns=namespace) + "/c", first).status_code == 200
    stale = dict(created, data={"a": "3"})
    response = api.put(CM.format(ns=namespace) + "/c", stale)
    assert response.status_code == 409
    assert response.json()["reason"] == "Conflict"
    assert "the object has been modified" in response.json()["message"]
    assert api.get(CM.format(ns=namespace) + "/c").json()["data"] == {"a": "2"}


def test_update_without_resource_version_is_unconditional_for_builtins(api: Client, namespace: str) -> None:
    api.post(CM.format(ns=namespace), configmap("u", a="1"))
    response = api.put(CM.format(ns=namespace) + "/u", configmap("u", a="9"))
    assert response.status_code == 200
    assert response.json()["data"] == {"a": "9"}


def test_update_keeps_uid_and_creation_timestamp(api: Client, namespace: str) -> None:
    created = api.post(CM.format(ns=namespace), configmap("k")).json()
    body = configmap("k", z="1")
    body["metadata"]["uid"] = "forged"
    body["metadata"]["creationTimestamp"] = "2000-01-01T00:00:00Z"
    updated = api.put(CM.format(ns=namespace) + "/k", body).json()
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    assert updated["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]


def test_noop_update_keeps_resource_version(api: Client, namespace: str) -> None:
    created = api.post(CM.format(ns=namespace), configmap("n", a="1")).json()
    again = api.put(CM.format(ns=namespace) + "/n", created).json()
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_generation_bumps_on_spec_not_on_labels_or_status(api: Client, namespace: str) -> None:
    path = DEPLOY.format(ns=namespace) + "/g"
    api.post(DEPLOY.format(ns=namespace), deployment("g"))
    labelled = api.patch(
        path, {"metadata": {"labels": {"extra": "1"}}}, "application/merge-patch+json"
    ).json()
    assert labelled["metadata"]["generation"] == 1
    annotated = api.patch(
        path, {"metadata": {"annotations": {"a": "b"}}}, "application/merge-patch+json"
    ).json()
    assert annotated["metadata"]["generation"] == 2  # Deployment: annotations count
    scaled = api.patch(path, {"spec": {"replicas": 4}}, "application/merge-patch+json").json()
    assert scaled["metadata"]["generation"] == 3
    status = api.patch(path + "/status", {"status": {"replicas": 4}}, "application/merge-patch+json").json()
    assert status["metadata"]["generation"] == 3
    assert status["status"] == {"replicas": 4}


def test_status_subresource_isolation(api: Client, namespace: str) -> None:
    path = DEPLOY.format(ns=namespace) + "/s"
    api.post(DEPLOY.format(ns=namespace), deployment("s"))
    # The main endpoint ignores status.
    via_main = api.patch(
        path, {"status": {"replicas": 7}, "spec": {"replicas": 2}}, "application/merge-patch+json"
    ).json()
    assert via_main["status"] == {}
    assert via_main["spec"]["replicas"] == 2
    # The status endpoint takes only status.
    current = api.get(path).json()
    current["status"] = {"replicas": 5, "observedGeneration": 2}
    current["spec"]["replicas"] = 10
    via_status = api.put(path + "/status", current).json()
    assert via_status["status"] == {"replicas": 5, "observedGeneration": 2}
    assert via_status["spec"]["replicas"] == 2


def test_json_patch_test_failure_is_422_and_nothing_changes(api: Client, namespace: str) -> None:
    api.post(CM.format(ns=namespace), configmap("jp", a="1"))
    ops = [
        {"op": "test", "path": "/data/a", "value": "2"},
        {"op": "replace", "path": "/data/a", "value": "3"},
    ]
    response = api.patch(CM.format(ns=namespace) + "/jp", ops, "application/json-patch+json")
    assert response.status_code == 422
    assert api.get(CM.format(ns=namespace) + "/jp").json()["data"] == {"a": "1"}
    ops[0]["value"] = "1"
    ok = api.patch(CM.format(ns=namespace) + "/jp", ops, "application/json-patch+json")
    assert ok.status_code == 200
    assert ok.json()["data"] == {"a": "3"}


def test_json_patch_replace_of_a_missing_member_adds_it_as_upstream(api: Client, namespace: str) -> None:
    # kube-apiserver applies JSON patches with evanphx/json-patch v4, which adds the member;
    # clients (kubectl patch --type=json, kopf) rely on it. remove of a missing member still fails.
    api.post(CM.format(ns=namespace), configmap("jr", a="1"))
    path = CM.format(ns=namespace) + "/jr"
    replaced = api.patch(
        path, [{"op": "replace", "path": "/data/b", "value": "2"}], "application/json-patch+json"
    )
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["data"] == {"a": "1", "b": "2"}
    removed = api.patch(path, [{"op": "remove", "path": "/data/zzz"}], "application/json-patch+json")
    assert removed.status_code == 422
    deep = api.patch(path, [{"op": "replace", "path": "/spec/x", "value": 1}], "application/json-patch+json")
    assert deep.status_code == 422  # the parent must exist


def test_merge_patch_replaces_lists_and_strategic_merges_them(api: Client, namespace: str) -> None:
    path = DEPLOY.format(ns=namespace) + "/m"
    body = deployment("m")
    body["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox:1"})
    api.post(DEPLOY.format(ns=namespace), body)
    smp = {"spec": {"template": {"spec": {"containers": [{"name": "side", "image": "busybox:2"}]}}}}
    merged = api.patch(path, smp, "application/strategic-merge-patch+json").json()
    containers = merged["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("main", "nginx:1.27"), ("side", "busybox:2")]
    replaced = api.patch(path, smp, "application/merge-patch+json").json()
    assert [c["name"] for c in replaced["spec"]["template"]["spec"]["containers"]] == ["side"]


def test_unknown_patch_type_is_415(api: Client, namespace: str) -> None:
    api.post(CM.format(ns=namespace), configmap("p"))
    response = api.patch(CM.format(ns=namespace) + "/p", {"data": {}}, "application/xml")
    assert response.status_code == 415
    assert response.json()["reason"] == "UnsupportedMediaType"


def test_dry_run_changes_nothing(api: Client, namespace: str) -> None:
    created = api.post(CM.format(ns=namespace) + "?dryRun=All", configmap("dry"))
    assert created.status_code == 201
    assert created.json()["metadata"]["uid"]
    assert api.get(CM.format(ns=namespace) + "/dry").status_code == 404
    api.post(CM.format(ns=namespace), configmap("dry", a="1"))
    patched = api.patch(
        CM.format(ns=namespace) + "/dry?dryRun=All", {"data": {"a": "2"}}, "application/merge-patch+json"
    )
    assert patched.json()["data"] == {"a": "2"}
    assert api.get(CM.format(ns=namespace) + "/dry").json()["data"] == {"a": "1"}
    deleted = api.delete(CM.format(ns=namespace) + "/dry?dryRun=All")
    assert deleted.status_code == 200
    assert api.get(CM.format(ns=namespace) + "/dry").status_code == 200


def test_delete_returns_success_status_and_removes(api: Client, namespace: str) -> None:
    created = api.post(CM.format(ns=namespace), configmap("d")).json()
    response = api.delete(CM.format(ns=namespace) + "/d")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "Success"
    assert body["details"]["uid"] == created["metadata"]["uid"]
    assert api.get(CM.format(ns=namespace) + "/d").status_code == 404
    assert api.delete(CM.format(ns=namespace) + "/d").status_code == 404


def test_delete_preconditions(api: Client, namespace: str) -> None:
    created = api.post(CM.format(ns=namespace), configmap("pc")).json()
    wrong_uid = api.delete(CM.format(ns=namespace) + "/pc", {"preconditions": {"uid": "other"}})
    assert wrong_uid.status_code == 409
    assert "Precondition failed: UID in precondition" in wrong_uid.json()["message"]
    wrong_rv = api.delete(CM.format(ns=namespace) + "/pc", {"preconditions": {"resourceVersion": "1"}})
    assert wrong_rv.status_code == 409
    ok = api.delete(CM.format(ns=namespace) + "/pc", {"preconditions": {"uid": created["metadata"]["uid"]}})
    assert ok.status_code == 200


def test_finalizers_hold_deletion_until_removed(api: Client, namespace: str) -> None:
    path = DEPLOY.format(ns=namespace) + "/f"
    body = deployment("f")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    api.post(DEPLOY.format(ns=namespace), body)
    marked = api.delete(path)
    assert marked.status_code == 200
    obj = marked.json()
    assert obj["kind"] == "Deployment"
    assert obj["metadata"]["deletionTimestamp"]
    assert obj["metadata"]["deletionGracePeriodSeconds"] == 0
    assert obj["metadata"]["generation"] == 2
    # Adding a finalizer to an object being deleted is forbidden.
    more = api.patch(
        path, {"metadata": {"finalizers": ["example.com/hold", "x.io/y"]}}, "application/merge-patch+json"
    )
    assert more.status_code == 422
    assert more.json()["details"]["causes"][0]["field"] == "metadata.finalizers"
    # Removing the last finalizer deletes it.
    gone = api.patch(path, {"metadata": {"finalizers": None}}, "application/merge-patch+json")
    assert gone.status_code == 200
    assert api.get(path).status_code == 404


def test_propagation_policy_is_recorded_as_finalizer(api: Client, namespace: str) -> None:
    for policy, finalizer in (("Orphan", "orphan"), ("Foreground", "foregroundDeletion")):
        name = f"pp-{finalizer.lower()}"
        api.post(CM.format(ns=namespace), configmap(name))
        response = api.delete(CM.format(ns=namespace) + f"/{name}", {"propagationPolicy": policy})
        assert response.status_code == 200
        assert response.json()["metadata"]["finalizers"] == [finalizer]
        assert response.json()["metadata"]["deletionTimestamp"]
    bad = api.delete(CM.format(ns=namespace) + "/pp-orphan", {"propagationPolicy": "Sideways"})
    assert bad.status_code == 422


def test_pod_delete_returns_the_object(api: Client, namespace: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    created = api.post(f"/api/v1/namespaces/{namespace}/pods", pod).json()
    assert created["status"]["phase"] == "Pending"
    response = api.delete(f"/api/v1/namespaces/{namespace}/pods/p")
    assert response.status_code == 200
    assert response.json()["kind"] == "Pod"


def test_cluster_scoped_and_namespace_lifecycle(api: Client) -> None:
    created = api.post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "life"}}
    )
    assert created.json()["status"] == {"phase": "Active"}
    assert created.json()["spec"] == {"finalizers": ["kubernetes"]}
    api.post(CM.format(ns="life"), configmap("inside"))
    marked = api.delete("/api/v1/namespaces/life")
    assert marked.status_code == 200
    assert marked.json()["status"]["phase"] == "Terminating"
    refused = api.post(CM.format(ns="life"), configmap("late"))
    assert refused.status_code in (403, 404)  # 404 once the namespace controller has finished
    if refused.status_code == 403:
        assert refused.json()["details"]["causes"][0]["reason"] == "NamespaceTerminating"
    import time

    deadline = time.monotonic() + 10
    while api.get("/api/v1/namespaces/life").status_code != 404:
        assert time.monotonic() < deadline, "namespace was not finalized"
        time.sleep(0.05)
    assert api.get(CM.format(ns="life") + "/inside").status_code == 404


def test_default_namespaces_exist_and_cannot_be_deleted(api: Client) -> None:
    for name in ("default", "kube-system", "kube-public"):
        assert api.get(f"/api/v1/namespaces/{name}").status_code == 200
        response = api.delete(f"/api/v1/namespaces/{name}")
        assert response.status_code == 403
        assert response.json()["reason"] == "Forbidden"


def test_events_are_one_kind_in_two_groups(api: Client, namespace: str) -> None:
    core = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": namespace},
        "reason": "Started",
        "message": "hello",
        "type": "Normal",
        "count": 2,
        "source": {"component": "kubelet"},
    }
    assert api.post(f"/api/v1/namespaces/{namespace}/events", core).status_code == 201
    v1 = api.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events/e1").json()
    assert v1["apiVersion"] == "events.k8s.io/v1"
    assert v1["note"] == "hello"
    assert v1["regarding"]["name"] == "p"
    assert v1["deprecatedCount"] == 2
    assert v1["eventTime"] is None  # as upstream writes it for an Event recorded without one
    listed = api.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events").json()
    assert [e["eventTime"] for e in listed["items"]] == [None]
    selected = api.get(
        f"/api/v1/namespaces/{namespace}/events",
        params={"fieldSelector": "involvedObject.name=p,reason=Started"},
    ).json()
    assert [e["metadata"]["name"] for e in selected["items"]] == ["e1"]


def test_lease_micro_time_round_trips(api: Client, namespace: str) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "leader"},
        "spec": {
            "holderIdentity": "a",
            "leaseDurationSeconds": 15,
            "renewTime": "2026-01-01T00:00:00.123456Z",
        },
    }
    created = api.post(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", lease).json()
    assert created["spec"]["renewTime"] == "2026-01-01T00:00:00.123456Z"


def test_scale_subresource(api: Client, namespace: str) -> None:
    api.post(DEPLOY.format(ns=namespace), deployment("sc", replicas=2))
    path = DEPLOY.format(ns=namespace) + "/sc/scale"
    scale = api.get(path).json()
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 0, "selector": "app=sc"}
    patched = api.patch(path, {"spec": {"replicas": 5}}, "application/merge-patch+json").json()
    assert patched["spec"] == {"replicas": 5}
    assert api.get(DEPLOY.format(ns=namespace) + "/sc").json()["spec"]["replicas"] == 5
    stale = dict(scale, spec={"replicas": 1})
    assert api.put(path, stale).status_code == 409
    negative = api.patch(path, {"spec": {"replicas": -1}}, "application/merge-patch+json")
    assert negative.status_code == 422


def test_secret_string_data_is_merged_into_data_and_not_stored(api: Client, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/secrets"
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "data": {"a": "b2xk", "keep": "a2VlcA=="},  # "old", "keep"
        "stringData": {"a": "new", "plain": "hello world"},
    }
    created = api.post(path, body)
    assert created.status_code == 201, created.text
    for secret in (created.json(), api.get(f"{path}/s").json()):
        assert "stringData" not in secret
        assert secret["data"] == {"a": "bmV3", "keep": "a2VlcA==", "plain": "aGVsbG8gd29ybGQ="}
        assert secret["type"] == "Opaque"
    updated = api.patch(f"{path}/s", {"stringData": {"keep": "rotated"}}, "application/merge-patch+json")
    assert updated.status_code == 200, updated.text
    assert updated.json()["data"]["keep"] == "cm90YXRlZA==" and "stringData" not in updated.json()
    current = api.get(f"{path}/s").json()
    current["stringData"] = {"plain": "put"}
    put = api.put(f"{path}/s", current)
    assert put.status_code == 200 and put.json()["data"]["plain"] == "cHV0"
    listed = api.get(path).json()["items"]
    assert all("stringData" not in item for item in listed)
    # Keys of stringData are validated as data keys.
    bad = api.post(
        path, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad"}, "stringData": {"a b": "x"}}
    )
    assert bad.status_code == 422 and "data[a b]" in bad.text


def test_volumes_are_defaulted_as_upstream_does(api: Client, namespace: str) -> None:
    """SetDefaults_Volume: a volume with no source becomes ``emptyDir: {}``; secret, configMap,
    projected and downwardAPI volumes get ``defaultMode: 420`` — in pods and pod templates."""
    volumes = [
        {"name": "scratch"},
        {"name": "creds", "secret": {"secretName": "s"}},
        {"name": "settings", "configMap": {"name": "c", "defaultMode": 256}},
        {"name": "all", "projected": {"sources": []}},
        {"name": "info", "downwardAPI": {"items": []}},
        {"name": "cache", "emptyDir": {"medium": "Memory"}},
    ]
    expected = [
        {"name": "scratch", "emptyDir": {}},
        {"name": "creds", "secret": {"secretName": "s", "defaultMode": 420}},
        {"name": "settings", "configMap": {"name": "c", "defaultMode": 256}},
        {"name": "all", "projected": {"sources": [], "defaultMode": 420}},
        {"name": "info", "downwardAPI": {"items": [], "defaultMode": 420}},
        {"name": "cache", "emptyDir": {"medium": "Memory"}},
    ]
    pod = {
        "metadata": {"name": "vols"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "volumes": volumes},
    }
    created = api.post(f"/api/v1/namespaces/{namespace}/pods", pod)
    assert created.status_code == 201, created.text
    assert created.json()["spec"]["volumes"] == expected
    assert api.get(f"/api/v1/namespaces/{namespace}/pods/vols").json()["spec"]["volumes"] == expected
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vols"},
        "spec": {
            "selector": {"matchLabels": {"app": "vols"}},
            "template": {"metadata": {"labels": {"app": "vols"}}, "spec": pod["spec"]},
        },
    }
    made = api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment).json()
    assert made["spec"]["template"]["spec"]["volumes"] == expected


POD = "/api/v1/namespaces/{ns}/pods"


def pod(name: str, node: str | None = "node-a", finalizers: list[str] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]},
    }
    if node:
        body["spec"]["nodeName"] = node
    if finalizers:
        body["metadata"]["finalizers"] = finalizers
    return body


def test_a_pod_on_a_node_is_deleted_gracefully(api: Client, namespace: str) -> None:
    """Upstream's pod strategy, on a server with no kubelet (as envtest): a delete marks a pod
    bound to a node (deletionTimestamp its grace period ahead, deletionGracePeriodSeconds) and
    leaves it for its node to remove; a later delete may shorten the period, counted from the
    first, never lengthen it; a delete with grace 0 removes it."""
    pods = POD.format(ns=namespace)
    assert api.post(pods, pod("bound")).status_code == 201
    marked = api.delete(pods + "/bound")
    assert marked.status_code == 200, marked.text
    meta = marked.json()["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 30  # the pod's terminationGracePeriodSeconds
    first = datetime.fromisoformat(meta["deletionTimestamp"])
    assert abs((first - datetime.now(UTC)).total_seconds() - 30) < 5
    assert api.get(pods + "/bound").json()["metadata"]["deletionTimestamp"] == meta["deletionTimestamp"]
    # Pending: a longer period, or none, changes nothing.
    for body in ({"gracePeriodSeconds": 60}, None):
        again = api.delete(pods + "/bound", body)
        assert again.status_code == 200
        assert again.json()["metadata"]["deletionGracePeriodSeconds"] == 30
        assert again.json()["metadata"]["resourceVersion"] == marked.json()["metadata"]["resourceVersion"]
    shorter = api.delete(pods + "/bound", {"gracePeriodSeconds": 10}).json()["metadata"]
    assert shorter["deletionGracePeriodSeconds"] == 10
    assert (first - datetime.fromisoformat(shorter["deletionTimestamp"])).total_seconds() == 20
    assert api.delete(pods + "/bound", {"gracePeriodSeconds": 0}).status_code == 200
    assert api.get(pods + "/bound").status_code == 404


def test_a_pod_on_no_node_or_ended_goes_at_once(api: Client, namespace: str) -> None:
    pods = POD.format(ns=namespace)
    assert api.post(pods, pod("unscheduled", node=None)).status_code == 201
    assert api.delete(pods + "/unscheduled", {"gracePeriodSeconds": 30}).status_code == 200
    assert api.get(pods + "/unscheduled").status_code == 404
    created = api.post(pods, pod("done")).json()
    created["status"] = {"phase": "Succeeded"}
    assert api.put(pods + "/done/status", created).status_code == 200
    assert api.delete(pods + "/done").status_code == 200
    assert api.get(pods + "/done").status_code == 404


def test_a_finalizer_removed_in_a_pods_grace_period_leaves_it_to_its_node(api: Client, namespace: str) -> None:
    """Upstream removes an object when an update empties its finalizers only if its grace
    period is over (deletionGracePeriodSeconds 0): a pod in its grace period stays."""
    pods = POD.format(ns=namespace)
    assert api.post(pods, pod("held", finalizers=["example.com/hold"])).status_code == 201
    assert api.delete(pods + "/held").json()["metadata"]["deletionGracePeriodSeconds"] == 30
    released = api.patch(pods + "/held", {"metadata": {"finalizers": None}}, "application/merge-patch+json")
    assert released.status_code == 200, released.text
    assert api.get(pods + "/held").json()["metadata"]["deletionGracePeriodSeconds"] == 30
    # Grace 0 with a finalizer: kept until it goes; without one, gone.
    assert api.post(pods, pod("held2", finalizers=["example.com/hold"])).status_code == 201
    assert api.delete(pods + "/held2", {"gracePeriodSeconds": 0}).json()["metadata"]["deletionGracePeriodSeconds"] == 0
    assert api.patch(pods + "/held2", {"metadata": {"finalizers": None}}, "application/merge-patch+json").status_code == 200
    assert api.get(pods + "/held2").status_code == 404
    assert api.delete(pods + "/held", {"gracePeriodSeconds": 0}).status_code == 200
    assert api.get(pods + "/held").status_code == 404


def test_a_client_that_asks_for_yaml_gets_yaml(
    api: Client, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gets, lists, writes and errors answered in YAML when the client lists YAML first (keys
    sorted, as upstream's YAML serializer writes them); JSON when it lists JSON first; a watch is
    not served as YAML. A large list is written from the objects, not from its JSON."""
    yaml_first = {"Accept": "application/yaml, application/json"}
    created = api.post(CM.format(ns=namespace), configmap("y", b="2", a="1"), headers=yaml_first)
    assert created.status_code == 201 and created.headers["Content-Type"] == "application/yaml"
    assert created.text.startswith('apiVersion: v1\ndata:\n  a: "1"\n  b: "2"\nkind: ConfigMap\n')
    for path in (CM.format(ns=namespace) + "/y", CM.format(ns=namespace)):
        answer = api.get(path, headers=yaml_first)
        as_json = api.get(path).json()
        assert answer.status_code == 200 and answer.headers["Content-Type"] == "application/yaml"
        assert yaml.safe_load(answer.text) == as_json
        json_first = api.get(path, headers={"Accept": "application/json, application/yaml"})
        assert json_first.headers["Content-Type"] == "application/json" and json_first.json() == as_json
    missing = api.get(CM.format(ns=namespace) + "/nothing", headers=yaml_first)
    assert missing.status_code == 404 and missing.headers["Content-Type"] == "application/yaml"
    status = yaml.safe_load(missing.text)
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "NotFound", 404)
    # Watches and large bodies are served by aiohttp, not the small-request path: the same answers.
    watch = api.get(CM.format(ns=namespace), params={"watch": "1"}, headers={"Accept": "application/yaml"})
    assert watch.status_code == 406 and watch.headers["Content-Type"] == "application/yaml"
    assert yaml.safe_load(watch.text)["reason"] == "NotAcceptable"
    large = api.post(CM.format(ns=namespace), configmap("large", v="x" * 300_000), headers=yaml_first)
    assert large.status_code == 201 and large.headers["Content-Type"] == "application/yaml"  # dumped in a thread
    assert yaml.safe_load(large.text)["data"]["v"] == "x" * 300_000
    monkeypatch.setattr(reads, "LARGE_LIST_ITEMS", 2)  # this list is large: written in a thread
    monkeypatch.setattr(negotiation, "_as_yaml", None)  # from its objects, not its JSON
    listed = api.get(CM.format(ns=namespace), headers=yaml_first)
    assert listed.status_code == 200 and listed.headers["Content-Type"] == "application/yaml"
    assert yaml.safe_load(listed.text) == api.get(CM.format(ns=namespace)).json()
