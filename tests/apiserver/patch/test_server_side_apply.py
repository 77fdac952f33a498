"""Server-side apply and managedFields over HTTP, with the official client and kubectl, plus
property tests of the FieldsV1 encoding."""

from __future__ import annotations

import contextlib
import copy
import gc
import itertools
import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from kubeloop.apiserver.patch import fieldmanager, fieldsets, serversideapply
from tests.apiserver.schemas import map_list
from tests.apiserver.test_kubectl import Kubectl, kubectl  # noqa: F401  (fixture)
from tests.conftest import Client, ServerThread

APPLY = "application/apply-patch+yaml"
DEPLOY = "/apis/apps/v1/namespaces/{ns}/deployments"
CM = "/api/v1/namespaces/{ns}/configmaps"


def deployment(name: str, replicas: int | None = 2, image: str = "nginx:1.27") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "web", "image": image, "ports": [{"containerPort": 80}]}]},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": spec,
    }


def apply(api: Client, path: str, body: Any, manager: str, **params: str) -> Any:
    return api.patch(path, json.dumps(body), APPLY, params={"fieldManager": manager, **params})


def entries(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields", [])}


def test_apply_creates_and_is_idempotent(api: Client, namespace: str) -> None:
    path = DEPLOY.format(ns=namespace) + "/web"
    created = apply(api, path, deployment("web"), "deployer")
    assert created.status_code == 201, created.text
    obj = created.json()
    assert obj["spec"]["replicas"] == 2 and obj["spec"]["strategy"]["type"] == "RollingUpdate"  # defaulted
    entry = entries(obj)[("deployer", "Apply")]
    assert entry["apiVersion"] == "apps/v1" and entry["fieldsType"] == "FieldsV1"
    fields = entry["fieldsV1"]
    assert fields["f:spec"]["f:replicas"] == {}
    container = fields["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"web"}']
    assert container["."] == {} and container["f:image"] == {}
    assert "f:strategy" not in fields["f:spec"]  # defaults are nobody's

    again = apply(api, path, deployment("web"), "deployer")
    assert again.status_code == 200
    assert again.json()["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


def test_fields_no_longer_applied_are_removed(api: Client, namespace: str) -> None:
    path = CM.format(ns=namespace) + "/settings"
    first = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "labels": {"a": "1", "b": "2"}},
        "data": {"x": "1", "y": "2"},
    }
    assert apply(api, path, first, "tool").status_code == 201
    # Another writer adds data.z with a merge patch: it owns it (an Update entry).
    api.patch(path, {"data": {"z": "3"}}, "application/merge-patch+json", params={"fieldManager": "editor"})
    second = copy.deepcopy(first)
    del second["data"]["y"]
    del second["metadata"]["labels"]["b"]
    obj = apply(api, path, second, "tool").json()
    assert obj["data"] == {"x": "1", "z": "3"}  # y dropped; z belongs to the editor and stays
    assert obj["metadata"]["labels"] == {"a": "1"}
    assert entries(obj)[("editor", "Update")]["fieldsV1"] == {"f:data": {"f:z": {}}}


def test_conflicts_shared_ownership_and_force(api: Client, namespace: str) -> None:
    path = DEPLOY.format(ns=namespace) + "/web"
    apply(api, path, deployment("web", replicas=2), "team-a")
    # The same value applied by another manager is shared, not a conflict.
    shared = apply(api, path, deployment("web", replicas=2), "team-b")
    assert shared.status_code == 200
    owners = entries(shared.json())
    assert "f:replicas" in owners[("team-a", "Apply")]["fieldsV1"]["f:spec"]
    assert "f:replicas" in owners[("team-b", "Apply")]["fieldsV1"]["f:spec"]

    conflict = apply(api, path, deployment("web", replicas=5, image="nginx:1.28"), "team-c")
    assert conflict.status_code == 409
    status = conflict.json()
    assert status["reason"] == "Conflict"
    assert status["message"].startswith("Apply failed with 4 conflicts: conflicts with\n")
    causes = {(c["reason"], c["message"], c["field"]) for c in status["details"]["causes"]}
    assert ("FieldManagerConflict", 'conflict with "team-a" using apps/v1', ".spec.replicas") in causes
    assert (
        "FieldManagerConflict",
        'conflict with "team-b" using apps/v1',
        '.spec.template.spec.containers[name="web"].image',
    ) in causes
    one = apply(api, path, deployment("web", replicas=2, image="nginx:1.28"), "team-a")
    assert one.status_code == 409
    assert one.json()["message"] == (
        'Apply failed with 1 conflict: conflict with "team-b" using apps/v1: '
        '.spec.template.spec.containers[name="web"].image'
    )

    forced = apply(api, path, deployment("web", replicas=5, image="nginx:1.28"), "team-c", force="true")
    assert forced.status_code == 200
    obj = forced.json()
    assert obj["spec"]["replicas"] == 5
    owners = entries(obj)
    assert "f:replicas" in owners[("team-c", "Apply")]["fieldsV1"]["f:spec"]
    assert "f:replicas" not in owners[("team-a", "Apply")]["fieldsV1"]["f:spec"]


def test_list_map_elements_merge_by_key(api: Client, namespace: str) -> None:
    path = DEPLOY.format(ns=namespace) + "/web"
    apply(api, path, deployment("web"), "main")
    sidecar = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "proxy", "image": "envoy:1"}]}}},
    }
    obj = apply(api, path, sidecar, "mesh").json()
    assert [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]] == ["web", "proxy"]
    # The mesh stops applying its container: it goes, the main one stays.
    empty = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    obj = apply(api, path, empty, "mesh").json()
    assert [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]] == ["web"]


def test_list_map_keys_are_written_in_upstreams_order(api: Client, namespace: str) -> None:
    """A list map's elements in managedFields come in structured-merge-diff's order, by the typed
    value of their keys: port 9000 before port 10000 (their JSON text sorts the other way), for
    an apply and for an update alike."""
    body = deployment("ports")
    body["spec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"containerPort": 10000},
        {"containerPort": 9000},
    ]
    for answer in (
        apply(api, DEPLOY.format(ns=namespace) + "/ports", body, "tool"),
        api.post(DEPLOY.format(ns=namespace), {**body, "metadata": {"name": "posted"}}),
    ):
        assert answer.status_code in (200, 201), answer.text
        nine, ten = (
            answer.text.index(f'"k:{{\\"containerPort\\":{port},\\"protocol\\":\\"TCP\\"}}"')
            for port in (9000, 10000)
        )
        assert nine < ten


def test_update_operations_are_recorded(api: Client, namespace: str, shared_server: ServerThread) -> None:
    collection = CM.format(ns=namespace)
    answer = api.post(
        collection, {"metadata": {"name": "u"}, "data": {"a": "1"}}, params={"fieldManager": "creator"}
    )
    created = answer.json()
    assert entries(created)[("creator", "Update")]["fieldsV1"] == {"f:data": {".": {}, "f:a": {}}}
    # A member with children has its "." first, as structured-merge-diff serializes it.
    assert '"fieldsV1":{"f:data":{".":{},"f:a":{}}}' in answer.text
    # Without fieldManager the manager is the User-Agent up to its first "/".
    patched = api.request(
        "PATCH",
        collection + "/u",
        data=json.dumps({"data": {"a": "2"}}),
        headers={"Content-Type": "application/merge-patch+json", "User-Agent": "my-tool/1.2 (linux)"},
    ).json()
    owners = entries(patched)
    assert owners[("my-tool", "Update")]["fieldsV1"] == {"f:data": {"f:a": {}}}
    assert ("creator", "Update") in owners and "f:a" not in owners[("creator", "Update")]["fieldsV1"][
        "f:data"
    ]

    deploy = DEPLOY.format(ns=namespace)
    api.post(deploy, deployment("s"), params={"fieldManager": "creator"})
    current = api.get(deploy + "/s").json()
    current["status"] = {"replicas": 2, "observedGeneration": 1}
    with_status = api.put(deploy + "/s/status", current, params={"fieldManager": "controller"}).json()
    status_entry = entries(with_status)[("controller", "Update")]
    assert status_entry["subresource"] == "status"
    assert set(status_entry["fieldsV1"]) == {"f:status"}


def test_managed_fields_reset_and_validation(api: Client, namespace: str) -> None:
    path = CM.format(ns=namespace) + "/m"
    api.post(
        CM.format(ns=namespace), {"metadata": {"name": "m"}, "data": {"a": "1"}}, params={"fieldManager": "x"}
    )
    # An empty list leaves them alone (clients that do not know the field).
    kept = api.patch(path, {"metadata": {"managedFields": []}}, "application/merge-patch+json").json()
    assert kept["metadata"]["managedFields"]
    # A list with one empty entry strips them.
    stripped = api.patch(path, {"metadata": {"managedFields": [{}]}}, "application/merge-patch+json").json()
    assert "managedFields" not in stripped["metadata"]
    bad = api.patch(
        path,
        {"metadata": {"managedFields": [{"manager": "x", "operation": "Delete", "fieldsV1": {}}]}},
        "application/merge-patch+json",
    )
    assert bad.status_code == 400 and "metadata.managedFields" in bad.json()["message"]


