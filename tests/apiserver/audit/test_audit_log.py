"""The audit log (``--audit-log-path`` with ``--audit-policy-file``) over real HTTPS: kubectl
(every version on the machine) and plain HTTP clients make requests, and each is found in the
log as kube-apiserver writes it — audit.k8s.io/v1 Events at the level the policy gives, with
their stages, users, object references, objects and status, and the annotations admission adds
(a ValidatingAdmissionPolicy's Audit action and ``auditAnnotations``). A log on a stalled pipe
holds no request; the durable server records through SIGTERM; bad flags and policies are one
line and exit code 2."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from kubeloop.apiserver.audit.policy import load_policy
from tests.apiserver.storage.test_durability import KUBELOOP, apiserver, session_for
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import Client, ServerThread, start_server

ADMISSION = "/apis/admissionregistration.k8s.io/v1"
POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/livez*", "/readyz*"]
- level: RequestResponse
  resources: [{group: "", resources: ["configmaps"]}]
- level: Request
  omitManagedFields: true
  resources: [{group: "", resources: ["secrets"]}]
- level: None
  resources: [{group: "apps"}]
- level: Metadata
  omitStages: ["RequestReceived"]
"""


class AuditLog:
    """The events of one log file, read as they are written."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path

    def read(self) -> list[dict[str, Any]]:
        """The events whose lines are whole: the writer's thread may be half-way through one."""
        if not self.path.exists():
            return []
        whole = self.path.read_text().rpartition("\n")[0]
        return [json.loads(line) for line in whole.splitlines() if line]

    def wait(self, found: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
        """The events, once ``found`` holds of them (they are written by a thread of their own)."""
        while True:
            events = self.read()
            if found(events):
                return events
            time.sleep(0.02)

    def of(self, audit_id: str, stage: str = "ResponseComplete") -> dict[str, Any]:
        """The event of one request's stage."""
        events = self.wait(lambda events: any(e["auditID"] == audit_id and e["stage"] == stage for e in events))
        return next(e for e in events if e["auditID"] == audit_id and e["stage"] == stage)


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerThread, AuditLog]]:
    directory = tmp_path_factory.mktemp("audit")
    (directory / "policy.yaml").write_text(POLICY)
    server = start_server(
        audit_log_path=directory / "audit.log", audit_policy=load_policy(directory / "policy.yaml")
    )
    yield server, AuditLog(directory / "audit.log")
    server.stop()


@pytest.fixture(scope="module")
def api(audited: tuple[ServerThread, AuditLog]) -> Client:
    return Client(audited[0])


@pytest.fixture
def log(audited: tuple[ServerThread, AuditLog]) -> AuditLog:
    return audited[1]


