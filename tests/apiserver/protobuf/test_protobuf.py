"""Kubernetes protobuf bodies: kubectl's typed commands (which send and read protobuf) against the
server, the envelope's bad-input cases over HTTP, and the wire/codec functions on their own."""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import pathlib
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.apiserver.groups import builtin_resources
from kubeloop.apiserver.protobuf import codec, descriptors, wire
from tests.apiserver.test_kubectl import Kubectl, kubectl  # noqa: F401  (fixture)
from tests.conftest import Client

PROTOBUF = codec.MEDIA_TYPE
CM = "/api/v1/namespaces/{ns}/configmaps"


@pytest.fixture
def message_tables() -> descriptors.MessageTables:
    return descriptors.load_tables()


# ----------------------------------------------------------------- kubectl's typed commands


def _protobuf_headers(verbose_log: str) -> int:
    """How many request or answer headers in a ``kubectl -v=8`` log say the body is protobuf."""
    return len(re.findall(rf"^\s*(?:I\d+ [^]]*\]\s+)?Content-Type: {re.escape(PROTOBUF)}$", verbose_log, re.M))


def _speaks_protobuf(kubectl: Kubectl) -> bool:  # noqa: F811
    """kubectl's typed commands send protobuf from 1.33 on here; 1.27's send JSON."""
    return pathlib.Path(kubectl.argv[0]).name not in ("kubectl.1.27",)


def test_kubectl_create_generators_send_protobuf(kubectl: Kubectl, api: Client, namespace: str) -> None:  # noqa: F811
    ns = ["-n", namespace]
    made = kubectl(
        "create", "configmap", "cm", "--from-literal=a=b", "--from-literal=empty=", "-o", "json", "-v=8", *ns
    )
    created = json.loads(made.stdout)
    # The body went out as protobuf and came back as protobuf (kubectl's own account of the
    # exchange), where this kubectl speaks it.
    assert _protobuf_headers(made.stderr) == (2 if _speaks_protobuf(kubectl) else 0), made.stderr
    assert created["data"] == {"a": "b", "empty": ""}
    stored = api.get(f"/api/v1/namespaces/{namespace}/configmaps/cm").json()
    assert stored["data"] == {"a": "b", "empty": ""}
    assert stored["metadata"]["uid"] == created["metadata"]["uid"]

    kubectl("create", "secret", "generic", "s", "--from-literal=password=s3cr=t", *ns)
    secret = api.get(f"/api/v1/namespaces/{namespace}/secrets/s").json()
    assert base64.b64decode(secret["data"]["password"]) == b"s3cr=t"
    assert secret["type"] == "Opaque"

    # A pointer field set to zero survives protobuf: replicas 0 is not defaulted to 1.
    kubectl("create", "deployment", "web", "--image=nginx", "--replicas=0", "--port=80", *ns)
    deployment = api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/web").json()
    assert deployment["spec"]["replicas"] == 0
    assert deployment["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "nginx"
    assert container["ports"][0]["containerPort"] == 80
    assert deployment["spec"]["progressDeadlineSeconds"] == 600  # defaulted as for JSON bodies

    kubectl("create", "service", "clusterip", "svc", "--tcp=80:8080", *ns)
    port = api.get(f"/api/v1/namespaces/{namespace}/services/svc").json()["spec"]["ports"][0]
    assert (port["port"], port["targetPort"], port["protocol"]) == (80, 8080, "TCP")

    kubectl("create", "role", "reader", "--verb=get,list", "--resource=configmaps", *ns)
    kubectl("create", "rolebinding", "rb", "--role=reader", f"--serviceaccount={namespace}:robot", *ns)
    binding = api.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings/rb").json()
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "robot", "namespace": namespace}]

    # describe reads through the typed (protobuf) client.
    described = kubectl("describe", "deployment", "web", *ns).stdout
    assert "Replicas:" in described and "0 desired" in described