def test_apply_bad_requests(api: Client, namespace: str) -> None:
    path = CM.format(ns=namespace) + "/x"
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    missing = api.patch(path, body, APPLY)
    assert missing.status_code == 422
    assert missing.json()["details"]["causes"][0]["field"] == "fieldManager"
    forced = api.patch(path, {"data": {}}, "application/merge-patch+json", params={"force": "true"})
    assert forced.status_code == 422 and forced.json()["details"]["causes"][0]["field"] == "force"
    wrong_name = apply(api, path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y"}}, "m")
    assert wrong_name.status_code == 400
    wrong_kind = apply(api, path, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}, "m")
    assert wrong_kind.status_code == 400
    strict = apply(
        api,
        path,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "bogus": 1},
        "m",
        fieldValidation="Strict",
    )
    assert strict.status_code == 400 and 'unknown field "bogus"' in strict.json()["message"]
    yaml_body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  k: v\n"
    dry = api.patch(path, yaml_body, APPLY, params={"fieldManager": "m", "dryRun": "All"})
    assert dry.status_code == 201 and dry.json()["data"] == {"k": "v"}
    assert api.get(path).status_code == 404
    assert api.patch(path, "a: [", APPLY, params={"fieldManager": "m"}).status_code == 400


def test_official_client_apply(shared_server: ServerThread, namespace: str) -> None:
    import kubernetes

    api_client = kubernetes.config.new_client_from_config(str(shared_server.kubeconfig))
    try:
        core = kubernetes.client.CoreV1Api(api_client)
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "official"}, "data": {"k": "v"}}
        result = core.patch_namespaced_config_map(
            "official", namespace, body, field_manager="py", _content_type=APPLY
        )
        assert result.data == {"k": "v"}
        assert [(m.manager, m.operation) for m in result.metadata.managed_fields] == [("py", "Apply")]
    finally:
        api_client.close()


def test_kubectl_server_side_apply(kubectl: Kubectl, namespace: str, tmp_path: Any) -> None:  # noqa: F811
    manifest = tmp_path / "d.json"
    manifest.write_text(json.dumps(deployment("ssa")))
    out = kubectl("apply", "--server-side", "-n", namespace, "-f", str(manifest)).stdout
    assert "serverside-applied" in out
    changed = deployment("ssa", image="nginx:1.28")
    manifest.write_text(json.dumps(changed))
    kubectl("apply", "--server-side", "-n", namespace, "-f", str(manifest))
    kubectl("scale", "deployment", "ssa", "--replicas=4", "-n", namespace)
    refused = kubectl("apply", "--server-side", "-n", namespace, "-f", str(manifest), check=False)
    assert refused.returncode != 0 and "conflict" in refused.stderr and ".spec.replicas" in refused.stderr
    kubectl("apply", "--server-side", "--force-conflicts", "-n", namespace, "-f", str(manifest))
    got = json.loads(
        kubectl("get", "deployment", "ssa", "-n", namespace, "-o", "json", "--show-managed-fields").stdout
    )
    assert got["spec"]["replicas"] == 2
    assert got["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"
    assert [m["operation"] for m in got["metadata"]["managedFields"]] == ["Apply"]


_MONGODB = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: mongodb, labels: {app: mongodb}}
spec:
  replicas: 1
  selector: {matchLabels: {app: mongodb}}
  template:
    metadata: {labels: {app: mongodb}}
    spec:
      containers:
      - name: mongodb
        image: mongo:latest
        env:
        - {name: MONGO_INITDB_ROOT_USERNAME, valueFrom: {secretKeyRef: {key: username, name: mongodb-secrets}}}
        - {name: MONGO_INITDB_ROOT_PASSWORD, valueFrom: {secretKeyRef: {key: password, name: mongodb-secrets}}}
        ports: [{containerPort: 27017}]
        volumeMounts: [{mountPath: /data/db, name: mongodb-data}]
      volumes:
      - {name: mongodb-data, persistentVolumeClaim: {claimName: mongodb-pvc}}
"""

#: What a cluster (kube-apiserver 1.32, a public report of ``kubectl get -o yaml
#: --show-managed-fields``) recorded for ``kubectl apply`` of ``_MONGODB``: ``f:rollingUpdate``,
#: a pointer struct, marked ``.``; ``f:strategy`` and ``f:template``, structs that are none, not.
_MONGODB_FIELDS = """
f:metadata:
  f:annotations: {.: {}, f:kubectl.kubernetes.io/last-applied-configuration: {}}
  f:labels: {.: {}, f:app: {}}
f:spec:
  f:progressDeadlineSeconds: {}
  f:replicas: {}
  f:revisionHistoryLimit: {}
  f:selector: {}
  f:strategy:
    f:rollingUpdate: {.: {}, f:maxSurge: {}, f:maxUnavailable: {}}
    f:type: {}
  f:template:
    f:metadata:
      f:labels: {.: {}, f:app: {}}
    f:spec:
      f:containers:
        k:{"name":"mongodb"}:
          .: {}
          f:env:
            .: {}
            k:{"name":"MONGO_INITDB_ROOT_PASSWORD"}:
              {.: {}, f:name: {}, f:valueFrom: {.: {}, f:secretKeyRef: {}}}
            k:{"name":"MONGO_INITDB_ROOT_USERNAME"}:
              {.: {}, f:name: {}, f:valueFrom: {.: {}, f:secretKeyRef: {}}}
          f:image: {}
          f:imagePullPolicy: {}
          f:name: {}
          f:ports:
            .: {}
            k:{"containerPort":27017,"protocol":"TCP"}: {.: {}, f:containerPort: {}, f:protocol: {}}
          f:resources: {}
          f:terminationMessagePath: {}
          f:terminationMessagePolicy: {}
          f:volumeMounts:
            .: {}
            k:{"mountPath":"/data/db"}: {.: {}, f:mountPath: {}, f:name: {}}
      f:dnsPolicy: {}
      f:restartPolicy: {}
      f:schedulerName: {}
      f:securityContext: {}
      f:terminationGracePeriodSeconds: {}
      f:volumes:
        .: {}
        k:{"name":"mongodb-data"}: {.: {}, f:name: {}, f:persistentVolumeClaim: {.: {}, f:claimName: {}}}