@pytest.fixture(params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def kubectl(
    request: pytest.FixtureRequest, audited: tuple[ServerThread, AuditLog], tmp_path: pathlib.Path
) -> Kubectl:
    return Kubectl(request.param, audited[0].kubeconfig, tmp_path)


_count = iter(range(1, 10_000))


def unique(prefix: str) -> str:
    return f"{prefix}{next(_count)}"


def test_kubectl_writes_and_reads_are_recorded_with_their_objects(kubectl: Kubectl, log: AuditLog) -> None:
    name = unique("settings")
    kubectl("create", "configmap", name, "--from-literal=color=blue")
    kubectl("get", "configmap", name)
    kubectl("delete", "configmap", name)

    def of_it(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            e
            for e in events
            if e.get("objectRef", {}).get("name") == name and e["stage"] == "ResponseComplete"
        ]

    events = of_it(log.wait(lambda events: any(e["verb"] == "delete" for e in of_it(events))))
    # kubectl delete reads the object again after deleting it.
    create, get, delete = (next(e for e in events if e["verb"] == verb) for verb in ("create", "get", "delete"))
    binary = pathlib.Path(kubectl.argv[0]).name  # kubectl.1.27: its user agent is kubectl.1.27/v1.27.16 ...
    assert events.index(create) < events.index(get) < events.index(delete)
    assert create["level"] == "RequestResponse"
    assert create["userAgent"].startswith(f"{binary}/v{binary.removeprefix('kubectl.')}.")
    assert create["user"]["username"] == "kubeloop-admin"
    assert create["objectRef"] == {"resource": "configmaps", "namespace": "default", "name": name, "apiVersion": "v1"}
    assert create["responseStatus"] == {"metadata": {}, "code": 201}
    assert create["requestObject"]["data"] == {"color": "blue"}
    assert create["responseObject"]["metadata"]["uid"]
    assert create["annotations"] == {"authorization.k8s.io/decision": "allow"}
    assert create["requestURI"].startswith("/api/v1/namespaces/default/configmaps?")
    assert create["sourceIPs"] == ["127.0.0.1"]
    # kubectl asks for a Table: that is the response recorded.
    assert get["responseObject"]["kind"] == "Table" and "requestObject" not in get
    assert delete["responseStatus"]["code"] == 200
    # Configmaps keep the RequestReceived stage: it comes first, with no status.
    received = log.of(create["auditID"], "RequestReceived")
    assert "responseStatus" not in received
    assert received["requestReceivedTimestamp"] == create["requestReceivedTimestamp"] <= create["stageTimestamp"]


def test_levels_stages_and_what_is_not_recorded(api: Client, log: AuditLog) -> None:
    secret = unique("token")
    made = api.post("/api/v1/namespaces/default/secrets", {"metadata": {"name": secret}, "stringData": {"k": "v"}})
    assert made.status_code == 201
    event = log.of(made.headers["Audit-Id"])
    assert event["level"] == "Request"
    assert event["requestObject"]["stringData"] == {"k": "v"}
    assert "responseObject" not in event
    # Apps requests are not recorded: shown by a later request's event, with the earlier absent.
    deployment = api.post(
        "/apis/apps/v1/namespaces/default/deployments",
        {"metadata": {"name": unique("web")}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}},
    )  # fmt: skip
    assert deployment.status_code == 201 and "Audit-Id" not in deployment.headers
    later = api.get("/api/v1/namespaces")
    events = [e for e in log.read() if e["auditID"] != ""]
    log.of(later.headers["Audit-Id"])
    assert not [e for e in log.read() if e.get("objectRef", {}).get("apiGroup") == "apps"]
    # Metadata level: no objects; RequestReceived omitted by the rule.
    listed = log.of(later.headers["Audit-Id"])
    assert listed["level"] == "Metadata" and listed["verb"] == "list"
    assert "responseObject" not in listed and "requestObject" not in listed
    assert not [e for e in events if e["auditID"] == later.headers["Audit-Id"] and e["stage"] == "RequestReceived"]


def test_managed_fields_are_left_out_where_the_rule_says(api: Client, log: AuditLog) -> None:
    name = unique("kept")
    path = "/api/v1/namespaces/default/secrets"
    made = api.post(path, {"metadata": {"name": name}})
    assert made.json()["metadata"]["managedFields"]
    patched = api.patch(f"{path}/{name}", {"metadata": {"labels": {"a": "b"}}, "apiVersion": "v1", "kind": "Secret"},
                        content_type="application/apply-patch+yaml", params={"fieldManager": "me"})  # fmt: skip
    assert patched.status_code == 200, patched.text
    event = log.of(patched.headers["Audit-Id"])
    assert event["verb"] == "patch" and event["objectRef"]["name"] == name
    assert event["requestObject"] == {"metadata": {"labels": {"a": "b"}}, "apiVersion": "v1", "kind": "Secret"}