def test_kubectl_create_job_from_cronjob(kubectl: Kubectl, api: Client, namespace: str) -> None:  # noqa: F811
    ns = ["-n", namespace]
    kubectl(
        "create", "cronjob", "nightly", "--image=busybox", "--schedule=*/5 * * * *", *ns, "--", "echo", "hi"
    )
    cronjob = api.get(f"/apis/batch/v1/namespaces/{namespace}/cronjobs/nightly").json()
    kubectl("create", "job", "manual", "--from=cronjob/nightly", *ns)
    job = api.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/manual").json()
    owner = job["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("CronJob", "nightly", cronjob["metadata"]["uid"])
    assert job["metadata"]["annotations"] == {"cronjob.kubernetes.io/instantiate": "manual"}
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["echo", "hi"]


def test_kubectl_describe_reads_protobuf(kubectl: Kubectl, api: Client, namespace: str) -> None:  # noqa: F811
    """describe decodes the server's protobuf answers, embedded structs (probe handler, key selector) included."""
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "probed"},
        "spec": {
            "selector": {"matchLabels": {"app": "probed"}},
            "template": {
                "metadata": {"labels": {"app": "probed"}},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "nginx",
                            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
                            "env": [
                                {
                                    "name": "MODE",
                                    "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "mode"}},
                                }
                            ],
                        }
                    ],
                    "volumes": [{"name": "config", "configMap": {"name": "settings"}}],
                },
            },
        },
    }
    created = api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment)
    assert created.status_code == 201, created.text
    read = kubectl("describe", "deployment", "probed", "-n", namespace, "-v=8")
    described = read.stdout
    if _speaks_protobuf(kubectl):
        assert _protobuf_headers(read.stderr) >= 1, read.stderr  # answers decoded from protobuf
    assert "http-get http://:8080/ready delay=0s timeout=1s period=10s #success=1 #failure=3" in described
    assert "<set to the key 'mode' of config map 'cm'>" in described
    assert "ConfigMap (a volume populated by a ConfigMap)" in described
    assert "settings" in described


# ----------------------------------------------------------------- the envelope over HTTP


def _post_protobuf(api: Client, path: str, body: bytes) -> Any:
    return api.request(
        "POST", path, data=body, headers={"Content-Type": PROTOBUF, "Accept": f"{PROTOBUF}, application/json"}
    )


def test_protobuf_round_trip_over_http(
    api: Client, namespace: str, message_tables: descriptors.MessageTables
) -> None:
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pb"}, "data": {"k": "v"}}
    response = _post_protobuf(api, CM.format(ns=namespace), codec.encode_object(configmap, message_tables))
    assert response.status_code == 201, response.text
    assert response.headers["Content-Type"] == PROTOBUF
    created = codec.decode_object(response.content, message_tables)
    as_json = api.get(f"{CM.format(ns=namespace)}/pb").json()
    assert created == as_json

    listed = api.get(CM.format(ns=namespace), headers={"Accept": PROTOBUF})
    assert listed.headers["Content-Type"] == PROTOBUF
    decoded = codec.decode_object(listed.content, message_tables)
    assert decoded["kind"] == "ConfigMapList"
    assert [item["metadata"]["name"] for item in decoded["items"]] == ["pb"]
    assert (
        decoded["metadata"]["resourceVersion"]
        == api.get(CM.format(ns=namespace)).json()["metadata"]["resourceVersion"]
    )

    # JSON listed first wins; errors are Status objects in JSON whatever was asked for.
    assert (
        api.get(CM.format(ns=namespace), headers={"Accept": f"application/json, {PROTOBUF}"})
        .headers["Content-Type"]
        .startswith("application/json")
    )
    missing = api.get(f"{CM.format(ns=namespace)}/absent", headers={"Accept": PROTOBUF})
    assert missing.status_code == 404
    assert missing.json()["reason"] == "NotFound"