"""


def test_kubectl_apply_records_the_fields_a_cluster_records(
    kubectl: Kubectl,  # noqa: F811
    api: Client,
    namespace: str,
) -> None:
    """An Update owns the lists it creates and, inside a list element it creates, every object,
    as structured-merge-diff's comparison with the kind's zero value makes it: a cluster's own
    record of the same apply, key for key and in its order; lists the zero value holds (a
    pod's containers) are not marked. A later update's lists and objects inside an element that
    was there already are marked as they are created."""
    import yaml

    kubectl("apply", "-n", namespace, "-f", "-", stdin=_MONGODB)
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/mongodb"
    (entry,) = api.get(path).json()["metadata"]["managedFields"]
    assert entry["manager"] == "kubectl-client-side-apply"
    assert json.dumps(entry["fieldsV1"]) == json.dumps(yaml.safe_load(_MONGODB_FIELDS))
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "mongodb", "livenessProbe": {"exec": {"command": ["true"]}}, "args": ["x"]}
                    ],
                    "tolerations": [{"key": "k", "operator": "Exists"}],
                }
            }
        }
    }
    patched = api.patch(f"{path}?fieldManager=editor", patch, "application/strategic-merge-patch+json")
    assert patched.status_code == 200, patched.text
    assert entries(patched.json())[("editor", "Update")]["fieldsV1"] == {
        "f:spec": {
            "f:template": {
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"mongodb"}': {
                            "f:args": {},  # an atomic list: a leaf
                            "f:livenessProbe": {
                                ".": {},
                                "f:exec": {".": {}, "f:command": {}},
                                "f:failureThreshold": {},
                                "f:periodSeconds": {},
                                "f:successThreshold": {},
                                "f:timeoutSeconds": {},
                            },
                        }
                    },
                    "f:tolerations": {},  # atomic too
                }
            }
        }
    }
    # The container's empty resources fill up: they stay their creator's (no side lacked them).
    limits = {"name": "mongodb", "resources": {"limits": {"cpu": "1"}}}
    sized = {"spec": {"template": {"spec": {"containers": [limits]}}}}
    patched = api.patch(f"{path}?fieldManager=sizer", sized, "application/strategic-merge-patch+json")
    assert patched.status_code == 200, patched.text
    owners = entries(patched.json())

    def container(manager: str) -> Any:
        fields = owners[(manager, "Update")]["fieldsV1"]
        return fields["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"mongodb"}']

    assert container("kubectl-client-side-apply")["f:resources"] == {}
    assert container("sizer") == {"f:resources": {"f:limits": {".": {}, "f:cpu": {}}}}
    # A pod's affinity and its nodeAffinity are pointers in Go: the update that makes them owns
    # them (its atomic node selector is a leaf); the strategy's type, in a struct that is none,
    # is a field of the struct the creator made, which stays unmarked.
    node_affinity = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}
    placed = {
        "spec": {
            "strategy": {"type": "Recreate", "rollingUpdate": None},
            "template": {"spec": {"affinity": {"nodeAffinity": node_affinity}}},
        }
    }
    patched = api.patch(f"{path}?fieldManager=placer", placed, "application/strategic-merge-patch+json")
    assert patched.status_code == 200, patched.text
    assert entries(patched.json())[("placer", "Update")]["fieldsV1"] == {
        "f:spec": {
            "f:strategy": {"f:type": {}},
            "f:template": {
                "f:spec": {
                    "f:affinity": {
                        ".": {},
                        "f:nodeAffinity": {".": {}, "f:requiredDuringSchedulingIgnoredDuringExecution": {}},
                    }
                }
            },
        }
    }


_elements = st.sampled_from(["f:a", "f:b", "f:spec", 'k:{"name":"c"}', 'v:"x"', "i:0", "f:data"])
_paths = st.lists(_elements, min_size=1, max_size=4).map(tuple)


@given(st.sets(_paths, max_size=12))
def test_fields_v1_round_trip(paths: set[tuple[str, ...]]) -> None:
    encoded = fieldsets.encode_fields_v1(paths)
    assert fieldsets.decode_fields_v1(json.loads(json.dumps(encoded))) == paths


def _compare_values(lhs: Any, rhs: Any) -> int:
    """structured-merge-diff's ``value.Compare``, as its Go reads: numbers (by value), strings,
    booleans, lists, maps, null; each kind before the next."""

    def rank(value: Any) -> int:
        if value is None:
            return 5
        if isinstance(value, bool):
            return 2
        if isinstance(value, int | float):
            return 0
        return {str: 1, list: 3, dict: 4}[type(value)]

    if rank(lhs) != rank(rhs):
        return -1 if rank(lhs) < rank(rhs) else 1
    if isinstance(lhs, list):
        for left, right in zip(lhs, rhs, strict=False):
            if compared := _compare_values(left, right):
                return compared
        return (len(lhs) > len(rhs)) - (len(lhs) < len(rhs))
    if isinstance(lhs, dict):  # MapCompare: the union of keys in order; a missing key loses
        for index, key in enumerate(sorted(set(lhs) | set(rhs))):
            if index == len(lhs):
                return -1
            if index == len(rhs):
                return 1
            if key not in lhs:
                return 1
            if key not in rhs:
                return -1
            if compared := _compare_values(lhs[key], rhs[key]):
                return compared
        return 0
    if lhs is None:
        return 0
    return (lhs > rhs) - (lhs < rhs)


def _compare_elements(lhs: str, rhs: str) -> int:
    """``PathElement.Compare``: fields, then keys, values and indexes, each among its own kind."""
    kinds = ["f:", "k:", "v:", "i:"]
    if lhs[:2] != rhs[:2]:
        return -1 if kinds.index(lhs[:2]) < kinds.index(rhs[:2]) else 1
    if lhs[:2] == "f:":
        return (lhs > rhs) - (lhs < rhs)
    if lhs[:2] == "i:":
        return (int(lhs[2:]) > int(rhs[2:])) - (int(lhs[2:]) < int(rhs[2:]))
    return _compare_values(json.loads(lhs[2:]), json.loads(rhs[2:]))


_scalars = st.integers(-20, 20) | st.floats(-20, 20, allow_nan=False) | st.text(max_size=2) | st.booleans()
_json_values = st.recursive(
    st.none() | _scalars,
    lambda c: st.lists(c, max_size=2) | st.dictionaries(st.sampled_from("ab"), c, max_size=2),
    max_leaves=4,
)
_typed_elements = st.one_of(
    st.sampled_from(["f:a", "f:b", "f:ports", "f:\u00e9t\u00e9"]),
    st.dictionaries(st.sampled_from(["name", "port", "protocol"]), _json_values, min_size=1).map(
        lambda key: "k:" + json.dumps(dict(sorted(key.items())), separators=(",", ":"))
    ),
    _json_values.map(lambda value: "v:" + json.dumps(value, separators=(",", ":"))),
    st.integers(0, 12).map(lambda index: f"i:{index}"),
)


@given(st.sets(st.lists(_typed_elements, min_size=1, max_size=3).map(tuple), max_size=10))
def test_fields_v1_orders_elements_as_structured_merge_diff(paths: set[tuple[str, ...]]) -> None:
    """Every node's children come in upstream's order (keys and values by their typed value,
    indexes by number, fields before them), "." first; the set itself round-trips."""
    from functools import cmp_to_key

    # Values equal as upstream compares them (1 and 1.0) are one element there: not two here.
    typed = {element for path in paths for element in path if element[:2] in ("k:", "v:")}
    elements = sorted(typed, key=cmp_to_key(_compare_elements))
    assume(all(_compare_elements(a, b) != 0 for a, b in itertools.pairwise(elements)))
    encoded = fieldsets.encode_fields_v1(fieldsets.sorted_in_steps(paths))
    assert fieldsets.decode_fields_v1(encoded) == paths

    def check(node: dict[str, Any]) -> None:
        keys = list(node)
        if "." in keys:
            assert keys[0] == "."
            keys = keys[1:]
        assert keys == sorted(keys, key=cmp_to_key(_compare_elements))
        for child in node.values():
            check(child)

    check(encoded)


@given(
    st.recursive(
        st.none() | st.integers() | st.text(max_size=3),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
        max_leaves=10,
    )
)
def test_decoding_garbage_raises_value_error_only(document: Any) -> None:
    with contextlib.suppress(ValueError):
        fieldsets.decode_fields_v1(document)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        (("f:spec", "f:replicas"), ".spec.replicas"),
        (
            ("f:spec", "f:ports", 'k:{"containerPort":80,"protocol":"TCP"}', "f:name"),
            '.spec.ports[containerPort=80,protocol="TCP"].name',
        ),
        (("f:metadata", "f:finalizers", 'v:"a/b"'), '.metadata.finalizers[="a/b"]'),
    ],
)
def test_path_strings(path: tuple[str, ...], text: str) -> None:
    assert fieldsets.path_string(path) == text


def test_field_sets_follow_the_schema() -> None:
    """A Deployment's members as upstream's managedFields show them: the selector (a LabelSelector,
    ``+structType=atomic``) is one member and its keys none; containers a list map by name; the
    finalizers a set; labels a map of members. An edit inside the selector changes the selector."""
    from kubeloop.apiserver.catalog import schemas

    schema = schemas.kind_schema("apps", "v1", "Deployment")
    obj = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}, "finalizers": ["a/b"]},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    }  # fmt: skip
    container = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"c"}')
    assert set(fieldsets.field_set(obj, schema)) == {
        ("f:metadata", "f:labels", "f:app"),
        ("f:metadata", "f:finalizers", 'v:"a/b"'),
        ("f:spec", "f:selector"),
        ("f:spec", "f:template", "f:metadata", "f:labels", "f:app"),
        container, (*container, "f:image"), (*container, "f:name"),
    }  # fmt: skip
    edited = copy.deepcopy(obj)
    edited["spec"]["selector"]["matchLabels"]["tier"] = "front"
    scope = fieldmanager._scope_test("", True)
    assert fieldsets.update_changes(obj, edited, schema, scope) == ({("f:spec", "f:selector")}, set())


def test_the_walks_plans_keep_no_map_keys() -> None:
    """A map's keys are the user's data: the plans the walk keeps per schema node remember the
    fields the schema declares, never the keys of the maps it walked."""
    from kubeloop.apiserver.catalog import schemas

    schema = schemas.kind_schema("", "v1", "ConfigMap")
    for i in range(100):
        fieldsets.field_set({"data": {f"key-{i}": "v"}, "metadata": {"labels": {f"l{i}": "v"}}}, schema)
    root = fieldsets._plan(fieldsets.resolve(schema))
    assert root.child("data")[0]._children == {}
    assert root.child("metadata")[0].child("labels")[0]._children == {}
    assert {"data", "metadata"} <= set(root._children) <= set(fieldsets.resolve(schema)["properties"])


def test_the_walks_memos_hold_a_bounded_number_of_schema_nodes() -> None:
    """A CRD's schema is a new dict at every write of the CRD; the memos of resolved nodes, list
    kinds and plans keep the nodes they hold alive, so they start again once full instead of
    keeping every replaced schema."""
    memos = (fieldsets._RESOLVED, fieldsets._LIST_KINDS, fieldsets._PLANS)
    properties = {f"field{i}": {"type": "array", "items": {"type": "string"}} for i in range(500)}
    obj = {"spec": {f"field{i}": ["a"] for i in range(500)}}
    for _ in range(3 * fieldsets._PER_NODE_LIMIT // 500):
        schema = copy.deepcopy(
            {"type": "object", "properties": {"spec": {"type": "object", "properties": properties}}}
        )
        fieldsets.field_set(obj, schema)
        assert all(len(memo) <= fieldsets._PER_NODE_LIMIT for memo in memos)
    assert all(len(memo) > 0 for memo in memos)


# ---------------------------------------------------------------------------- updates by difference


def _whole_set_changes(
    old: dict[str, Any], new: dict[str, Any], schema: Any, subresource: str, has_status: bool
) -> tuple[set[tuple[str, ...]], set[tuple[str, ...]]]:
    """What an Update changes, from both objects' whole field sets (the definition)."""
    old_maps: set[tuple[str, ...]] = set()
    new_maps: set[tuple[str, ...]] = set()
    before = fieldmanager.scoped(fieldsets.field_set(old, schema, old_maps), subresource, has_status)
    after = fieldmanager.scoped(fieldsets.field_set(new, schema, new_maps), subresource, has_status)
    changed, removed = fieldsets.changed_paths(before, after)
    in_scope = set(
        fieldmanager.scoped(
            {p: fieldsets.Member(None, False) for p in new_maps | old_maps}, subresource, has_status
        )
    )
    # Nor is one the other side's Go object holds: a struct that is no pointer, below one held.
    held = fieldsets.go_holds
    changed |= {p for p in new_maps & in_scope if p not in old_maps and p not in before and not held(old, schema, p)}
    removed |= {p for p in old_maps & in_scope if p not in new_maps and p not in after and not held(new, schema, p)}
    # An empty object or list, or a null, where the other side holds a container is neither
    # added nor removed: only a side that lacks the container adds or removes it.
    empty, holds = fieldsets.empty_value, fieldsets.container_at
    changed -= {
        p
        for p in changed
        if empty(after.get(p)) and (not before[p].leaf if p in before else holds(old, schema, p))
    }
    removed -= {p for p in removed if empty(before.get(p)) and holds(new, schema, p)}
    return changed, removed


_KEYS = st.sampled_from(["a", "b", "name", "image", "labels", "app", "x"])
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["", "web", "nginx"]))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=3)),
    max_leaves=12,
)