def test_errors_carry_their_status_and_users_who_they_are(api: Client, log: AuditLog) -> None:
    missing = api.get("/api/v1/namespaces/default/configmaps/nothing-here")
    assert missing.status_code == 404
    event = log.of(missing.headers["Audit-Id"])
    assert event["responseStatus"] == {
        "metadata": {},
        "status": "Failure",
        "message": 'configmaps "nothing-here" not found',
        "reason": "NotFound",
        "details": {"name": "nothing-here", "kind": "configmaps"},
        "code": 404,
    }
    assert "responseObject" not in event
    # Impersonation: the requester is the user, whom they act as the impersonatedUser.
    forbidden = api.get(
        "/api/v1/namespaces/default/secrets", headers={"Impersonate-User": "bob", "Audit-ID": "chosen-by-client"}
    )
    assert forbidden.status_code == 403
    assert forbidden.headers["Audit-Id"] == "chosen-by-client"
    event = log.of("chosen-by-client")
    assert event["user"]["username"] == "kubeloop-admin"
    assert event["impersonatedUser"] == {"username": "bob", "groups": ["system:authenticated"]}
    assert event["annotations"] == {"authorization.k8s.io/decision": "forbid"}
    assert event["responseStatus"]["reason"] == "Forbidden"
    # A request that does not authenticate is recorded without a user.
    stranger = requests.get(
        api.server.url + "/api/v1/namespaces/default/pods",
        headers={"Authorization": "Bearer wrong", "Audit-ID": "stranger"},
        verify=api.server.ca_file,
        timeout=30,
    )
    assert stranger.status_code == 401
    event = log.of("stranger", "ResponseStarted")
    assert event["user"] == {} and event["responseStatus"] == {"metadata": {}, "code": 401}


def test_a_watch_is_recorded_when_it_starts_and_when_it_ends(api: Client, log: AuditLog) -> None:
    with api.get("/api/v1/namespaces/default/pods", params={"watch": "true", "timeoutSeconds": "1"}, stream=True) as watch:
        assert watch.status_code == 200
        audit_id = watch.headers["Audit-Id"]
        started = log.of(audit_id, "ResponseStarted")
        assert started["verb"] == "watch" and started["responseStatus"]["code"] == 200
        for _ in watch.iter_lines():
            pass  # the server ends the watch after timeoutSeconds
    assert log.of(audit_id)["stageTimestamp"] >= started["stageTimestamp"]


def test_a_large_write_done_off_the_serving_loop_keeps_its_annotations(api: Client, log: AuditLog) -> None:
    """A body past 64 KiB is decoded and admitted on the worker loop: what admission adds there
    reaches the request's event."""
    policy = unique("large") + ".example.com"
    spec = {
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
        "auditAnnotations": [{"key": "blob", "valueExpression": "string(size(object.data.blob))"}],
    }  # fmt: skip
    assert api.post(f"{ADMISSION}/validatingadmissionpolicies", {"metadata": {"name": policy}, "spec": spec}).status_code == 201
    binding = {"policyName": policy, "validationActions": ["Audit"], "matchResources": {"objectSelector": {"matchLabels": {"audited": policy}}}}  # fmt: skip
    assert api.post(f"{ADMISSION}/validatingadmissionpolicybindings", {"metadata": {"name": policy}, "spec": binding}).status_code == 201
    try:
        big = {"metadata": {"name": unique("big"), "labels": {"audited": policy}}, "data": {"blob": "x" * 300_000}}
        made = api.post("/api/v1/namespaces/default/configmaps", big)
        assert made.status_code == 201
        event = log.of(made.headers["Audit-Id"])
        assert event["annotations"] == {"authorization.k8s.io/decision": "allow", f"{policy}/blob": "300000"}
        assert len(event["requestObject"]["data"]["blob"]) == 300_000
    finally:
        api.delete(f"{ADMISSION}/validatingadmissionpolicybindings/{policy}")
        api.delete(f"{ADMISSION}/validatingadmissionpolicies/{policy}")


# ------------------------------------------------------------------ admission policies