def test_protobuf_delete_options(
    api: Client, namespace: str, message_tables: descriptors.MessageTables
) -> None:
    assert api.post(CM.format(ns=namespace), {"metadata": {"name": "held"}}).status_code == 201
    options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": "not-the-uid"}}
    response = api.request(
        "DELETE",
        f"{CM.format(ns=namespace)}/held",
        data=codec.encode_object(options, message_tables),
        headers={"Content-Type": PROTOBUF},
    )
    assert response.status_code == 409, response.text
    assert "Precondition failed: UID in precondition: not-the-uid" in response.json()["message"]
    assert api.get(f"{CM.format(ns=namespace)}/held").status_code == 200


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"\x0a\x00", "k8s\\x00"),  # no magic
        (codec.MAGIC + b"\x0a\x0f\x0a\x02v1\x12\x09ConfigMa", "envelope"),  # truncated envelope
        (codec.MAGIC + wire.bytes_field(1, wire.string_field(1, "v1")), "Kind"),
    ],
)
def test_malformed_protobuf_is_400(api: Client, namespace: str, body: bytes, words: str) -> None:
    response = _post_protobuf(api, CM.format(ns=namespace), body)
    assert response.status_code == 400, response.text
    assert response.json()["reason"] == "BadRequest"
    assert words in response.json()["message"]


def test_protobuf_kind_errors(api: Client, namespace: str, message_tables: descriptors.MessageTables) -> None:
    envelope = wire.bytes_field(1, wire.string_field(1, "v1") + wire.string_field(2, "Gadget"))
    response = _post_protobuf(api, CM.format(ns=namespace), codec.MAGIC + envelope)
    assert response.status_code == 400
    assert 'no kind "Gadget" is registered for version "v1"' in response.json()["message"]

    type_meta = wire.string_field(1, "v1") + wire.string_field(2, "ConfigMap")
    broken = codec.MAGIC + wire.bytes_field(1, type_meta) + wire.bytes_field(2, b"\x0a\x05ab")
    response = _post_protobuf(api, CM.format(ns=namespace), broken)
    assert response.status_code == 400
    assert "ConfigMap object could not be decoded" in response.json()["message"]

    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "wrong-kind"}}
    response = _post_protobuf(api, CM.format(ns=namespace), codec.encode_object(secret, message_tables))
    assert response.status_code == 400
    assert api.get(f"{CM.format(ns=namespace)}/wrong-kind").status_code == 404


# ----------------------------------------------------------------- the functions


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1))
def test_varint_round_trip(value: int) -> None:
    decoded, end = wire.read_varint(wire.varint(value), 0)
    assert end == len(wire.varint(value))
    assert decoded == (value if value >= 0 else value + (1 << 64))
    if value < 1 << 63:
        assert wire.signed64(decoded) == value


@given(st.lists(st.tuples(st.integers(1, 1000), st.binary(max_size=40) | st.integers(0, (1 << 64) - 1))))
def test_iter_fields_reads_back_what_was_written(fields: list[tuple[int, bytes | int]]) -> None:
    data = b"".join(
        wire.bytes_field(n, v) if isinstance(v, bytes) else wire.tag(n, wire.VARINT) + wire.varint(v)
        for n, v in fields
    )
    assert [(n, v) for n, _, v in wire.iter_fields(data)] == fields


@given(st.binary(max_size=200))
def test_garbage_raises_only_protobuf_errors(data: bytes) -> None:
    tables = descriptors.load_tables()
    with contextlib.suppress(codec.ProtobufError):
        codec.decode_object(codec.MAGIC + data, tables)


@pytest.mark.parametrize(
    ("nanoseconds", "text"),
    [
        (0, "0s"),
        (1, "1ns"),
        (1_500, "1.5µs"),
        (150_000_000, "150ms"),
        (1_500_000_000, "1.5s"),
        (90_000_000_000, "1m30s"),
        (3_600_000_000_000, "1h0m0s"),
        (9_900_500_000_000, "2h45m0.5s"),
        (-2_000_000_000, "-2s"),
    ],
)
def test_go_duration_strings(nanoseconds: int, text: str) -> None:
    assert codec.go_duration(nanoseconds) == text
    assert codec.parse_go_duration(text) == nanoseconds


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_go_duration_round_trip(nanoseconds: int) -> None:
    assert codec.parse_go_duration(codec.go_duration(nanoseconds)) == nanoseconds