def _deployment_like(draw: Any) -> dict[str, Any]:
    """A Deployment with list maps (containers by name, ports by port and protocol), maps
    (labels), atomic lists (args) and sets (finalizers), and arbitrary values in places."""
    container = st.fixed_dictionaries(
        {"name": st.sampled_from(["web", "side"])},
        optional={
            "image": st.sampled_from(["nginx", "redis", ""]),
            "args": st.lists(st.sampled_from(["-v", "-q"]), max_size=2),
            "ports": st.lists(
                st.fixed_dictionaries(
                    {"containerPort": st.sampled_from([80, 443])},
                    optional={"protocol": st.sampled_from(["TCP", "UDP"])},
                ),
                max_size=2,
            ),
            "env": st.lists(
                st.fixed_dictionaries({"name": st.sampled_from(["A", "B"])}, optional={"value": _SCALARS}),
                max_size=2,
            ),
            "x": _VALUES,
        },
    )
    labels = st.dictionaries(_KEYS, st.sampled_from(["web", "db"]), max_size=3)
    obj = {
        # What the server strips (apiVersion, kind, the metadata it owns) changes too, and
        # metadata comes and goes whole.
        "apiVersion": draw(st.sampled_from(["apps/v1", "apps/v1beta2"])),
        "kind": draw(st.sampled_from(["Deployment", "Other"])),
        "metadata": draw(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["web", "db"])},
                optional={
                    "labels": labels,
                    "annotations": labels,
                    "finalizers": st.lists(st.sampled_from(["a/b", "c/d"]), max_size=2),
                    "resourceVersion": st.sampled_from(["1", "2"]),
                    "generation": st.integers(1, 2),
                },
            )
        ),
        **draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "spec": st.fixed_dictionaries(
                        {},
                        optional={
                            "replicas": st.one_of(st.none(), st.integers(0, 2)),
                            "selector": st.fixed_dictionaries({}, optional={"matchLabels": labels}),
                            # A struct and, in it, one that is a pointer in Go (marked when made).
                            "strategy": st.fixed_dictionaries(
                                {},
                                optional={
                                    "type": st.sampled_from(["RollingUpdate", "Recreate"]),
                                    "rollingUpdate": st.fixed_dictionaries(
                                        {}, optional={"maxSurge": st.integers(0, 2)}
                                    ),
                                },
                            ),
                            "template": st.fixed_dictionaries(
                                {},
                                optional={
                                    "metadata": st.fixed_dictionaries({}, optional={"labels": labels}),
                                    "spec": st.fixed_dictionaries(
                                        {},
                                        optional={
                                            "containers": st.lists(container, max_size=2),
                                            "nodeSelector": labels,
                                            "securityContext": st.fixed_dictionaries(
                                                {},
                                                optional={
                                                    "runAsUser": st.integers(0, 2),
                                                    "seLinuxOptions": st.fixed_dictionaries(
                                                        {}, optional={"level": st.just("s0")}
                                                    ),
                                                },
                                            ),
                                        },
                                    ),
                                },
                            ),
                            "x": _VALUES,
                        },
                    ),
                    "status": st.dictionaries(
                        st.sampled_from(["replicas", "conditions", "x"]), _VALUES, max_size=2
                    ),
                },
            )
        ),
    }
    if draw(st.booleans()) and draw(st.booleans()):
        del obj["metadata"]
    return obj


