"""What other clients' own test suites found the embedded server answering differently from
kube-apiserver, held against kubectl 1.33 and 1.35: a patch whose result the kind's type cannot
hold (kubectl's test-cmd: "cannot restore map from string"), a CRD schema with ``properties``
beside ``additionalProperties: true``, ``kubectl describe rs`` of a ReplicaSet that runs, and
``kubectl wait`` for what never appears."""

from __future__ import annotations

import json
import pathlib
import re
from collections.abc import Iterator
from typing import Any

import pytest

from kubeloop.testing import ServerThread, SimulationOptions, start_server
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import Client

RECENT = [binary for binary in KUBECTLS if tuple(map(int, binary.name.split(".")[1:])) >= (1, 33)]

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "valid-pod", "labels": {"name": "valid-pod"}},
    "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}]},
}


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    server = start_server(simulate=True, simulation=SimulationOptions(pod_start_seconds=0.05))
    yield server
    server.stop()


@pytest.fixture(params=RECENT, ids=[binary.name for binary in RECENT])
def kubectl(request: pytest.FixtureRequest, server: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(request.param, server.kubeconfig, tmp_path)


def namespace_for(kubectl: Kubectl, name: str) -> str:
    version = kubectl.argv[0].rsplit(".", 1)[-1]
    namespace = f"{name}-{version}"
    kubectl("create", "namespace", namespace)
    return namespace


def test_a_patch_its_type_cannot_hold_is_refused_as_kube_apiserver_words_it(kubectl: Kubectl) -> None:
    namespace = namespace_for(kubectl, "patch")
    kubectl("create", "-n", namespace, "-f", "-", stdin=json.dumps(POD))

    def refused(*args: str) -> str:
        result = kubectl("patch", "-n", namespace, "pod", "valid-pod", *args, check=False)
        assert result.returncode == 1, result.stdout
        return result.stderr.strip()

    # Strategic merge patch: the result goes through the unstructured converter (test-cmd's case).
    assert refused("-p", '{"metadata":{"labels":"invalid"}}') == (
        'The request is invalid: patch: Invalid value: "map[metadata:map[labels:invalid]]": '
        "cannot restore map from string"
    )
    assert refused("-p", '{"spec":{"containers":[{"name":"c","ports":"x"}]}}').endswith(
        ": cannot restore slice from string"
    )
    assert refused("-p", '{"spec":{"securityContext":5}}').endswith(
        '"map[spec:map[securityContext:5]]": cannot restore struct from: int64'
    )
    assert refused("-p", '{"spec":{"activeDeadlineSeconds":1.5}}').endswith(
        ": cannot convert float64 to int64"
    )
    assert refused("-p", '{"spec":{"hostname":true}}').endswith(": unrecognized type: string")
    # A merge patch: the patched object, as JSON, is the value; encoding/json's words the detail.
    merge = refused("--type=merge", "-p", '{"metadata":{"labels":"invalid"}}')
    assert re.fullmatch(
        r'The request is invalid: patch: Invalid value: "\{\\"apiVersion\\":\\"v1\\",\\"kind\\":\\"Pod\\",.*\}": '
        r"json: cannot unmarshal string into Go struct field ObjectMeta\.metadata\.labels of type "
        r"map\[string\]string",
        merge,
    ), merge
    # Nothing was written; a patch of the right type still goes through.
    labels = kubectl("get", "-n", namespace, "pod", "valid-pod", "-o", "jsonpath={.metadata.labels}").stdout
    assert json.loads(labels) == {"name": "valid-pod"}
    assert (
        "patched"
        in kubectl(
            "patch", "-n", namespace, "pod", "valid-pod", "-p", '{"metadata":{"labels":{"a":"b"}}}'
        ).stdout
    )


def test_the_status_of_an_undecodable_patch_is_upstreams(server: ServerThread) -> None:
    api = Client(server)
    assert (
        api.post("/api/v1/namespaces/default/pods", {**POD, "metadata": {"name": "status"}}).status_code
        == 201
    )
    answer = api.patch(
        "/api/v1/namespaces/default/pods/status",
        {"metadata": {"labels": "invalid"}},
        "application/strategic-merge-patch+json",
    )
    assert answer.status_code == 422
    status = answer.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Invalid", 422)
    detail = 'Invalid value: "map[metadata:map[labels:invalid]]": cannot restore map from string'
    assert status["details"] == {
        "causes": [{"reason": "FieldValueInvalid", "message": detail, "field": "patch"}]
    }
    assert status["message"] == f' "" is invalid: patch: {detail}'


def crd(additional: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "foos.fidelity.example.com"},
        "spec": {
            "group": "fidelity.example.com",
            "scope": "Namespaced",
            "names": {"plural": "foos", "kind": "Foo"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"a": {"type": "string"}},
                                    "additionalProperties": additional,
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


def test_properties_beside_additional_properties_true_are_a_valid_schema(kubectl: Kubectl) -> None:
    forbidden = (
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].additionalProperties: Forbidden: "
        "additionalProperties and properties are mutual exclusive"
    )
    # As upstream: refused when additionalProperties is false or a schema ...
    for refused in (False, {"type": "string"}):
        result = kubectl("create", "--dry-run=server", "-f", "-", stdin=json.dumps(crd(refused)), check=False)
        assert result.returncode == 1 and forbidden in result.stderr, result.stderr
    # ... and taken when it is true: the object keeps the fields the properties do not name.
    if kubectl("get", "crd", "foos.fidelity.example.com", check=False).returncode != 0:
        kubectl("create", "-f", "-", stdin=json.dumps(crd(True)))
        kubectl("wait", "--for=condition=Established", "crd/foos.fidelity.example.com", "--timeout=60s")
    namespace = namespace_for(kubectl, "foo")
    foo = {
        "apiVersion": "fidelity.example.com/v1",
        "kind": "Foo",
        "metadata": {"name": "f", "namespace": namespace},
        "spec": {"a": "x", "extra": {"kept": True}},
    }
    kubectl("create", "-f", "-", stdin=json.dumps(foo))
    stored = json.loads(kubectl("get", "-n", namespace, "foo", "f", "-o", "json").stdout)
    assert stored["spec"] == {"a": "x", "extra": {"kept": True}}


RS = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "metadata": {"name": "frontend", "labels": {"tier": "frontend"}},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"tier": "frontend"}},
        "template": {
            "metadata": {"labels": {"tier": "frontend"}},
            "spec": {"containers": [{"name": "php-redis", "image": "gcr.io/google_samples/gb-frontend:v3"}]},
        },
    },
}