_label_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)


@settings(max_examples=60)
@given(
    data=st.dictionaries(_label_text, _label_text, max_size=5),
    binary=st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.binary(max_size=30), max_size=3),
    immutable=st.none() | st.booleans(),
)
def test_configmap_codec_round_trip(
    data: dict[str, str], binary: dict[str, bytes], immutable: bool | None
) -> None:
    tables = descriptors.load_tables()
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x", "labels": {"a": "b"}},
    }
    if data:
        obj["data"] = data
    if binary:
        obj["binaryData"] = {k: base64.b64encode(v).decode() for k, v in binary.items()}
    if immutable is not None:
        obj["immutable"] = immutable
    assert codec.decode_object(codec.encode_object(obj, tables), tables) == obj


def test_special_types_round_trip(message_tables: descriptors.MessageTables) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "creationTimestamp": "2026-11-22T10:00:00Z",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "X",
                    "name": "o",
                    "uid": "u",
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
            "managedFields": [
                {
                    "manager": "kubectl",
                    "operation": "Update",
                    "apiVersion": "apps/v1",
                    "time": "2026-11-22T10:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:replicas": {}}},
                }
            ],
        },
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "nginx",
                            "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}},
                            # Probe.handler and ConfigMapKeySelector.localObjectReference are
                            # embedded structs in protobuf, inlined in JSON.
                            "readinessProbe": {"httpGet": {"port": "http", "path": "/"}, "periodSeconds": 5},
                            "env": [
                                {
                                    "name": "MODE",
                                    "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "mode"}},
                                }
                            ],
                        }
                    ],
                    "volumes": [{"name": "config", "configMap": {"name": "cm", "defaultMode": 420}}],
                    "securityContext": {"runAsUser": 0},
                    "automountServiceAccountToken": False,
                },
            },
        },
        "status": {},
    }
    assert codec.decode_object(codec.encode_object(deployment, message_tables), message_tables) == deployment

    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e"},
        "eventTime": "2026-11-22T10:00:00.123456Z",
        "reason": "Started",
    }
    assert codec.decode_object(codec.encode_object(event, message_tables), message_tables) == event


def test_the_shipped_tables_cover_every_built_in_kind() -> None:
    """Every built-in kind has its message, but the two whose types live outside k8s.io/api
    (their objects are answered in JSON, which clients decode by the Content-Type)."""

    tables = descriptors.load_tables()
    missing = {
        (resource.api_version, resource.kind)
        for resource in builtin_resources()
        if tables.for_kind(resource.api_version, resource.kind) is None
    }
    assert missing == {
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        ("apiregistration.k8s.io/v1", "APIService"),
    }
    assert tables.message("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta") is not None


def test_a_damaged_descriptor_set_is_an_error() -> None:
    with pytest.raises(descriptors.DescriptorError):
        descriptors.tables_from_descriptor_set(b"")
    with pytest.raises(descriptors.DescriptorError):
        descriptors.tables_from_descriptor_set(wire.bytes_field(1, b"\x0a\x7fshort"))


# ----------------------------------------------------------------- another client: Google's protobuf