@st.composite
def _update_pairs(draw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    old = _deployment_like(draw)
    new = _deployment_like(draw) if draw(st.booleans()) else copy.deepcopy(old)
    if draw(st.booleans()):  # a small edit of the old object, as most updates are
        new = copy.deepcopy(old)
        new.setdefault("spec", {})["replicas"] = draw(st.integers(0, 3))
    holders = list(_containers_in(new))
    if holders and draw(st.booleans()):  # an object or list filled, emptied or nulled, nothing else
        holder, key = draw(st.sampled_from(holders))
        value = holder[key]
        if draw(st.booleans()):
            holder[key] = None
        elif isinstance(value, dict):
            holder[key] = {} if value else {"app": "web"}
        else:
            holder[key] = [] if value else [{"name": "A"}]
    return old, new


def _containers_in(value: Any) -> Any:
    """(holder, key) of every dict and list below ``value``."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(item, (dict, list)):
            yield value, key
            yield from _containers_in(item)


@given(_update_pairs(), st.sampled_from(["", "status"]), st.booleans())
def test_updates_by_difference_match_whole_field_sets(
    pair: tuple[dict[str, Any], dict[str, Any]], subresource: str, has_status: bool
) -> None:
    from kubeloop.apiserver.catalog import schemas

    old, new = pair
    schema = schemas.kind_schema("apps", "v1", "Deployment")
    scope = fieldmanager._scope_test(subresource, has_status)
    assert fieldsets.update_changes(old, new, schema, scope) == _whole_set_changes(
        old, new, schema, subresource, has_status
    )
    untyped: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert fieldsets.update_changes(old, new, untyped, scope) == _whole_set_changes(
        old, new, untyped, subresource, has_status
    )


@st.composite
def _ingress_like(draw: Any) -> dict[str, Any]:
    """Ingresses whose default backend (a pointer in Go) holds a service (a pointer) holding a
    port (a struct that is none), each there, empty or absent."""
    port = st.fixed_dictionaries({}, optional={"number": st.integers(80, 81), "name": st.just("http")})
    service = st.fixed_dictionaries({}, optional={"name": st.sampled_from(["a", "b"]), "port": port})
    backend = st.fixed_dictionaries({}, optional={"service": service})
    spec = st.fixed_dictionaries({}, optional={"defaultBackend": backend, "ingressClassName": st.just("c")})
    return {"metadata": {"name": "i"}, **draw(st.fixed_dictionaries({}, optional={"spec": spec}))}


@given(_ingress_like(), _ingress_like())
def test_updates_by_difference_match_whole_field_sets_through_pointer_structs(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    """Below a struct that is a pointer in Go, an update's changes by difference are those of
    the whole field sets, the marks of what it creates included."""
    from kubeloop.apiserver.catalog import schemas

    schema = schemas.kind_schema("networking.k8s.io", "v1", "Ingress")
    scope = fieldmanager._scope_test("", True)
    assert fieldsets.update_changes(old, new, schema, scope) == _whole_set_changes(old, new, schema, "", True)


def test_the_pointer_structs_are_struct_fields_of_the_served_schemas() -> None:
    """``pointerstructs`` (read from client-go's schema) names, for the definitions the server
    serves, only fields those definitions hold whose schema is a struct; and the common kinds'
    are there (a stale or misread file would mark nothing, or the wrong fields)."""
    from kubeloop.apiserver.catalog import schemas
    from kubeloop.apiserver.patch.pointerstructs import POINTER_STRUCTS

    definitions = schemas.definitions()
    served = [name for name in POINTER_STRUCTS if name in definitions]
    assert len(served) > 150
    for name in served:
        properties = definitions[name]["properties"]
        for field in POINTER_STRUCTS[name]:
            assert schemas.resolve(properties[field]).get("properties"), (name, field)
    assert POINTER_STRUCTS["io.k8s.api.core.v1.PodSpec"] >= {"affinity", "securityContext", "resources"}
    assert "resources" not in POINTER_STRUCTS["io.k8s.api.core.v1.Container"]
    assert POINTER_STRUCTS["io.k8s.api.apps.v1.DeploymentStrategy"] == {"rollingUpdate"}
    # The kinds of the servers beside kube-apiserver's own groups: their clients' schemas.
    crds = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1."
    assert POINTER_STRUCTS[f"{crds}CustomResourceDefinitionSpec"] == {"conversion"}
    assert POINTER_STRUCTS["io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceSpec"] == {"service"}


def test_threads_asking_for_the_schemas_at_once_get_one_copy() -> None:
    """The pointer structs are found by the definitions' identities: threads loading them at
    once (the serving loop's and a worker loop's) must share one copy, in a fresh process."""
    code = (
        "import threading\n"
        "from kubeloop.apiserver.catalog import schemas\n"
        "start = threading.Barrier(8)\n"
        "seen = []\n"
        "def load():\n"
        "    start.wait()\n"
        "    seen.append(id(schemas.definitions()))\n"
        "threads = [threading.Thread(target=load) for _ in range(8)]\n"
        "[t.start() for t in threads]\n"
        "[t.join() for t in threads]\n"
        "print(len(seen), len(set(seen)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["8", "1"]


def test_an_update_marks_the_pointer_structs_it_makes_and_not_the_structs_that_are_none() -> None:
    """What a Go zero value lacks (a struct that is a pointer: an Ingress's defaultBackend and its
    service) is marked when an Update makes it; a struct it holds (a Deployment's strategy) is
    not, but for what is made with a pointer struct around it (a rollingUpdate's fields)."""
    from kubeloop.apiserver.catalog import schemas

    scope = fieldmanager._scope_test("", True)
    ingress = schemas.kind_schema("networking.k8s.io", "v1", "Ingress")
    backend = {"spec": {"defaultBackend": {"service": {"name": "a", "port": {"number": 80}}}}}
    made, _ = fieldsets.update_changes({"spec": {"ingressClassName": "c"}}, backend, ingress, scope)
    service = ("f:spec", "f:defaultBackend", "f:service")
    assert made == {service[:2], service, (*service, "f:name"), (*service, "f:port")}
    deployment = schemas.kind_schema("apps", "v1", "Deployment")
    strategy = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    made, _ = fieldsets.update_changes({"spec": {"replicas": 1}}, strategy, deployment, scope)
    rolling = ("f:spec", "f:strategy", "f:rollingUpdate")
    assert made == {(*rolling[:2], "f:type"), rolling, (*rolling, "f:maxSurge")}
    created = fieldsets.created_fields_v1(strategy, deployment, lambda key: True)
    assert created == {
        "f:spec": {"f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}}, "f:type": {}}}
    }
    # Inside a pointer struct on both sides, or a list element, a struct that is no pointer is
    # in the old Go object even where its JSON lacks it: setting it marks its fields only.
    levels = schemas.kind_schema("flowcontrol.apiserver.k8s.io", "v1", "PriorityLevelConfiguration")
    limited: dict[str, Any] = {"spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5}}}
    rejecting = copy.deepcopy(limited)
    rejecting["spec"]["limited"]["limitResponse"] = {"type": "Reject"}
    response = ("f:spec", "f:limited", "f:limitResponse")
    assert fieldsets.update_changes(limited, rejecting, levels, scope) == ({(*response, "f:type")}, set())
    assert fieldsets.update_changes(rejecting, limited, levels, scope) == (set(), {(*response, "f:type")})
    pod = schemas.kind_schema("", "v1", "Pod")
    bare: dict[str, Any] = {"spec": {"containers": [{"name": "c"}]}}
    sized = {"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]}}
    resources = ("f:spec", "f:containers", 'k:{"name":"c"}', "f:resources")
    assert fieldsets.update_changes(bare, sized, pod, scope) == (
        {(*resources, "f:limits"), (*resources, "f:limits", "f:cpu")},
        set(),
    )


@given(st.data())
def test_a_field_set_leaves_out_what_the_server_owns_as_a_whole_walk_would(data: Any) -> None:
    """``field_set`` does not walk the metadata fields the server owns; its answer (and the maps
    it finds) is that of a walk of the whole object with those paths dropped after."""
    from kubeloop.apiserver.catalog import schemas

    obj = _deployment_like(data.draw)
    if "metadata" in obj:
        owned = data.draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "uid": st.just("u-1"),
                    "creationTimestamp": st.just("2026-01-01T00:00:00Z"),
                    "namespace": st.just("default"),
                    "selfLink": st.just("/x"),
                    "managedFields": st.just([{"manager": "m", "operation": "Update", "fieldsV1": {}}]),
                },
            )
        )
        obj["metadata"].update(owned)
    schema = schemas.kind_schema("apps", "v1", "Deployment")
    maps: set[tuple[str, ...]] = set()
    walked: dict[tuple[str, ...], Any] = {}
    walked_maps: set[tuple[str, ...]] = set()
    fieldsets._walk(obj, fieldsets._plan(fieldsets.resolve(schema)), (), walked, walked_maps)
    for stripped in fieldsets.STRIPPED:
        walked.pop(stripped, None)
    assert fieldsets.field_set(obj, schema, maps) == walked
    assert maps == walked_maps


#: Where a create's encoding could go wrong: list-map keys and set values that order by their
#: typed value, not their text (9 before 10), a map of structs (its keys undeclared, each a
#: member with fields below it) and list-map keys given twice.
_GADGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "properties": {
                "ports": map_list(
                    {"port": {"type": "integer"}, "name": {"type": "string"}, "on": {"type": "boolean"}},
                    keys=("port",),
                ),
                "byName": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
                    },
                },
                "codes": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}},
            },
        },
    },
}
_gadgets = st.fixed_dictionaries(
    {
        "apiVersion": st.just("x/v1"),
        "kind": st.just("Gadget"),
        "metadata": st.just({"name": "g"}),
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "ports": st.lists(
                    st.fixed_dictionaries(
                        {"port": st.sampled_from([9, 10, 100])},
                        optional={"name": st.sampled_from(["a", "b"]), "on": st.booleans()},
                    ),
                    max_size=3,
                ),
                "byName": st.dictionaries(
                    st.sampled_from(["x", "y"]),
                    st.fixed_dictionaries({}, optional={"a": st.just("s"), "b": st.integers(0, 2)}),
                    min_size=1,
                    max_size=2,
                ),
                "codes": st.lists(st.sampled_from([9, 10, 100]), max_size=3),
            },
        ),
    }
)


def _created_the_general_way(
    obj: dict[str, Any], schema: Any, has_status: bool, unstructured: bool = False
) -> list[dict[str, Any]]:
    entries = fieldmanager.record_update(
        [],
        None,
        obj,
        schema,
        manager="m",
        api_version="v1",
        subresource="",
        has_status=has_status,
        unstructured=unstructured,
    )
    return fieldmanager.encode_entries(entries) if entries else []


def _without_time(managed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in entry.items() if k != "time"} for entry in managed]


