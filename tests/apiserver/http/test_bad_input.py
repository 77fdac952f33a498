"""Client mistakes get the Kubernetes Status error with the right code and a message naming
the field; nothing is half-written; the server never answers 500 for them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import ONE_PROCESS_AND_FRONT_END, Client, ServerThread, served_by


@pytest.fixture(scope="module", params=ONE_PROCESS_AND_FRONT_END)
def shared_server(request: pytest.FixtureRequest, kube_apiserver: ServerThread) -> Iterator[ServerThread]:
    """Every test here runs against one process and against a front-end over its store."""
    yield from served_by(request.param, kube_apiserver)


CM = "/api/v1/namespaces/{ns}/configmaps"
DEPLOY = "/apis/apps/v1/namespaces/{ns}/deployments"


def assert_status(response: Any, code: int, reason: str, *needles: str) -> dict[str, Any]:
    assert response.status_code == code, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    status = response.json()
    assert status["kind"] == "Status"
    assert status["status"] == "Failure"
    assert status["code"] == code
    assert status["reason"] == reason
    for needle in needles:
        assert needle in status["message"], status["message"]
    return status


def deployment(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }


def test_malformed_json_is_400(api: Client, namespace: str) -> None:
    response = api.request(
        "POST",
        CM.format(ns=namespace),
        data=b'{"apiVersion": "v1", "kind": ',
        headers={"Content-Type": "application/json"},
    )
    # Worded as kube-apiserver words it, with the body's first 30 bytes.
    assert_status(
        response,
        400,
        "BadRequest",
        "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; "
        "json parse error: ",
        '({"apiVersion": "v1", "kind": )',
    )


def test_body_that_is_not_an_object_is_400(api: Client, namespace: str) -> None:
    status = assert_status(
        api.request(
            "POST", CM.format(ns=namespace), data=b"[1,2]", headers={"Content-Type": "application/json"}
        ),
        400,
        "BadRequest",
        "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; "
        'json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string "json:',
    )
    assert status["message"].endswith("(5b312c325d)")  # not an object: the body in hex, as upstream
    long_string = "x" * 40
    assert_status(
        api.put(DEPLOY.format(ns=namespace) + "/d", long_string),
        400,
        "BadRequest",
        "(must be of type Deployment)",
        "cannot unmarshal string into Go value",
        " ...)",
    )
    assert api.get(CM.format(ns=namespace)).json()["items"] == []


def test_wrong_type_names_the_field(api: Client, namespace: str) -> None:
    body = deployment("wt")
    body["spec"]["replicas"] = "three"
    assert_status(api.post(DEPLOY.format(ns=namespace), body), 400, "BadRequest", "spec.replicas")
    assert api.get(DEPLOY.format(ns=namespace) + "/wt").status_code == 404


def test_unknown_field_strict_warn_ignore(api: Client, namespace: str) -> None:
    body = deployment("uf")
    body["spec"]["bogus"] = 1
    strict = api.post(DEPLOY.format(ns=namespace) + "?fieldValidation=Strict", body)
    assert_status(strict, 400, "BadRequest", 'unknown field "spec.bogus"')
    warn = api.post(DEPLOY.format(ns=namespace) + "?fieldValidation=Warn", body)
    assert warn.status_code == 201
    assert 'unknown field \\"spec.bogus\\"' in warn.headers["Warning"]
    assert "bogus" not in warn.json()["spec"]
    body["metadata"]["name"] = "uf2"
    ignore = api.post(DEPLOY.format(ns=namespace) + "?fieldValidation=Ignore", body)
    assert ignore.status_code == 201
    assert "Warning" not in ignore.headers
    bad_mode = api.post(DEPLOY.format(ns=namespace) + "?fieldValidation=Loose", body)
    assert_status(bad_mode, 400, "BadRequest", "fieldValidation")


def test_duplicate_field_under_strict(api: Client, namespace: str) -> None:
    raw = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d1","name":"d2"}}'
    response = api.request(
        "POST",
        CM.format(ns=namespace) + "?fieldValidation=Strict",
        data=raw,
        headers={"Content-Type": "application/json"},
    )
    assert_status(response, 400, "BadRequest", 'duplicate field "metadata.name"')


def test_invalid_names_are_422_with_causes(api: Client, namespace: str) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}}
    status = assert_status(api.post(CM.format(ns=namespace), body), 422, "Invalid", "metadata.name")
    assert status["details"]["causes"][0]["field"] == "metadata.name"
    assert status["details"]["kind"] == "ConfigMap"
    label = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ok", "labels": {"a": "x" * 64}}}
    status = assert_status(api.post(CM.format(ns=namespace), label), 422, "Invalid", "metadata.labels")
    assert api.get(CM.format(ns=namespace) + "/ok").status_code == 404


def test_service_and_statefulset_name_rules(api: Client, namespace: str) -> None:
    services = f"/api/v1/namespaces/{namespace}/services"
    spec = {"ports": [{"port": 80}]}
    # Service names are RFC 1035 labels: a leading digit is refused (a ConfigMap may have one).
    status = assert_status(
        api.post(services, {"metadata": {"name": "1-web"}, "spec": spec}), 422, "Invalid", "metadata.name"
    )
    assert (
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
        in (status["details"]["causes"][0]["message"])
    )
    assert "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?'" in status["message"]
    assert api.post(services, {"metadata": {"name": "web-1"}, "spec": spec}).status_code == 201
    assert api.post(CM.format(ns=namespace), {"metadata": {"name": "1-web"}}).status_code == 201
    # StatefulSet names are RFC 1123 labels: no dots.
    sts = deployment("db.primary")
    sts["kind"] = "StatefulSet"
    sts["spec"]["serviceName"] = "db"
    assert_status(
        api.post(f"/apis/apps/v1/namespaces/{namespace}/statefulsets", sts),
        422,
        "Invalid",
        "must not contain dots",
    )


def test_missing_required_field_is_422(api: Client, namespace: str) -> None:
    body = deployment("req")
    del body["spec"]["template"]["spec"]["containers"][0]["name"]
    status = assert_status(api.post(DEPLOY.format(ns=namespace), body), 422, "Invalid")
    fields = [c["field"] for c in status["details"]["causes"]]
    assert "spec.template.spec.containers[0].name" in fields


def test_selector_must_match_template(api: Client, namespace: str) -> None:
    body = deployment("sel")
    body["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    assert_status(api.post(DEPLOY.format(ns=namespace), body), 422, "Invalid", "does not match template")


def test_kind_and_api_version_must_match_the_url(api: Client, namespace: str) -> None:
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "k"}}
    assert_status(api.post(CM.format(ns=namespace), body), 400, "BadRequest")
    body = {"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "k"}}
    assert_status(api.post(CM.format(ns=namespace), body), 400, "BadRequest", "apps/v1")


def test_oversized_body_is_413(api: Client, namespace: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "big"},
        "data": {"x": "a" * (3 * 1024 * 1024)},
    }
    assert_status(api.post(CM.format(ns=namespace), body), 413, "RequestEntityTooLarge")
    assert api.get(CM.format(ns=namespace) + "/big").status_code == 404


def test_unsupported_content_type_is_415(api: Client, namespace: str) -> None:
    response = api.request(
        "POST",
        CM.format(ns=namespace),
        data=b"\xa1\x01",
        headers={"Content-Type": "application/cbor"},
    )
    assert_status(response, 415, "UnsupportedMediaType")


def test_unservable_accept_is_406(api: Client, namespace: str) -> None:
    """Refused naming the media types that are served, as upstream words it."""
    response = api.get(CM.format(ns=namespace), headers={"Accept": "application/cbor"})
    status = assert_status(response, 406, "NotAcceptable")
    assert status["message"] == (
        "only the following media types are accepted: "
        "application/json, application/yaml, application/vnd.kubernetes.protobuf"
    )


def test_unknown_resource_and_method(api: Client, namespace: str) -> None:
    assert_status(api.get(f"/api/v1/namespaces/{namespace}/widgets"), 404, "NotFound")
    assert_status(api.get("/apis/nothing.example.com/v1"), 404, "NotFound")
    assert_status(api.put(CM.format(ns=namespace), {}), 405, "MethodNotAllowed")


def test_bad_query_values(api: Client, namespace: str) -> None:
    assert_status(api.get(CM.format(ns=namespace), params={"limit": "ten"}), 400, "BadRequest", "limit")
    assert_status(
        api.get(CM.format(ns=namespace), params={"resourceVersion": "abc"}),
        400,
        "BadRequest",
        "resourceVersion",
    )
    assert_status(api.post(CM.format(ns=namespace) + "?dryRun=Some", {}), 400, "BadRequest", "dryRun")
    assert_status(
        api.get(CM.format(ns=namespace), params={"watch": "1", "timeoutSeconds": "x"}), 400, "BadRequest"
    )


def test_stale_resource_version_in_patch_is_409(api: Client, namespace: str) -> None:
    created = api.post(
        CM.format(ns=namespace), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}}
    ).json()
    api.patch(CM.format(ns=namespace) + "/s", {"data": {"a": "1"}}, "application/merge-patch+json")
    stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}, "data": {"a": "2"}}
    assert_status(
        api.patch(CM.format(ns=namespace) + "/s", stale, "application/merge-patch+json"), 409, "Conflict"
    )


def test_malformed_patches(api: Client, namespace: str) -> None:
    api.post(CM.format(ns=namespace), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mp"}})
    path = CM.format(ns=namespace) + "/mp"
    assert_status(api.patch(path, b"{not json", "application/merge-patch+json"), 400, "BadRequest")
    assert_status(
        api.patch(path, [{"op": "jump", "path": "/a"}], "application/json-patch+json"), 400, "BadRequest"
    )
    too_many = [{"op": "add", "path": "/metadata/labels", "value": {}}] * 10_001
    assert_status(api.patch(path, too_many, "application/json-patch+json"), 413, "RequestEntityTooLarge")
    renamed = api.patch(path, {"metadata": {"name": "other"}}, "application/merge-patch+json")
    assert renamed.status_code == 400


def test_missing_object_paths(api: Client, namespace: str) -> None:
    assert_status(
        api.put(
            CM.format(ns=namespace) + "/ghost",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ghost"}},
        ),
        404,
        "NotFound",
    )
    assert_status(
        api.patch(CM.format(ns=namespace) + "/ghost", {}, "application/merge-patch+json"), 404, "NotFound"
    )
    assert_status(api.delete(CM.format(ns=namespace) + "/ghost"), 404, "NotFound")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
    api.post(CM.format(ns=namespace), body)
    assert_status(api.put(CM.format(ns=namespace) + "/b", body), 400, "BadRequest", "does not match")


def test_unauthenticated_is_401(api: Client, namespace: str) -> None:
    import requests

    response = requests.get(api.server.url + CM.format(ns=namespace), verify=api.server.ca_file, timeout=10)
    assert_status(response, 401, "Unauthorized")
    wrong = requests.get(
        api.server.url + CM.format(ns=namespace),
        verify=api.server.ca_file,
        timeout=10,
        headers={"Authorization": "Bearer nope"},
    )
    assert wrong.status_code == 401


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def test_deep_nesting_is_a_400_on_every_write_path(api: Client, namespace: str) -> None:
    path = CM.format(ns=namespace)
    assert (
        api.post(path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n"}}).status_code
        == 201
    )
    deep = nested(300)  # the test client cannot encode much deeper
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}, "extra": deep}
    assert_status(api.post(path, body), 400, "BadRequest", "nests more than 128 levels")
    yaml_body = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y}\nextra: " + "[" * 2000 + "]" * 2000
    assert_status(
        api.request("POST", path, data=yaml_body, headers={"Content-Type": "application/yaml"}),
        400,
        "BadRequest",
        "nests more than 128 levels",
    )
    assert_status(api.put(path + "/n", {**body, "metadata": {"name": "n"}}), 400, "BadRequest", "nests")
    for content_type, patch in (
        ("application/merge-patch+json", {"extra": deep}),
        ("application/strategic-merge-patch+json", {"extra": deep}),
        ("application/json-patch+json", [{"op": "add", "path": "/extra", "value": deep}]),
    ):
        assert_status(api.patch(path + "/n", patch, content_type), 400, "BadRequest", "nests")
    apply = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: n}\ndata: " + "{a: " * 1000 + "1" + "}" * 1000
    assert_status(
        api.patch(path + "/n?fieldManager=t", apply, "application/apply-patch+yaml"),
        400,
        "BadRequest",
        "nests",
    )
    # A JSON patch that builds depth out of two shallow halves is caught on the result.
    half = nested(100)
    api.patch(
        path + "/n",
        [{"op": "add", "path": "/metadata/annotations", "value": {}}],
        "application/json-patch+json",
    )
    built = [
        {"op": "add", "path": "/spec", "value": half},
        {"op": "add", "path": "/spec" + "/a" * 99, "value": half},
    ]
    assert_status(api.patch(path + "/n", built, "application/json-patch+json"), 400, "BadRequest", "nests")
    # Nothing was half-written.
    assert "extra" not in api.get(path + "/n").json()


def test_an_alias_bomb_is_refused(api: Client, namespace: str) -> None:
    lines = [
        "apiVersion: v1",
        "kind: ConfigMap",
        "metadata: {name: bomb}",
        "a0: &a0 [x, x, x, x, x, x, x, x, x, x]",
    ]
    for level in range(1, 9):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * 10)}]")
    response = api.request(
        "POST", CM.format(ns=namespace), data="\n".join(lines), headers={"Content-Type": "application/yaml"}
    )
    assert_status(response, 400, "BadRequest", "expands to more than")


def test_yaml_with_keys_and_values_json_cannot_hold(api: Client, namespace: str) -> None:
    path = CM.format(ns=namespace)
    created = api.request(
        "POST",
        path,
        data="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keys, labels: {1: x}}\ndata: {d: 2024-01-01}\n",
        headers={"Content-Type": "application/yaml"},
    )
    assert created.status_code == 201, created.text
    assert created.json()["metadata"]["labels"] == {"1": "x"}
    assert created.json()["data"] == {"d": "2024-01-01"}
    nan = api.request(
        "POST",
        DEPLOY.format(ns=namespace),
        data="apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nan}\nspec: {replicas: .nan}\n",
        headers={"Content-Type": "application/yaml"},
    )
    assert_status(nan, 400, "BadRequest", "not a JSON number")


def test_an_object_larger_than_storage_takes_is_413(api: Client, namespace: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "huge"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "args": ["x" * 1000] * 1700}]},
    }
    response = api.post(f"/api/v1/namespaces/{namespace}/pods", pod)
    assert_status(response, 413, "RequestEntityTooLarge", "1572864")
    assert api.get(f"/api/v1/namespaces/{namespace}/pods/huge").status_code == 404
    # Just under the limit is stored.
    pod["spec"]["containers"][0]["args"] = ["x" * 1000] * 1400  # type: ignore[index]
    assert api.post(f"/api/v1/namespaces/{namespace}/pods", pod).status_code == 201