def test_a_policys_audit_action_and_audit_annotations_reach_the_event(api: Client, log: AuditLog) -> None:
    policy = unique("audited") + ".example.com"
    spec = {
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
        "validations": [
            {"expression": "true"},
            {"expression": "!has(object.data) || !('password' in object.data)", "message": "no <passwords> & such"},
        ],
        "auditAnnotations": [
            {"key": "size", "valueExpression": "string(has(object.data) ? size(object.data) : 0) + ' keys'"},
            {"key": "absent", "valueExpression": "null"},
        ],
    }  # fmt: skip
    created = api.post(f"{ADMISSION}/validatingadmissionpolicies", {"metadata": {"name": policy}, "spec": spec})
    assert created.status_code == 201, created.text
    binding = {"policyName": policy, "validationActions": ["Audit"], "matchResources": {"objectSelector": {"matchLabels": {"audited": policy}}}}  # fmt: skip
    bound = api.post(f"{ADMISSION}/validatingadmissionpolicybindings", {"metadata": {"name": policy}, "spec": binding})
    assert bound.status_code == 201, bound.text
    try:
        name = unique("leaky")
        leaky = {"metadata": {"name": name, "labels": {"audited": policy}}, "data": {"password": "x", "user": "y"}}
        made = api.post("/api/v1/namespaces/default/configmaps", leaky)
        assert made.status_code == 201  # Audit alone admits
        annotations = log.of(made.headers["Audit-Id"])["annotations"]
        failure = annotations["validation.policy.admission.k8s.io/validation_failure"]
        assert '"message":"no \\u003cpasswords\\u003e \\u0026 such"' in failure  # as Go marshals it
        assert json.loads(failure) == [
            {"message": "no <passwords> & such", "policy": policy, "binding": policy, "expressionIndex": 1, "validationActions": ["Audit"]}
        ]  # fmt: skip
        assert annotations[f"{policy}/size"] == "2 keys"
        assert f"{policy}/absent" not in annotations
        # A request that passes is annotated by auditAnnotations only.
        clean = api.post("/api/v1/namespaces/default/configmaps", {**leaky, "metadata": {**leaky["metadata"], "name": unique("clean")}, "data": {"a": "b"}})  # fmt: skip
        annotations = log.of(clean.headers["Audit-Id"])["annotations"]
        assert annotations == {"authorization.k8s.io/decision": "allow", f"{policy}/size": "1 keys"}
        # Deny with Audit: refused, and the refusal's event carries the failure too.
        api.patch(f"{ADMISSION}/validatingadmissionpolicybindings/{policy}", {"spec": {"validationActions": ["Deny", "Audit"]}}, content_type="application/merge-patch+json")  # fmt: skip
        refused = api.post("/api/v1/namespaces/default/configmaps", {**leaky, "metadata": {**leaky["metadata"], "name": unique("refused")}})  # fmt: skip
        assert refused.status_code == 422
        event = log.of(refused.headers["Audit-Id"])
        assert event["responseStatus"]["code"] == 422
        assert json.loads(event["annotations"]["validation.policy.admission.k8s.io/validation_failure"])[0]["validationActions"] == ["Deny", "Audit"]
        # An annotation that is not a string fails the request under failurePolicy Fail.
        api.patch(f"{ADMISSION}/validatingadmissionpolicies/{policy}", {"spec": {"auditAnnotations": [{"key": "size", "valueExpression": "size(object.data)"}]}}, content_type="application/merge-patch+json")  # fmt: skip
        wrong = api.post("/api/v1/namespaces/default/configmaps", {**leaky, "metadata": {**leaky["metadata"], "name": unique("wrong")}, "data": {"a": "b"}})  # fmt: skip
        assert wrong.status_code == 422
        assert wrong.json()["message"].endswith(
            "denied request: valueExpression 'size(object.data)' resulted in unsupported return type: int. "
            "Return type must be either string or null."
        )
    finally:
        api.delete(f"{ADMISSION}/validatingadmissionpolicybindings/{policy}")
        api.delete(f"{ADMISSION}/validatingadmissionpolicies/{policy}")


def test_audit_annotation_keys_are_validated(api: Client) -> None:
    spec = {
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
        "auditAnnotations": [{"key": "bad key!", "valueExpression": "'x'"}, {"key": "bad key!", "valueExpression": ""}],
    }  # fmt: skip
    refused = api.post(f"{ADMISSION}/validatingadmissionpolicies", {"metadata": {"name": "keys.example.com"}, "spec": spec})
    assert refused.status_code == 422
    causes = {(c["field"], c["reason"]) for c in refused.json()["details"]["causes"]}
    assert causes == {
        ("spec.auditAnnotations[0].key", "FieldValueInvalid"),
        ("spec.auditAnnotations[1].key", "FieldValueInvalid"),
        ("spec.auditAnnotations[1].key", "FieldValueDuplicate"),
        ("spec.auditAnnotations[1].valueExpression", "FieldValueRequired"),
    }
    assert "keys.example.com/bad key!" in refused.json()["message"]