@given(st.data(), st.booleans())
def test_a_create_encodes_its_fields_as_the_general_way_does(data: Any, has_status: bool) -> None:
    """``record_create`` walks an object into its FieldsV1 at once; what it writes is what the
    general way writes (a field set, the maps a create makes members, sorted and encoded), with
    the members in the same order, for typed, untyped and CRD-like schemas, of built-in kinds
    and of custom resources (``unstructured``). A list-map holding a key twice (whose elements a
    field set merges) goes the general way."""
    from kubeloop.apiserver.catalog import schemas

    unstructured = data.draw(st.booleans(), label="unstructured")

    which = data.draw(st.sampled_from(["deployment", "untyped", "widget", "gadget"]))
    schema: Any
    if which == "widget":
        schema, obj = _WIDGET_SCHEMA, data.draw(_widget_configs())
    elif which == "gadget":
        schema, obj = _GADGET_SCHEMA, data.draw(_gadgets)
    else:
        obj = _deployment_like(data.draw)
        schema = (
            schemas.kind_schema("apps", "v1", "Deployment")
            if which == "deployment"
            else {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        )
    expected = _created_the_general_way(obj, schema, has_status, unstructured)
    created = fieldmanager.record_create(
        obj, schema, manager="m", api_version="v1", has_status=has_status, unstructured=unstructured
    )
    assert json.dumps(_without_time(created)) == json.dumps(_without_time(expected))
    for entry in created:
        assert not ({"f:apiVersion", "f:kind"} & set(entry["fieldsV1"]))
        assert "." not in entry["fieldsV1"].get("f:metadata", {"f:x": {}})


_STRINGS_BY_KEY = {"type": "object", "additionalProperties": {"type": "string"}}
_STATUSED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "metadata": {"type": "object", "properties": {"labels": _STRINGS_BY_KEY}},
        "spec": {
            "type": "object",
            "properties": {
                "size": {"type": "integer"},
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            },
        },
        "status": {
            "type": "object",
            "properties": {"phase": {"type": "string"}, "count": {"type": "integer"}, "m": _STRINGS_BY_KEY},
        },
    },
}
_small_maps = st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["v1", "v2"]), max_size=2)
_statused_specs = st.fixed_dictionaries(
    {},
    optional={
        "size": st.integers(0, 2),
        "tags": st.lists(st.sampled_from(["x", "y"]), min_size=1, unique=True),
    },
)
_statuses = st.fixed_dictionaries(
    {}, optional={"phase": st.sampled_from(["A", "B"]), "count": st.integers(0, 2), "m": _small_maps}
)


@given(st.data(), st.booleans())
def test_an_update_keeps_entries_it_leaves_alone_as_the_general_way_does(data: Any, has_status: bool) -> None:
    """``record_stored_update`` keeps the stored items of managers whose fields a write leaves
    alone without parsing them; through a run of writes by three managers, through the main
    resource and /status, with the list sent back, emptied or left out, and the stored list
    parsed already or not, what it writes is what the general way writes
    (``encode_entries(record_update(starting_entries(old, new), ...))``), times aside, for a
    built-in kind and a custom resource (``unstructured``)."""
    unstructured = data.draw(st.booleans(), label="unstructured")

    def metadata(draw: Any, managed: Any) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": "w", "namespace": "d"}
        labels = draw(_small_maps)
        if labels:
            meta["labels"] = labels
        if managed is not None:
            meta["managedFields"] = managed
        return meta

    old: dict[str, Any] = {"apiVersion": "x/v1", "kind": "W", "metadata": metadata(data.draw, None)}
    old["spec"] = data.draw(_statused_specs)
    created = fieldmanager.record_create(
        old,
        _STATUSED_SCHEMA,
        manager="a",
        api_version="x/v1",
        has_status=has_status,
        unstructured=unstructured,
    )
    if created:
        old["metadata"]["managedFields"] = created
    for _ in range(data.draw(st.integers(1, 4))):
        manager = data.draw(st.sampled_from(["a", "b", "c"]))
        subresource = data.draw(st.sampled_from(["", "status"])) if has_status else ""
        stored = old["metadata"].get("managedFields")
        sent = data.draw(st.sampled_from(["left out", "emptied", "sent back"]))
        managed = {"left out": None, "emptied": [], "sent back": copy.deepcopy(stored)}[sent]
        if subresource == "status":  # as the strategy keeps it: the stored spec, a new status
            new = {**old, "metadata": metadata(data.draw, managed), "status": data.draw(_statuses)}
        else:
            new = {"apiVersion": "x/v1", "kind": "W", "metadata": metadata(data.draw, managed)}
            new["spec"] = data.draw(_statused_specs)
            if "status" in old and has_status:
                new["status"] = old["status"]
            elif not has_status and data.draw(st.booleans()):
                new["status"] = data.draw(_statuses)
        if data.draw(st.booleans()) and isinstance(stored, list):
            fieldmanager.live_entries(stored)  # a list the server may have kept parsed
        options = {
            "manager": manager,
            "api_version": "x/v1",
            "subresource": subresource,
            "has_status": has_status,
            "unstructured": unstructured,
        }
        entries = fieldmanager.record_update(
            fieldmanager.starting_entries(old, new), old, new, _STATUSED_SCHEMA, **options
        )
        expected = fieldmanager.encode_entries(entries) if entries else []
        written = fieldmanager.record_stored_update(old, new, _STATUSED_SCHEMA, **options)
        assert json.dumps(_without_time(written)) == json.dumps(_without_time(expected))
        new["metadata"] = {k: v for k, v in new["metadata"].items() if k != "managedFields"}
        if written:
            new["metadata"]["managedFields"] = data.draw(st.sampled_from([written, expected]))
        old = new


def test_a_status_write_keeps_the_creators_entry_unparsed(monkeypatch: pytest.MonkeyPatch) -> None:
    """An operator's status write beside the entry its object's creator left: that item is
    kept as stored (the same object, never decoded), nothing is kept parsed for the next write,
    and the operator's entry follows it; a later write of the creator's fields goes the general
    way, which parses the list and keeps what it writes parsed."""
    decoded: list[Any] = []
    decode = fieldmanager.decode_fields_v1

    def counted(fields: Any) -> Any:
        decoded.append(fields)
        return decode(fields)

    monkeypatch.setattr(fieldmanager, "decode_fields_v1", counted)
    old: dict[str, Any] = {"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "w"}, "spec": {"size": 1}}
    old["metadata"]["managedFields"] = fieldmanager.record_create(
        old, _STATUSED_SCHEMA, manager="writer", api_version="x/v1", has_status=True
    )
    (creator,) = old["metadata"]["managedFields"]
    new = {**old, "metadata": dict(old["metadata"]), "status": {"phase": "A"}}
    options = {"api_version": "x/v1", "has_status": True}
    written = fieldmanager.record_stored_update(
        old, new, _STATUSED_SCHEMA, manager="operator", subresource="status", **options
    )
    assert written[0] is creator
    assert decoded == []  # the creator's item was not parsed
    assert id(written) not in fieldmanager._PARSED  # and nothing was kept parsed
    assert _without_time(written[1:]) == [
        {
            "manager": "operator",
            "operation": "Update",
            "apiVersion": "x/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:phase": {}}},
            "subresource": "status",
        }
    ]
    again = {**new, "metadata": {**new["metadata"], "managedFields": written}, "spec": {"size": 2}}
    taken = fieldmanager.record_stored_update(
        {**new, "metadata": {**new["metadata"], "managedFields": written}},
        again,
        _STATUSED_SCHEMA,
        manager="editor",
        subresource="",
        **options,
    )
    assert [entry["manager"] for entry in taken] == ["operator", "editor"]  # the creator's size taken
    assert decoded and fieldmanager._PARSED[id(taken)][0] is taken  # the general way: parsed, kept