def test_describe_rs_shows_a_replica_set_that_runs(kubectl: Kubectl) -> None:
    namespace = namespace_for(kubectl, "rs")
    kubectl("create", "-n", namespace, "-f", "-", stdin=json.dumps(RS))
    kubectl(
        "wait", "-n", namespace, "--for=jsonpath={.status.readyReplicas}=2", "rs/frontend", "--timeout=60s"
    )
    described = kubectl("describe", "-n", namespace, "rs", "frontend").stdout
    assert re.search(r"^Name:\s+frontend$", described, re.M), described
    assert re.search(r"^Selector:\s+tier=frontend$", described, re.M), described
    assert re.search(r"^Replicas:\s+2 current / 2 desired$", described, re.M), described
    assert re.search(r"^Pods Status:\s+2 Running / 0 Waiting / 0 Succeeded / 0 Failed$", described, re.M)
    assert re.search(r"^\s+php-redis:\n\s+Image:\s+gcr.io/google_samples/gb-frontend:v3$", described, re.M)
    assert (
        len(re.findall(r"SuccessfulCreate\s+\S+\s+replicaset-controller\s+Created pod: frontend-", described))
        == 2
    )


def test_wait_for_what_never_appears_ends_as_against_kube_apiserver(kubectl: Kubectl) -> None:
    namespace = namespace_for(kubectl, "wait")
    waits = [
        (("--for=create", "pod/never", "--timeout=1s"), "error: timed out waiting for the condition"),
        (
            ("--for=condition=Ready", "pod/never", "--timeout=1s"),
            'Error from server (NotFound): pods "never" not found',
        ),
        (
            ("--for=condition=Ready", "pods", "-l", "app=none", "--timeout=1s"),
            "error: no matching resources found",
        ),
        (
            ("--for=create", "gizmos/never", "--timeout=1s"),
            'error: the server doesn\'t have a resource type "gizmos"',
        ),
    ]
    for args, said in waits:
        result = kubectl("wait", "-n", namespace, *args, check=False)
        assert (result.returncode, result.stderr.strip()) == (1, said), args
    # Deleting what is not there is done at once; waiting for it to appear ends when it does.
    assert kubectl("wait", "-n", namespace, "--for=delete", "pod/never", "--timeout=1s").returncode == 0
    waiting = kubectl.start("wait", "-n", namespace, "--for=create", "configmap/later", "--timeout=60s")
    kubectl("create", "-n", namespace, "configmap", "later")
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0 and "configmap/later condition met" in out, err