# ------------------------------------------------------------------ the log itself


def test_a_stalled_log_holds_no_request(tmp_path: pathlib.Path) -> None:
    """The log is a pipe nobody reads: once its buffer is full the writer waits, and requests
    are still answered; when the pipe is read again every event arrives, in order."""
    fifo = tmp_path / "audit.pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    server = start_server(audit_log_path=fifo)
    try:
        api = Client(server)
        ids = []
        for index in range(400):  # about 250 KB of events: four times a pipe's buffer
            answer = api.get(f"/api/v1/namespaces/default/configmaps/absent-{index}")
            assert answer.status_code == 404
            ids.append(answer.headers["Audit-Id"])
        received = bytearray()
        os.set_blocking(reader, True)
        while ids[-1].encode() not in received:
            received += os.read(reader, 65536)
        seen = [json.loads(line)["auditID"] for line in received.decode().splitlines() if line]
        assert [i for i in seen if i in set(ids)] == ids
    finally:
        drain = threading.Thread(target=lambda: _drain(reader), daemon=True)
        drain.start()
        server.stop()
        os.close(reader)


def _drain(descriptor: int) -> None:
    try:
        while os.read(descriptor, 65536):
            pass
    except OSError:
        pass


OLD_AND_NEW = [k for k in KUBECTLS if k.name.endswith(("1.27", "1.33"))] or KUBECTLS[:1]


