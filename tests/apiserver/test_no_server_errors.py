"""Random client mistakes over real HTTP never get a 500: every answer is a success or a 4xx Status.

Hypothesis builds arbitrary JSON bodies (objects shaped like the served kinds, with wrong types and
odd values in random places), patches of every type and query strings, and sends them to the
shared server.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Client

PATHS = {
    "configmaps": ("/api/v1/namespaces/{ns}/configmaps", "v1", "ConfigMap"),
    "secrets": ("/api/v1/namespaces/{ns}/secrets", "v1", "Secret"),
    "services": ("/api/v1/namespaces/{ns}/services", "v1", "Service"),
    "pods": ("/api/v1/namespaces/{ns}/pods", "v1", "Pod"),
    "deployments": ("/apis/apps/v1/namespaces/{ns}/deployments", "apps/v1", "Deployment"),
    "jobs": ("/apis/batch/v1/namespaces/{ns}/jobs", "batch/v1", "Job"),
    "leases": ("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", "coordination.k8s.io/v1", "Lease"),
    "roles": (
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
        "rbac.authorization.k8s.io/v1",
        "Role",
    ),
    "events": ("/apis/events.k8s.io/v1/namespaces/{ns}/events", "events.k8s.io/v1", "Event"),
}

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
_keys = st.sampled_from(
    [
        "metadata",
        "spec",
        "status",
        "data",
        "name",
        "labels",
        "annotations",
        "containers",
        "image",
        "replicas",
        "selector",
        "matchLabels",
        "template",
        "ports",
        "port",
        "finalizers",
        "ownerReferences",
        "resourceVersion",
        "generateName",
        "rules",
        "verbs",
        "type",
        "stringData",
        "x",
        "$patch",
        "$setElementOrder/containers",
        "$retainKeys",
        "managedFields",
    ]
) | st.text(max_size=8)
_json = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_keys, children, max_size=5),
    max_leaves=25,
)


def _object(api_version: str, kind: str) -> st.SearchStrategy[dict[str, Any]]:
    metadata = st.fixed_dictionaries(
        {"name": st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)},
        optional={"labels": _json, "annotations": _json, "finalizers": _json, "generateName": _json},
    )
    return st.fixed_dictionaries(
        {"apiVersion": st.just(api_version), "kind": st.just(kind), "metadata": metadata},
        optional={"spec": _json, "data": _json, "status": _json, "rules": _json, "type": _json},
    )


def _assert_not_server_error(response: Any) -> None:
    if response.status_code == 504:  # a resourceVersion from the future: upstream's "Too large" Timeout
        assert response.json()["reason"] == "Timeout" and "Too large resource version" in response.text
        return
    assert response.status_code < 500, (response.status_code, response.text[:500])
    if response.status_code >= 400:
        status = response.json()
        assert status["kind"] == "Status" and status["code"] == response.status_code


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), resource=st.sampled_from(sorted(PATHS)))
def test_random_creates_and_updates(api: Client, namespace: str, data: st.DataObject, resource: str) -> None:
    path, api_version, kind = PATHS[resource]
    collection = path.format(ns=namespace)
    body = data.draw(_object(api_version, kind) | _json, label="body")
    validation = data.draw(st.sampled_from(["Strict", "Warn", "Ignore"]))
    created = api.post(collection, body, params={"fieldValidation": validation})
    _assert_not_server_error(created)
    if isinstance(body, dict) and isinstance(body.get("metadata"), dict) and "name" in body["metadata"]:
        name = body["metadata"]["name"]
        update = data.draw(_object(api_version, kind), label="update")
        update["metadata"]["name"] = name
        _assert_not_server_error(api.put(f"{collection}/{name}", update))
        _assert_not_server_error(api.put(f"{collection}/{name}/status", update))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    patch=_json,
    patch_type=st.sampled_from(
        [
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
        ]
    ),
    resource=st.sampled_from(["configmaps", "deployments", "services", "pods"]),
)
def test_random_patches(api: Client, namespace: str, patch: Any, patch_type: str, resource: str) -> None:
    path, api_version, kind = PATHS[resource]
    collection = path.format(ns=namespace)
    base = {
        "configmaps": {"data": {"a": "1"}},
        "deployments": {
            "spec": {
                "selector": {"matchLabels": {"app": "p"}},
                "template": {
                    "metadata": {"labels": {"app": "p"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                },
            }
        },
        "services": {"spec": {"ports": [{"port": 80}]}},
        "pods": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}},
    }[resource]
    api.post(collection, {"apiVersion": api_version, "kind": kind, "metadata": {"name": "target"}, **base})
    _assert_not_server_error(api.patch(f"{collection}/target", patch, patch_type))
    _assert_not_server_error(api.patch(f"{collection}/target/status", patch, patch_type))


_query_values = st.text(max_size=20) | st.sampled_from(
    ["0", "-1", "1", "999999999999999999999", "true", "Exact"]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    params=st.dictionaries(
        st.sampled_from(
            [
                "labelSelector",
                "fieldSelector",
                "limit",
                "continue",
                "resourceVersion",
                "resourceVersionMatch",
                "timeoutSeconds",
                "allowWatchBookmarks",
                "sendInitialEvents",
                "includeObject",
                "dryRun",
                "propagationPolicy",
                "gracePeriodSeconds",
            ]
        ),
        _query_values,
        max_size=4,
    ),
    resource=st.sampled_from(sorted(PATHS)),
    method=st.sampled_from(["GET", "DELETE"]),
)
def test_random_list_and_delete_queries(
    api: Client, namespace: str, params: dict[str, str], resource: str, method: str
) -> None:
    collection = PATHS[resource][0].format(ns=namespace)
    params.pop("watch", None)
    response = api.request(method, collection, params=params, timeout=10)
    _assert_not_server_error(response)


_crds_made: set[str] = set()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_custom_resource_writes(api: Client, namespace: str, data: st.DataObject) -> None:
    """Custom resources too: their bodies are pruned by a structural schema, not decoded into
    a type, so what a typed decoding refuses they must refuse on their own (a metadata that is
    not an object was a 500)."""
    from tests.apiserver.apiextensions.test_custom_resources import create_crd

    group = f"{namespace}.fuzz.example.com"
    if group not in _crds_made:
        create_crd(api, group)
        _crds_made.add(group)
    collection = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
    body = data.draw(_object(f"{group}/v1", "Widget") | _json, label="body")
    validation = data.draw(st.sampled_from(["Strict", "Warn", "Ignore"]))
    _assert_not_server_error(api.post(collection, body, params={"fieldValidation": validation}))
    api.post(collection, {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "target"}})
    patch = data.draw(_json, label="patch")
    _assert_not_server_error(api.patch(f"{collection}/target", patch, "application/merge-patch+json"))
    _assert_not_server_error(api.patch(f"{collection}/target/status", patch, "application/merge-patch+json"))
    if isinstance(body, dict) and isinstance(body.get("metadata"), dict) and "name" in body["metadata"]:
        name = body["metadata"]["name"]
        update = data.draw(_object(f"{group}/v1", "Widget"), label="update")
        update["metadata"]["name"] = name
        _assert_not_server_error(api.put(f"{collection}/{name}", update))
        _assert_not_server_error(api.put(f"{collection}/{name}/status", update))