class _GoogleProtobuf:
    """Message classes built by Google's protobuf runtime (not kubeloop's codec) from the shipped
    descriptor set: an independent encoder and decoder of the wire format."""

    def __init__(self) -> None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        files = descriptor_pb2.FileDescriptorSet.FromString(gzip.decompress(descriptors.SHIPPED_SET.read_bytes()))
        self.pool = descriptor_pool.DescriptorPool()
        for file in files.file:
            self.pool.Add(file)
        self._factory = message_factory

    def __getitem__(self, full_name: str) -> Any:
        return self._factory.GetMessageClass(self.pool.FindMessageTypeByName(full_name))

    def envelope(self, api_version: str, kind: str, message: Any) -> bytes:
        unknown = self["k8s.io.apimachinery.pkg.runtime.Unknown"]()
        unknown.typeMeta.apiVersion = api_version
        unknown.typeMeta.kind = kind
        unknown.raw = message.SerializeToString()
        return codec.MAGIC + unknown.SerializeToString()

    def open(self, body: bytes, full_name: str) -> Any:
        assert body.startswith(codec.MAGIC), body[:20]
        unknown = self["k8s.io.apimachinery.pkg.runtime.Unknown"].FromString(body[len(codec.MAGIC) :])
        return self[full_name].FromString(unknown.raw)


def test_a_client_built_on_googles_protobuf_runtime(api: Client, namespace: str) -> None:
    google = _GoogleProtobuf()
    deployment = google["k8s.io.api.apps.v1.Deployment"]()
    deployment.metadata.name = "independent"
    deployment.metadata.labels["app"] = "independent"
    deployment.spec.replicas = 0  # a pointer set to zero: present on the wire
    deployment.spec.selector.matchLabels["app"] = "independent"
    deployment.spec.strategy.type = "RollingUpdate"
    deployment.spec.strategy.rollingUpdate.maxSurge.type = 1  # IntOrString: a string
    deployment.spec.strategy.rollingUpdate.maxSurge.strVal = "50%"
    deployment.spec.template.metadata.labels["app"] = "independent"
    container = deployment.spec.template.spec.containers.add()
    container.name = "web"
    container.image = "nginx"
    container.resources.limits["memory"].string = "64Mi"
    port = container.ports.add()
    port.containerPort = 8080

    response = api.request(
        "POST",
        f"/apis/apps/v1/namespaces/{namespace}/deployments",
        data=google.envelope("apps/v1", "Deployment", deployment),
        headers={"Content-Type": PROTOBUF, "Accept": PROTOBUF},
    )
    assert response.status_code == 201, response.text
    assert response.headers["Content-Type"] == PROTOBUF
    created = google.open(response.content, "k8s.io.api.apps.v1.Deployment")
    assert created.metadata.uid and created.metadata.resourceVersion
    assert created.spec.HasField("replicas") and created.spec.replicas == 0
    assert created.spec.progressDeadlineSeconds == 600  # defaulted, as for a JSON body
    assert created.spec.strategy.rollingUpdate.maxSurge.strVal == "50%"
    assert created.spec.strategy.rollingUpdate.maxUnavailable.strVal == "25%"
    served_container = created.spec.template.spec.containers[0]
    assert served_container.resources.limits["memory"].string == "64Mi"
    assert served_container.ports[0].protocol == "TCP"
    assert served_container.terminationMessagePath == "/dev/termination-log"

    # What the JSON side stores is what the protobuf client sent.
    as_json = api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/independent").json()
    assert as_json["metadata"]["uid"] == created.metadata.uid
    assert as_json["spec"]["replicas"] == 0
    assert as_json["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"memory": "64Mi"}}

    listed = api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments", headers={"Accept": PROTOBUF})
    assert listed.headers["Content-Type"] == PROTOBUF
    items = google.open(listed.content, "k8s.io.api.apps.v1.DeploymentList")
    assert [item.metadata.name for item in items.items] == ["independent"]
    assert int(items.metadata.resourceVersion) >= int(as_json["metadata"]["resourceVersion"])

    # A body Google's runtime cannot have written (a truncated message) is a 400, nothing stored.
    broken = google.envelope("apps/v1", "Deployment", deployment)[:-7]
    response = api.request(
        "POST",
        f"/apis/apps/v1/namespaces/{namespace}/deployments",
        data=broken,
        headers={"Content-Type": PROTOBUF},
    )
    assert response.status_code == 400, response.text
    assert response.json()["reason"] == "BadRequest"