# Durability is what this proves; both kubectls are audited in the tests above.
@pytest.mark.parametrize("binary", OLD_AND_NEW[-1:], ids=[k.name for k in OLD_AND_NEW[-1:]])
def test_the_durable_server_records_across_sigkill_and_sigterm(tmp_path: pathlib.Path, binary: pathlib.Path) -> None:
    """On ``--data-dir``: what was recorded before a SIGKILL is in the log; the restarted server
    appends to it; bad and huge bodies are recorded with their answers; SIGTERM flushes."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    log = tmp_path / "audit.log"
    data = tmp_path / "data"
    kubectl = Kubectl(binary, data / "kubeconfig", tmp_path)
    flags = ("--audit-log-path", str(log), "--audit-policy-file", str(policy))
    with apiserver(data, *flags) as (proc, url):
        kubectl("create", "configmap", "before-kill", "--from-literal=a=b")
        audit = AuditLog(log)
        audit.wait(lambda events: any(e.get("objectRef", {}).get("name") == "before-kill" and e["stage"] == "ResponseComplete" for e in events))  # fmt: skip
        proc.kill()
        proc.wait(30)
    with apiserver(data, *flags) as (proc, url):
        session = session_for(data)
        kubectl("create", "configmap", "durable", "--from-literal=a=b")
        path = url + "/api/v1/namespaces/default/configmaps"
        malformed = session.post(path, data=b"{not json", headers={"Content-Type": "application/json"}, timeout=30)
        huge = session.post(path, json={"metadata": {"name": "huge"}, "data": {"x": "y" * (4 * 1024 * 1024)}}, timeout=60)
        large = session.post(path, json={"metadata": {"name": "large"}, "data": {"x": "y" * (900 * 1024)}}, timeout=60)
        assert (malformed.status_code, huge.status_code, large.status_code) == (400, 413, 201)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    events = AuditLog(log).read()
    named = {e.get("objectRef", {}).get("name") for e in events if e["stage"] == "ResponseComplete"}
    assert {"before-kill", "durable", "large"} <= named  # the killed server's events kept, then appended to
    created = next(e for e in events if e["verb"] == "create" and e.get("objectRef", {}).get("name") == "durable")
    # The name is known once the body is read: the RequestReceived event has none.
    stages = [e["stage"] for e in events if e["auditID"] == created["auditID"]]
    assert stages == ["RequestReceived", "ResponseComplete"]
    by_id = {e["auditID"]: e for e in events if e["stage"] == "ResponseComplete"}
    bad = by_id[malformed.headers["Audit-Id"]]
    assert bad["responseStatus"]["code"] == 400 and "requestObject" not in bad  # not JSON: not recorded as one
    assert by_id[huge.headers["Audit-Id"]]["responseStatus"]["code"] == 413
    assert len(by_id[large.headers["Audit-Id"]]["requestObject"]["data"]["x"]) == 900 * 1024
    assert oct(log.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--audit-policy-file", "{policy}"], "kubeloop apiserver: --audit-policy-file needs --audit-log-path"),
        (["--audit-log-path", "{log}", "--audit-policy-file", "{bad}"],
         "kubeloop apiserver: {bad}: invalid audit policy: rules[0].level: Unsupported value: \"Loud\""),
    ],
)  # fmt: skip
def test_bad_audit_flags_are_one_line_and_exit_2(tmp_path: pathlib.Path, extra: list[str], message: str) -> None:
    places = {"policy": tmp_path / "policy.yaml", "bad": tmp_path / "bad.yaml", "log": tmp_path / "audit.log"}
    places["policy"].write_text(POLICY)
    places["bad"].write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n")
    argv = [*KUBELOOP, "apiserver", "--memory", "--port", "0", *(arg.format(**places) for arg in extra)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith(message.format(**places)) and result.stderr.count("\n") == 1


def test_pod_security_audit_mode_annotates_the_event(api: Client, log: AuditLog) -> None:
    """A namespace auditing at restricted admits a pod that does not meet it, and its event says
    what it would violate and the enforced policy."""
    name = unique("audited")
    labels = {"pod-security.kubernetes.io/audit": "restricted", "pod-security.kubernetes.io/enforce": "baseline"}
    assert api.post("/api/v1/namespaces", {"metadata": {"name": name, "labels": labels}}).status_code == 201
    pod = {"metadata": {"name": "plain"}, "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}
    made = api.post(f"/api/v1/namespaces/{name}/pods", pod)
    assert made.status_code == 201, made.text
    annotations = log.of(made.headers["Audit-Id"])["annotations"]
    assert annotations["pod-security.kubernetes.io/enforce-policy"] == "baseline:latest"
    assert annotations["pod-security.kubernetes.io/audit-violations"].startswith(
        'would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "app" must set '
    )
    # A pod enforce refuses is audited too.
    root = {"metadata": {"name": "root"}, "spec": {"hostNetwork": True, "containers": [{"name": "app", "image": "nginx:1.27"}]}}  # fmt: skip
    refused = api.post(f"/api/v1/namespaces/{name}/pods", root)
    assert refused.status_code == 403
    annotations = log.of(refused.headers["Audit-Id"])["annotations"]
    assert "host namespaces (hostNetwork=true)" in annotations["pod-security.kubernetes.io/audit-violations"]


def test_a_namespace_whose_labels_went_wrong_is_said_in_the_event(
    audited: tuple[ServerThread, AuditLog], api: Client, log: AuditLog
) -> None:
    """Labels the API refuses can still be stored (written by the server itself, or before Pod
    Security was enforced): a pod there is judged fail-closed, and the event says why."""
    from kubeloop.apiserver.registry.verboptions import WriteOptions

    server = audited[0]
    name = unique("mislabelled")
    registry = server.server.registry  # type: ignore[union-attr]
    namespaces = registry.catalog.lookup("", "v1", "namespaces")
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"pod-security.kubernetes.io/enforce": "strict"}}}  # fmt: skip
    server.call(registry.create(namespaces, None, body, WriteOptions()))  # as the server: no admission
    pod = {"metadata": {"name": "plain"}, "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}
    refused = api.post(f"/api/v1/namespaces/{name}/pods", pod)
    assert refused.status_code == 403  # an enforce level that is not one counts as restricted
    assert 'violates PodSecurity "restricted:latest"' in refused.json()["message"]
    annotations = log.of(refused.headers["Audit-Id"])["annotations"]
    assert annotations["pod-security.kubernetes.io/error"] == (
        'Failed to parse policy: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": '
        "must be one of privileged, baseline, restricted"
    )