def test_a_writers_own_malformed_item_is_refused_by_its_index() -> None:
    """The writer's own stored item is the one the quick way parses: malformed, the write is
    refused naming its place in the list, as the general way names it."""
    from kubeloop import errors

    creator = {
        "manager": "writer",
        "operation": "Update",
        "apiVersion": "x/v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:size": {}}},
    }
    mine = {
        **creator,
        "manager": "operator",
        "subresource": "status",
        "fieldsV1": {"f:status": {"k:{bad": {}}},
    }
    old = {"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "w", "managedFields": [creator, mine]}}
    new = {**old, "metadata": dict(old["metadata"]), "status": {"phase": "A"}}
    with pytest.raises(errors.BadRequest, match=r"managedFields\[1\]\.fieldsV1"):
        fieldmanager.record_stored_update(
            old,
            new,
            _STATUSED_SCHEMA,
            manager="operator",
            api_version="x/v1",
            subresource="status",
            has_status=True,
        )


def test_a_create_leaves_metadata_to_the_server_in_a_crds_schema() -> None:
    """A CRD's schema declares metadata as an object without fields, a map to the field walk:
    the map a create makes is its writer's, but metadata itself is stripped from every set, as
    upstream strips it (it was written ``"f:metadata": {}``)."""
    schema = {
        "type": "object",
        "properties": {
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
        },
    }
    obj = {
        "apiVersion": "x/v1",
        "kind": "W",
        "metadata": {"name": "w", "namespace": "d"},
        "spec": {"size": 1},
    }
    for managed in (
        fieldmanager.record_create(obj, schema, manager="m", api_version="x/v1", has_status=False),
        _created_the_general_way(obj, schema, False),
    ):
        assert [entry["fieldsV1"] for entry in managed] == [{"f:spec": {"f:size": {}}}]
    labelled = {**obj, "metadata": {"name": "w", "labels": {"a": "b"}}}
    (entry,) = fieldmanager.record_create(labelled, schema, manager="m", api_version="x/v1", has_status=False)
    assert entry["fieldsV1"] == {"f:metadata": {"f:labels": {".": {}, "f:a": {}}}, "f:spec": {"f:size": {}}}
    gadget = {
        "metadata": {"name": "g"},
        "spec": {"byName": {"x": {"a": "s"}}, "ports": [{"port": 10}, {"port": 9}]},
    }
    (entry,) = fieldmanager.record_create(
        gadget, _GADGET_SCHEMA, manager="m", api_version="x/v1", has_status=False
    )
    assert json.dumps(entry["fieldsV1"]) == json.dumps(
        {
            "f:spec": {
                "f:byName": {".": {}, "f:x": {".": {}, "f:a": {}}},
                "f:ports": {  # a list the create makes is its writer's too, as a map is
                    ".": {},
                    'k:{"port":9}': {".": {}, "f:port": {}},
                    'k:{"port":10}': {".": {}, "f:port": {}},
                },
            }
        }
    )


def test_an_update_keeps_the_entries_it_does_not_touch_as_they_were_stored() -> None:
    """A stored entry no write touches is the stored item itself again; one it touches is
    encoded anew, and an entry no longer canonical is never reused."""
    live = [
        {
            "manager": "other",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {}}},
        },
        {
            "manager": "mover",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:b": {}}},
        },
    ]
    old = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "managedFields": live}}
    old["data"] = {"a": "1", "b": "2"}
    new = copy.deepcopy(old)
    new["data"]["b"] = "3"
    entries = fieldmanager.starting_entries(old, new)
    assert fieldmanager.starting_entries(old, new) == entries  # read again: parsed again, the same
    after = fieldmanager.record_update(
        entries, old, new, None, manager="writer", api_version="v1", subresource="", has_status=False
    )
    out = [entry.to_dict() for entry in after]
    assert out[0] is live[0]  # untouched: the stored item
    assert [e["manager"] for e in out] == ["other", "writer"]  # "mover" lost its only field
    assert out[1]["fieldsV1"] == {"f:data": {"f:b": {}}}
    changed = copy.copy(entries[0])
    changed.time = "2026-02-02T00:00:00Z"
    assert changed.to_dict() is not live[0] and changed.to_dict()["time"] == "2026-02-02T00:00:00Z"
    odd = {**old, "metadata": {**old["metadata"], "managedFields": [{**live[0], "extra": 1}]}}
    (entry,) = fieldmanager.starting_entries(odd, {"metadata": {"name": "c"}})
    assert "extra" not in entry.to_dict()


def test_kubectl_upgrades_from_client_side_to_server_side_apply(
    kubectl: Kubectl,  # noqa: F811
    api: Client,
    namespace: str,
    tmp_path: Any,
) -> None:
    """The first `kubectl apply --server-side` of an object applied client-side takes over the
    fields the last-applied configuration recorded, without conflicts, and keeps that annotation
    current; a field someone else changed since is still a conflict."""
    manifest = tmp_path / "d.json"
    manifest.write_text(json.dumps(deployment("upgrade")))
    kubectl("apply", "-n", namespace, "-f", str(manifest))
    first = api.get(DEPLOY.format(ns=namespace) + "/upgrade").json()
    assert [m["manager"] for m in first["metadata"]["managedFields"]] == ["kubectl-client-side-apply"]

    manifest.write_text(json.dumps(deployment("upgrade", replicas=3, image="nginx:1.28")))
    kubectl("apply", "--server-side", "-n", namespace, "-f", str(manifest))  # no --force-conflicts
    got = api.get(DEPLOY.format(ns=namespace) + "/upgrade").json()
    assert got["spec"]["replicas"] == 3
    assert got["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"
    managers = {(m["manager"], m["operation"]): m["fieldsV1"] for m in got["metadata"]["managedFields"]}
    assert "f:replicas" in managers[("kubectl", "Apply")]["f:spec"]
    client_side = managers.get(("kubectl-client-side-apply", "Update"), {})
    assert "f:replicas" not in client_side.get("f:spec", {})
    recorded = json.loads(got["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert recorded["spec"]["replicas"] == 3
    assert "kubectl.kubernetes.io/last-applied-configuration" not in (
        recorded["metadata"].get("annotations") or {}
    )

    # Someone else changes a field: that one is a conflict again.
    api.patch(
        DEPLOY.format(ns=namespace) + "/upgrade?fieldManager=autoscaler",
        {"spec": {"replicas": 5}},
        content_type="application/merge-patch+json",
    )
    manifest.write_text(json.dumps(deployment("upgrade", replicas=4, image="nginx:1.28")))
    refused = kubectl("apply", "--server-side", "-n", namespace, "-f", str(manifest), check=False)
    assert refused.returncode != 0 and 'conflict with "autoscaler"' in refused.stderr, refused.stderr
    assert ".spec.replicas" in refused.stderr

    # Another field manager does not upgrade (upstream's opt-out).
    manifest.write_text(json.dumps(deployment("optout")))
    kubectl("apply", "-n", namespace, "-f", str(manifest))
    manifest.write_text(json.dumps(deployment("optout", replicas=7)))
    other = kubectl(
        "apply",
        "--server-side",
        "--field-manager=deployer",
        "-n",
        namespace,
        "-f",
        str(manifest),
        check=False,
    )
    assert other.returncode != 0 and "kubectl-client-side-apply" in other.stderr
    # And client-side apply still works after the upgrade.
    manifest.write_text(json.dumps(deployment("upgrade", replicas=5, image="nginx:1.29")))
    kubectl("apply", "-n", namespace, "-f", str(manifest))
    assert (
        api.get(DEPLOY.format(ns=namespace) + "/upgrade").json()["spec"]["template"]["spec"]["containers"][0][
            "image"
        ]
        == "nginx:1.29"
    )


# ---------------------------------------------------------------------------- applies in a row

_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_STRING_SET = {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}
#: A kind with every way a field merges: maps (data, labels), a list map (ports, by name), a set
#: (tags), an atomic list (args), an atomic map (selector) and nested structs (nested.inner).
_WIDGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "labels": _STRING_MAP, "annotations": _STRING_MAP},
        },
        "data": _STRING_MAP,
        "spec": {
            "type": "object",
            "properties": {
                "replicas": {"type": "integer"},
                "tags": _STRING_SET,
                "args": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}},
                "selector": {**_STRING_MAP, "x-kubernetes-map-type": "atomic"},
                "ports": map_list(
                    {
                        "name": {"type": "string"},
                        "port": {"type": "integer"},
                        "labels": _STRING_MAP,
                        "hosts": _STRING_SET,
                    },
                    required=False,
                ),
                "nested": {
                    "type": "object",
                    "properties": {
                        "x": {"type": "string"},
                        "inner": {
                            "type": "object",
                            "properties": {"y": {"type": "integer"}, "m": _STRING_MAP},
                        },
                    },
                },
            },
        },
    },
}

_WORDS = st.sampled_from(["a", "b", "c"])
_string_maps = st.dictionaries(_WORDS, st.sampled_from(["v1", "v2", ""]), max_size=3)
# Lists that merge are never empty here: structured-merge-diff tracks no field for an empty set or
# list map, so no one owns it and no apply prunes it (upstream too leaves ``tags: []`` behind).
_string_sets = st.lists(_WORDS, min_size=1, max_size=3, unique=True)


@st.composite
def _widget_configs(draw: Any) -> dict[str, Any]:
    port = st.fixed_dictionaries(
        {"name": _WORDS},
        optional={"port": st.integers(1, 3), "labels": _string_maps, "hosts": _string_sets},
    )
    spec = st.fixed_dictionaries(
        {},
        optional={
            "replicas": st.integers(0, 2),
            "tags": _string_sets,
            "args": st.lists(_WORDS, max_size=3),
            "selector": _string_maps,
            "ports": st.lists(port, min_size=1, max_size=3, unique_by=lambda p: p["name"]),
            "nested": st.fixed_dictionaries(
                {},
                optional={
                    "x": _WORDS,
                    "inner": st.fixed_dictionaries({}, optional={"y": st.integers(0, 2), "m": _string_maps}),
                },
            ),
        },
    )
    metadata = st.fixed_dictionaries({"name": st.just("w")}, optional={"labels": _string_maps})
    body = draw(st.fixed_dictionaries({"metadata": metadata}, optional={"data": _string_maps, "spec": spec}))
    return {"apiVersion": "example.com/v1", "kind": "Widget", **body}


def _fields(obj: dict[str, Any], schema: Any) -> dict[tuple[str, ...], Any]:
    """The object's field set with each leaf's value (a container member: just its path)."""
    return {
        path: member.value if member.leaf else None
        for path, member in fieldsets.field_set(obj, schema).items()
    }


@given(st.lists(_widget_configs(), min_size=1, max_size=5))
def test_applies_by_one_manager_leave_exactly_the_last_configuration(configs: list[dict[str, Any]]) -> None:
    """Whatever one manager applied before, the object then holds exactly the fields of what it
    applied last, with those values, and the manager owns exactly them (kube-apiserver's
    behaviour; a lost ``data`` after ``data: {}`` was the bug that found this). Maps, list maps,
    sets, atomic lists and maps, nested structs, and empty maps and structs among them."""
    live: dict[str, Any] | None = None
    entries: list[fieldmanager.ManagedEntry] = []
    for config in configs:
        result = serversideapply.apply(
            live,
            copy.deepcopy(config),
            entries,
            _WIDGET_SCHEMA,
            manager="lk",
            api_version="example.com/v1",
            subresource="",
            has_status=False,
            force=False,
            group="example.com",
            kind="Widget",
            name="w",
        )
        live, entries = result.obj, result.entries
        assert live is not None
        assert _fields(live, _WIDGET_SCHEMA) == _fields(config, _WIDGET_SCHEMA)
        assert [(e.manager, e.operation) for e in entries] == [("lk", "Apply")]
        assert entries[0].paths == set(fieldsets.field_set(config, _WIDGET_SCHEMA))


def test_kubectl_applies_keys_into_a_map_it_applied_empty(
    kubectl: Kubectl,  # noqa: F811
    namespace: str,
    tmp_path: Any,
) -> None:
    """kube-apiserver: data {key1: v1}, then data {}, then data {key1: new} ends as {key1: new}."""
    manifest = tmp_path / "cm.json"
    for data in ({"key1": "v1"}, {}, {"key1": "new"}):
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lk"}, "data": data}
        manifest.write_text(json.dumps(body))
        kubectl("apply", "--server-side", "--field-manager", "lk", "-n", namespace, "-f", str(manifest))
        got = json.loads(
            kubectl("get", "configmap", "lk", "-n", namespace, "-o", "json", "--show-managed-fields").stdout
        )
        assert got.get("data") == data
        fields = {"f:data": {f"f:{key}": {} for key in data}}
        assert [m["fieldsV1"] for m in got["metadata"]["managedFields"]] == [fields]


def test_parsed_managed_fields_kept_are_out_of_the_gcs_sight() -> None:
    """What ``encode_entries`` keeps (16,384 lists: five containers each) is
    never walked by the GC: a full pass over them held every request up for 62 ms on a slow day.
    They hold no cycle: reference counting frees them when the cache lets them go."""
    owned = {("f:data",), ("f:data", "f:key")}
    written = [fieldmanager.ManagedEntry("kubectl", "Update", "v1", time="2026-11-30T00:00:00Z", paths=owned)]
    read = [{"manager": "op", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {"f:other": {}}}}]  # fmt: skip
    raw = fieldmanager.encode_entries(written)
    (entry,) = fieldmanager.live_entries(raw)
    kept = fieldmanager._PARSED[id(raw)]
    containers = [kept, kept[1], entry, entry.paths, entry.source]
    assert [gc.is_tracked(container) for container in containers] == [False] * 5
    # A list the server did not write itself is parsed at each read, and not kept.
    parsed = fieldmanager.live_entries(read)
    assert id(read) not in fieldmanager._PARSED
    assert fieldmanager.live_entries(read) == parsed
    assert parsed[0].source is not None and parsed[0].source[0] is read[0]


def test_parsed_managed_fields_are_kept_for_the_next_write_unless_very_large() -> None:
    """``live_entries`` answers a stored list from what ``encode_entries`` kept; a list of more
    than ``_PARSED_MAX_PATHS`` paths is parsed again instead: keeping its path tuples made the GC
    pass that found them walk them all (44 ms for a 2.9 MB body the server had refused)."""

    def entries(paths: int) -> list[fieldmanager.ManagedEntry]:
        owned = {("f:data", f"f:key{i:06d}") for i in range(paths)}
        return [
            fieldmanager.ManagedEntry("kubectl", "Update", "v1", time="2026-11-29T00:00:00Z", paths=owned)
        ]

    small = entries(10)
    stored = fieldmanager.encode_entries(small)
    assert fieldmanager.live_entries(stored)[0] is small[0]

    large = entries(fieldmanager._PARSED_MAX_PATHS + 1)
    stored = fieldmanager.encode_entries(large)
    (parsed,) = fieldmanager.live_entries(stored)
    assert parsed is not large[0] and parsed.paths == large[0].paths


def _spec_schema(properties: dict[str, Any]) -> dict[str, Any]:
    """A custom resource's schema whose spec has ``properties``."""
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": properties}}}


def _count_keying(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the list elements ``fieldsets`` keys from now on, each time it keys one."""
    keyed: list[str] = []
    keying = fieldsets.keyed_element

    def counted(item: Any, fields: Any) -> str:
        keyed.append(item["name"])
        return keying(item, fields)

    monkeypatch.setattr(fieldsets, "keyed_element", counted)
    return keyed


def test_filling_every_elements_empty_object_looks_each_element_up_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An update that fills an empty object in each of a list's many elements: telling each
    one's container apart takes the list's elements by key once, not a search of the list per
    element (a list of 4,000 took 3 s on the serving loop that way)."""
    schema = _spec_schema(
        {
            "items": map_list(
                {
                    "name": {"type": "string"},
                    "extra": {"type": "object", "additionalProperties": {"type": "string"}},
                }
            )
        }
    )
    count = 300
    old = {"spec": {"items": [{"name": f"i{i}", "extra": {}} for i in range(count)]}}
    new = {"spec": {"items": [{"name": f"i{i}", "extra": {"a": "b"}} for i in range(count)]}}
    keyed = _count_keying(monkeypatch)
    changed, removed = fieldsets.update_changes(old, new, schema, lambda key: True, unstructured=True)
    assert len(keyed) <= 3 * count  # each side's walk, and the index of the filled side once
    assert len(keyed) >= count  # (keyed through the counted name at all)
    assert removed == set()  # the emptied-and-filled objects keep their owners
    assert ("f:spec", "f:items", 'k:{"name":"i7"}', "f:extra", "f:a") in changed


def test_setting_a_struct_in_every_element_asks_each_element_of_go_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An update setting a struct that is no pointer (a container's resources, absent from the
    stored JSON) in each of a pod's many containers: whether the old Go object holds each is
    asked of the containers keyed once, not a search of the list per container."""
    from kubeloop.apiserver.catalog import schemas

    count = 300
    old: dict[str, Any] = {"spec": {"containers": [{"name": f"c{i}"} for i in range(count)]}}
    limits = {"limits": {"cpu": "1"}}
    new = {"spec": {"containers": [{"name": f"c{i}", "resources": limits} for i in range(count)]}}
    keyed = _count_keying(monkeypatch)
    pod = schemas.kind_schema("", "v1", "Pod")
    changed, removed = fieldsets.update_changes(old, new, pod, lambda key: True)
    assert len(keyed) <= 3 * count  # each side's walk, and the old side's index once
    assert len(keyed) >= count  # (keyed through the counted name at all)
    resources = ("f:spec", "f:containers", 'k:{"name":"c7"}', "f:resources")
    assert (*resources, "f:limits") in changed and resources not in changed
    assert removed == set()


@pytest.mark.parametrize(
    ("before", "after", "changed", "removed"),
    [
        # A map entry (a member either way) emptied, then a preserved field's object emptied:
        # only what was below them goes.
        ({"byName": {"b": {"a": "x"}}}, {"byName": {"b": {}}}, set(), {("byName", "b", "a")}),
        ({"free": {"k": {"z": 1}}}, {"free": {"k": {}}}, set(), {("free", "k", "z")}),
        # A null counts as there: filled, it keeps its owner; nulled, it is not its nuller's.
        ({"opt": None}, {"opt": {"a": "x"}}, {("opt", "a")}, set()),
        ({"opt": {"a": "x"}}, {"opt": None}, set(), {("opt", "a")}),
        # But a null and an empty object are two values of a leaf.
        ({"opt": None}, {"opt": {}}, {("opt",)}, set()),
    ],
)
def test_a_container_on_both_sides_is_neither_added_nor_removed(
    before: dict[str, Any],
    after: dict[str, Any],
    changed: set[tuple[str, ...]],
    removed: set[tuple[str, ...]],
) -> None:
    """structured-merge-diff adds or removes a map, struct or list only where a side lacks it
    (a null is there): an object emptied or nulled, or a null filled, changes only what lies
    below it, whether it is a struct's field, a map entry or an undeclared field."""
    string = {"type": "string"}
    entry = {"type": "object", "properties": {"a": string}}
    schema = _spec_schema(
        {
            "byName": {"type": "object", "additionalProperties": entry},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "opt": {"type": "object", "nullable": True, "properties": {"a": string}},
        }
    )

    def paths(found: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
        return {("f:spec", *(f"f:{name}" for name in path)) for path in found}

    everything = lambda key: True  # noqa: E731
    got = fieldsets.update_changes({"spec": before}, {"spec": after}, schema, everything, unstructured=True)
    assert got == (paths(changed), paths(removed))
