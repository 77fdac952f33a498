"""Admission webhooks as kube-apiserver calls them, over real HTTPS: kubectl (every version on
the machine) and the official client write through Validating- and MutatingWebhookConfigurations
to a webhook server of the test's, which records every AdmissionReview it is sent.

Each test's webhooks select only its own namespace (``kubernetes.io/metadata.name``), so they
leave the other tests on the server alone."""

from __future__ import annotations

import json
import pathlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest

from tests.apiserver.admission.webhooks.webhookserver import WebhookServer, allow, deny, json_patch
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import Client, ServerThread, start_server
from tests.ports import refusing_port

ADMISSION = "/apis/admissionregistration.k8s.io/v1"


@pytest.fixture(scope="module")
def hooks() -> Iterator[WebhookServer]:
    server = WebhookServer(hosts=("localhost", "hooks.webhook-system.svc")).start()
    yield server
    server.stop()


@pytest.fixture
def api(module_server: ServerThread) -> Client:
    return Client(module_server)


_count = iter(range(1, 10_000))


@pytest.fixture
def namespace(api: Client) -> str:
    name = f"wh{next(_count)}"
    assert api.post("/api/v1/namespaces", {"metadata": {"name": name}}).status_code == 201
    return name


Configure = Callable[..., str]


@pytest.fixture
def configure(api: Client, hooks: WebhookServer, namespace: str) -> Iterator[Configure]:
    """``configure(kind, **webhook)`` writes a webhook configuration whose one webhook selects
    this test's namespace; its path on the webhook server is returned. Removed at the end."""
    made: list[str] = []

    def make(kind: str = "validating", *, path: str = "", **webhook: Any) -> str:
        plural = f"{kind}webhookconfigurations"
        path = path or f"{namespace}-{kind}-{len(made)}"
        hook: dict[str, Any] = {
            "name": f"{path}.hooks.kubeloop.test",
            "clientConfig": hooks.client_config(path),
            "rules": [
                {
                    "operations": ["CREATE", "UPDATE"],
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "resources": ["configmaps"],
                }
            ],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        }
        hook.update(webhook)
        kind_name = (
            "ValidatingWebhookConfiguration" if kind == "validating" else "MutatingWebhookConfiguration"
        )
        body = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind_name,
            "metadata": {"name": path},
            "webhooks": [hook],
        }
        response = api.post(f"{ADMISSION}/{plural}", body)
        assert response.status_code == 201, response.text
        made.append(f"{plural}/{path}")
        return path

    yield make
    for configuration in made:
        api.delete(f"{ADMISSION}/{configuration}")


def deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }


def config_map(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


@pytest.fixture(params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def kubectl(request: pytest.FixtureRequest, module_server: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(request.param, module_server.kubeconfig, tmp_path)


# ------------------------------------------------------------------ validating


def test_kubectl_hears_a_denial_and_nothing_is_written(
    kubectl: Kubectl, api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    path = configure()
    hooks.handlers[path] = lambda request: (
        {"allowed": False, "status": {"code": 403, "reason": "Forbidden", "message": "no data named bad"}}
        if "bad" in (request["object"].get("data") or {})
        else {"allowed": True}
    )
    refused = kubectl("create", "-n", namespace, "configmap", "doomed", "--from-literal=bad=1", check=False)
    assert refused.returncode == 1
    assert (
        f'admission webhook "{path}.hooks.kubeloop.test" denied the request: no data named bad'
        in refused.stderr
    )
    applied = kubectl(
        "apply", "-n", namespace, "-f", "-", stdin=json.dumps(config_map("doomed", bad="1")), check=False
    )
    assert applied.returncode == 1
    assert "Error from server (Forbidden)" in applied.stderr  # the webhook's code and reason
    assert api.get(f"/api/v1/namespaces/{namespace}/configmaps/doomed").status_code == 404
    kubectl("create", "-n", namespace, "configmap", "fine", "--from-literal=good=1")
    assert api.get(f"/api/v1/namespaces/{namespace}/configmaps/fine").status_code == 200


def test_the_admission_review_carries_what_upstream_sends(
    api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    path = configure(timeoutSeconds=7)
    hooks.handlers[path] = allow()
    created = api.post(
        f"/api/v1/namespaces/{namespace}/configmaps?fieldManager=tester", config_map("seen", a="1")
    )
    assert created.status_code == 201, created.text
    sent = hooks.requests[path][-1]
    assert sent["query"] == {"timeout": "7s"}
    review = sent["review"]
    assert (review["apiVersion"], review["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    request = review["request"]
    assert request["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert request["requestKind"] == request["kind"] and request["requestResource"] == request["resource"]
    assert (request["name"], request["namespace"], request["operation"]) == ("seen", namespace, "CREATE")
    assert request["userInfo"]["username"] == "kubeloop-admin"
    assert "system:masters" in request["userInfo"]["groups"]
    assert request["dryRun"] is False
    assert request["options"] == {
        "kind": "CreateOptions",
        "apiVersion": "meta.k8s.io/v1",
        "fieldManager": "tester",
    }
    assert request["oldObject"] is None
    stored = request["object"]
    assert stored["data"] == {"a": "1"} and stored["metadata"]["uid"]  # validating: as it is stored
    # An update sends the old object too.
    updated = api.put(
        f"/api/v1/namespaces/{namespace}/configmaps/seen",
        {
            **config_map("seen", a="2"),
            "metadata": {"name": "seen", "resourceVersion": created.json()["metadata"]["resourceVersion"]},
        },
    )
    assert updated.status_code == 200, updated.text
    request = hooks.requests[path][-1]["review"]["request"]
    assert request["operation"] == "UPDATE"
    assert request["options"]["kind"] == "UpdateOptions"
    assert (request["oldObject"]["data"], request["object"]["data"]) == ({"a": "1"}, {"a": "2"})


def test_warnings_reach_kubectl(
    kubectl: Kubectl, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    path = configure()
    hooks.handlers[path] = allow(warnings=["data keys should be lower case"])
    created = kubectl("create", "-n", namespace, "configmap", "warned", "--from-literal=A=1")
    assert "Warning: data keys should be lower case" in created.stderr


def test_a_denial_of_delete_sees_the_old_object(
    api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    path = configure(
        rules=[
            {"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}
        ]
    )
    hooks.handlers[path] = deny("keep it", code=422, reason="Invalid")
    assert (
        api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("kept", a="1")).status_code == 201
    )
    refused = api.delete(f"/api/v1/namespaces/{namespace}/configmaps/kept")
    assert refused.status_code == 422
    status = refused.json()
    assert status["reason"] == "Invalid"
    assert status["message"] == f'admission webhook "{path}.hooks.kubeloop.test" denied the request: keep it'
    request = hooks.requests[path][-1]["review"]["request"]
    assert (request["operation"], request["object"], request["oldObject"]["data"]) == (
        "DELETE",
        None,
        {"a": "1"},
    )
    assert request["options"]["kind"] == "DeleteOptions"
    assert api.get(f"/api/v1/namespaces/{namespace}/configmaps/kept").status_code == 200


def test_the_official_client_gets_the_denial_as_an_api_exception(
    module_server: ServerThread, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    path = configure()
    hooks.handlers[path] = lambda request: {"allowed": False}
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(module_server.kubeconfig), client_configuration=config)
    with kubernetes.client.ApiClient(config) as client:
        core = kubernetes.client.CoreV1Api(client)
        with pytest.raises(kubernetes.client.ApiException) as refused:
            core.create_namespaced_config_map(namespace, config_map("quiet"))
    assert refused.value.status == 400
    body = json.loads(refused.value.body)
    assert (
        body["message"]
        == f'admission webhook "{path}.hooks.kubeloop.test" denied the request without explanation'
    )


# ------------------------------------------------------------------ mutating


def test_a_mutating_webhook_patches_creates_and_updates(
    kubectl: Kubectl, api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    path = configure("mutating")

    def label(request: dict[str, Any]) -> dict[str, Any]:
        if "labels" not in request["object"]["metadata"]:
            return json_patch(
                {"op": "add", "path": "/metadata/labels", "value": {"stamped": request["operation"].lower()}}
            )
        return json_patch(
            {"op": "add", "path": "/metadata/labels/stamped", "value": request["operation"].lower()}
        )

    hooks.handlers[path] = label
    kubectl("create", "-n", namespace, "configmap", "stamped", "--from-literal=a=1")
    created = api.get(f"/api/v1/namespaces/{namespace}/configmaps/stamped").json()
    assert created["metadata"]["labels"] == {"stamped": "create"}
    request = hooks.requests[path][-1]["review"]["request"]
    assert "uid" not in request["object"]["metadata"]  # mutating admission runs before the uid is set
    kubectl("label", "-n", namespace, "configmap", "stamped", "other=yes")
    updated = api.get(f"/api/v1/namespaces/{namespace}/configmaps/stamped").json()
    assert updated["metadata"]["labels"] == {"stamped": "update", "other": "yes"}


def test_reinvocation_calls_an_if_needed_webhook_again_after_a_later_change(
    api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    first = configure("mutating", path=f"{namespace}-a-first", reinvocationPolicy="IfNeeded")
    second = configure("mutating", path=f"{namespace}-b-second")
    seen_by_first: list[dict[str, str]] = []

    def record(request: dict[str, Any]) -> dict[str, Any]:
        seen_by_first.append(dict(request["object"]["metadata"].get("labels") or {}))
        return {"allowed": True}

    hooks.handlers[first] = record
    hooks.handlers[second] = lambda request: json_patch(
        {"op": "add", "path": "/metadata/labels", "value": {"second": "was-here"}}
    )
    assert api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("twice")).status_code == 201
    # Configurations run in name order; the second's change sends the object to the first again.
    assert seen_by_first == [{}, {"second": "was-here"}]
    assert len(hooks.requests[second]) == 1


def test_a_patch_into_an_invalid_object_is_refused_and_writes_nothing(
    api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    path = configure("mutating")
    hooks.handlers[path] = lambda request: json_patch({"op": "add", "path": "/data", "value": 42})
    refused = api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("broken", a="1"))
    assert refused.status_code == 500
    assert refused.json()["message"].startswith("Internal error occurred: ")
    hooks.handlers[path] = lambda request: json_patch(
        {"op": "add", "path": "/metadata/labels", "value": {"bad key": "x"}}
    )
    invalid = api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("broken", a="1"))
    assert invalid.status_code == 422
    assert invalid.json()["details"]["causes"][0]["field"] == "metadata.labels"
    assert api.get(f"/api/v1/namespaces/{namespace}/configmaps/broken").status_code == 404


# ------------------------------------------------------------------ failures fail alone


def test_an_unreachable_webhook_fails_closed_or_open_by_its_policy(
    api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    with refusing_port() as port:
        url = f"https://127.0.0.1:{port}/nowhere"
        closed = configure(clientConfig={"url": url, "caBundle": hooks.ca_bundle})
        refused = api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("blocked"))
        assert refused.status_code == 500
        assert refused.json()["reason"] == "InternalError"
        assert refused.json()["message"] == (
            f'Internal error occurred: failed calling webhook "{closed}.hooks.kubeloop.test": failed to call webhook: '
            f'Post "{url}?timeout=10s": dial tcp 127.0.0.1:{port}: connect: connection refused'
        )
        assert api.get(f"/api/v1/namespaces/{namespace}/configmaps/blocked").status_code == 404
        api.delete(f"{ADMISSION}/validatingwebhookconfigurations/{closed}")
        configure(clientConfig={"url": url, "caBundle": hooks.ca_bundle}, failurePolicy="Ignore")
        assert api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("passed")).status_code == 201


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ((200, b"not json"), "couldn't get version/kind; json parse error"),
        (
            (
                200,
                json.dumps(
                    {
                        "apiVersion": "admission.k8s.io/v1",
                        "kind": "AdmissionReview",
                        "response": {"uid": "other", "allowed": True},
                    }
                ).encode(),
            ),
            'received invalid webhook response: expected response.uid="',
        ),
        ((500, b"boom"), 'an error on the server ("boom") has prevented the request from succeeding'),
    ],
)
def test_a_garbled_answer_fails_the_request_in_upstreams_words(
    api: Client,
    hooks: WebhookServer,
    configure: Configure,
    namespace: str,
    answer: tuple[int, bytes],
    reason: str,
) -> None:
    path = configure()
    hooks.handlers[path] = lambda request: answer
    refused = api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("garbled"))
    assert refused.status_code == 500
    assert f'failed calling webhook "{path}.hooks.kubeloop.test": ' in refused.json()["message"]
    assert reason in refused.json()["message"]


def test_a_slow_webhook_times_out_and_stalls_no_other_request(
    api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    path = configure(timeoutSeconds=1)
    hooks.handlers[path] = allow()
    hooks.held[path] = threading.Event()
    outcome: dict[str, Any] = {}
    writer = threading.Thread(
        target=lambda: outcome.update(
            response=api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("slow"))
        )
    )
    writer.start()
    try:
        # While the webhook holds the write, the server answers others.
        assert api.get(f"/api/v1/namespaces/{namespace}").status_code == 200
        assert "response" not in outcome
        writer.join(30)
    finally:
        hooks.held[path].set()
    response = outcome["response"]
    assert response.status_code == 500
    assert response.json()["message"].endswith('?timeout=1s": context deadline exceeded')
    assert api.get(f"/api/v1/namespaces/{namespace}/configmaps/slow").status_code == 404


# ------------------------------------------------------------------ which requests a webhook sees


def test_rules_and_selectors_pick_the_requests(
    api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    path = configure(objectSelector={"matchLabels": {"checked": "yes"}})
    hooks.handlers[path] = deny("checked objects are refused")
    labelled = {**config_map("labelled"), "metadata": {"name": "labelled", "labels": {"checked": "yes"}}}
    assert api.post(f"/api/v1/namespaces/{namespace}/configmaps", labelled).status_code == 403
    assert api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("plain")).status_code == 201
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "labels": {"checked": "yes"}}}
    assert api.post(f"/api/v1/namespaces/{namespace}/secrets", secret).status_code == 201  # not in the rules
    other = api.post("/api/v1/namespaces", {"metadata": {"name": f"{namespace}-other"}})
    assert other.status_code == 201
    elsewhere = api.post(f"/api/v1/namespaces/{namespace}-other/configmaps", labelled)
    assert elsewhere.status_code == 201  # the namespace selector leaves other namespaces alone
    assert len(hooks.requests[path]) == 1


def test_match_conditions_decide_with_cel(
    api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    path = configure(
        matchConditions=[{"name": "not-exempt", "expression": "!object.metadata.name.startsWith('exempt-')"}]
    )
    hooks.handlers[path] = deny("refused")
    assert api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("exempt-one")).status_code == 201
    assert api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("other")).status_code == 403
    assert len(hooks.requests[path]) == 1


def test_a_service_reference_reaches_the_webhook_by_its_service_name(
    api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    """An ExternalName Service of localhost: called at hooks.webhook-system.svc, whose name the
    webhook's certificate must carry."""
    api.post("/api/v1/namespaces", {"metadata": {"name": "webhook-system"}})
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "hooks"},
        "spec": {"type": "ExternalName", "externalName": "localhost", "ports": [{"port": hooks.port}]},
    }
    created = api.post("/api/v1/namespaces/webhook-system/services", service)
    assert created.status_code in (201, 409), created.text
    path = f"{namespace}-by-service"
    configure(
        path=path,
        clientConfig={
            "service": {
                "namespace": "webhook-system",
                "name": "hooks",
                "path": f"/{path}",
                "port": hooks.port,
            },
            "caBundle": hooks.ca_bundle,
        },
    )
    hooks.handlers[path] = deny("through the service")
    refused = api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("via"))
    assert refused.status_code == 403
    assert refused.json()["message"].endswith("denied the request: through the service")


def test_a_dry_run_is_sent_as_one_and_stores_nothing(
    api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    path = configure(sideEffects="NoneOnDryRun")
    hooks.handlers[path] = allow()
    response = api.post(f"/api/v1/namespaces/{namespace}/configmaps?dryRun=All", config_map("dry"))
    assert response.status_code == 201
    request = hooks.requests[path][-1]["review"]["request"]
    assert request["dryRun"] is True and request["options"]["dryRun"] == ["All"]
    assert api.get(f"/api/v1/namespaces/{namespace}/configmaps/dry").status_code == 404


def test_a_webhook_cannot_lock_its_own_configuration(
    api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    everything = [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]
    path = configure(rules=everything, namespaceSelector={})
    hooks.handlers[path] = deny("nothing passes")
    try:
        assert (
            api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("blocked")).status_code == 403
        )
        assert api.delete(f"{ADMISSION}/validatingwebhookconfigurations/{path}").status_code == 200
        assert api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("freed")).status_code == 201
    finally:
        api.delete(f"{ADMISSION}/validatingwebhookconfigurations/{path}")


# ------------------------------------------------------------------ the configurations themselves


def test_invalid_configurations_are_refused_with_upstreams_messages(api: Client) -> None:
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "broken"},
        "webhooks": [
            {
                "name": "short",
                "clientConfig": {
                    "url": "http://example.com/x?y=1",
                    "service": {"namespace": "a", "name": "b"},
                },
                "rules": [
                    {
                        "operations": ["*", "CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["*", "pods"],
                    }
                ],
                "timeoutSeconds": 31,
                "admissionReviewVersions": ["v2"],
            }
        ],
    }
    refused = api.post(f"{ADMISSION}/validatingwebhookconfigurations", body)
    assert refused.status_code == 422, refused.text
    causes = {(c["field"], c["message"]) for c in refused.json()["details"]["causes"]}
    assert causes == {
        (
            "webhooks[0].name",
            'Invalid value: "short": should be a domain with at least three segments separated by dots',
        ),
        (
            "webhooks[0].rules[0].operations",
            'Invalid value: ["*","CREATE"]: if \'*\' is present, must not specify other operations',
        ),
        (
            "webhooks[0].rules[0].resources",
            'Invalid value: ["*","pods"]: if \'*\' is present, must not specify other resources without subresources',
        ),
        ("webhooks[0].sideEffects", "Required value: must specify one of None, NoneOnDryRun"),
        (
            "webhooks[0].timeoutSeconds",
            "Invalid value: 31: the timeout value must be between 1 and 30 seconds",
        ),
        ("webhooks[0].clientConfig", "Required value: exactly one of url or service is required"),
        (
            "webhooks[0].admissionReviewVersions",
            'Invalid value: ["v2"]: must include at least one of v1, v1beta1',
        ),
    }


def test_defaults_are_filled_as_upstream_fills_them(api: Client, hooks: WebhookServer) -> None:
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "defaulted"},
        "webhooks": [
            {
                "name": "defaulted.hooks.kubeloop.test",
                "clientConfig": {"service": {"namespace": "a", "name": "b"}},
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                    }
                ],
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }
        ],
    }
    created = api.post(f"{ADMISSION}/mutatingwebhookconfigurations", body)
    assert created.status_code == 201, created.text
    try:
        hook = created.json()["webhooks"][0]
        assert hook["failurePolicy"] == "Fail" and hook["matchPolicy"] == "Equivalent"
        assert hook["namespaceSelector"] == {} and hook["objectSelector"] == {}
        assert hook["timeoutSeconds"] == 10 and hook["reinvocationPolicy"] == "Never"
        assert hook["rules"][0]["scope"] == "*"
        assert hook["clientConfig"]["service"]["port"] == 443
    finally:
        api.delete(f"{ADMISSION}/mutatingwebhookconfigurations/defaulted")


def test_a_delete_relays_the_webhooks_warnings(
    kubectl: Kubectl, api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    path = configure(
        rules=[
            {"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}
        ]
    )
    hooks.handlers[path] = allow(warnings=["this ConfigMap was still mounted"])
    assert (
        api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("gone", a="1")).status_code == 201
    )
    deleted = kubectl("delete", "-n", namespace, "configmap", "gone")
    assert "Warning: this ConfigMap was still mounted" in deleted.stderr
    assert api.get(f"/api/v1/namespaces/{namespace}/configmaps/gone").status_code == 404


def test_scale_reaches_webhooks_as_the_scale_subresource_with_a_scale(
    kubectl: Kubectl, api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    scale_rules = [
        {
            "operations": ["UPDATE"],
            "apiGroups": ["apps"],
            "apiVersions": ["v1"],
            "resources": ["deployments/scale"],
        }
    ]
    whole = configure(
        rules=[
            {
                "operations": ["UPDATE"],
                "apiGroups": ["apps"],
                "apiVersions": ["v1"],
                "resources": ["deployments"],
            }
        ]
    )
    scales = configure(rules=scale_rules)
    hooks.handlers[whole] = deny("the Deployment itself is not what a scale sends")
    hooks.handlers[scales] = lambda request: (
        {"allowed": True, "warnings": ["scaled"]}
        if request["object"]["spec"]["replicas"] <= 3
        else {"allowed": False, "status": {"code": 403, "message": "at most 3"}}
    )
    made = api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("web"))
    assert made.status_code == 201, made.text
    scaled = kubectl("scale", "-n", namespace, "deployment/web", "--replicas=3")
    assert "Warning: scaled" in scaled.stderr
    request = hooks.requests[scales][-1]["review"]["request"]
    assert (request["kind"], request["subResource"], request["resource"]["resource"]) == (
        {"group": "autoscaling", "version": "v1", "kind": "Scale"},
        "scale",
        "deployments",
    )
    assert (request["oldObject"]["spec"], request["object"]["spec"]) == ({"replicas": 1}, {"replicas": 3})
    refused = kubectl("scale", "-n", namespace, "deployment/web", "--replicas=9", check=False)
    assert "denied the request: at most 3" in refused.stderr
    assert api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/web").json()["spec"]["replicas"] == 3
    assert whole not in hooks.requests  # the Deployment rule never saw the scale


def test_binding_and_eviction_reach_webhooks_with_their_own_objects(
    api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    path = configure(
        rules=[
            {
                "operations": ["CREATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods/binding", "pods/eviction"],
            }
        ]
    )
    hooks.handlers[path] = lambda request: (
        {"allowed": True, "warnings": [f"{request['subResource']} seen"]}
        if request["name"] != "guarded"
        else {
            "allowed": False,
            "status": {"code": 403, "message": f"no {request['subResource']} for guarded"},
        }
    )
    pods = f"/api/v1/namespaces/{namespace}/pods"
    for name in ("free", "guarded"):
        made = api.post(
            pods, {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
        )
        assert made.status_code == 201, made.text
    binding = {"apiVersion": "v1", "kind": "Binding", "target": {"kind": "Node", "name": "node-1"}}
    bound = api.post(f"{pods}/free/binding", {**binding, "metadata": {"name": "free"}})
    assert bound.status_code == 201, bound.text
    assert bound.headers["Warning"] == '299 - "binding seen"'
    request = hooks.requests[path][-1]["review"]["request"]
    assert (request["kind"], request["subResource"], request["object"]["target"]) == (
        {"group": "", "version": "v1", "kind": "Binding"},
        "binding",
        {"kind": "Node", "name": "node-1"},
    )
    refused = api.post(f"{pods}/guarded/binding", {**binding, "metadata": {"name": "guarded"}})
    assert refused.status_code == 403
    assert refused.json()["message"].endswith("denied the request: no binding for guarded")
    assert not api.get(f"{pods}/guarded").json()["spec"].get("nodeName")

    eviction = {"apiVersion": "policy/v1", "kind": "Eviction"}
    kept = api.post(f"{pods}/guarded/eviction", {**eviction, "metadata": {"name": "guarded"}})
    assert kept.status_code == 403
    assert kept.json()["message"].endswith("denied the request: no eviction for guarded")
    assert api.get(f"{pods}/guarded").status_code == 200
    request = hooks.requests[path][-1]["review"]["request"]
    assert (request["kind"], request["subResource"]) == (
        {"group": "policy", "version": "v1", "kind": "Eviction"},
        "eviction",
    )
    evicted = api.post(f"{pods}/free/eviction", {**eviction, "metadata": {"name": "free"}})
    assert evicted.status_code == 201, evicted.text
    assert evicted.headers["Warning"] == '299 - "eviction seen"'


def test_match_conditions_may_ask_the_authorizer(
    api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    path = configure(
        matchConditions=[
            {
                "name": "only-secret-readers",
                "expression": "authorizer.group('').resource('secrets').check('list').allowed()",
            }
        ]
    )
    hooks.handlers[path] = deny("seen by the webhook")
    role = {
        "metadata": {"name": "carol"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}],
    }
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    assert api.post(f"{rbac}/roles", role).status_code == 201
    binding = {
        "metadata": {"name": "carol"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "carol"},
        "subjects": [{"kind": "User", "name": "carol", "apiGroup": "rbac.authorization.k8s.io"}],
    }
    assert api.post(f"{rbac}/rolebindings", binding).status_code == 201
    configmaps = f"/api/v1/namespaces/{namespace}/configmaps"
    # carol may not list Secrets: the condition is false, the webhook is not called.
    assert (
        api.post(configmaps, config_map("carols"), headers={"Impersonate-User": "carol"}).status_code == 201
    )
    # The administrator may: the webhook is called, and refuses.
    refused = api.post(configmaps, config_map("admins"))
    assert refused.status_code == 403
    assert refused.json()["message"].endswith("denied the request: seen by the webhook")


def test_a_scale_whose_workload_changed_during_admission_is_tried_again(
    api: Client, hooks: WebhookServer, configure: Configure, namespace: str
) -> None:
    """GuaranteedUpdate: the Deployment is written while the scale's webhook is answering, so
    the scale is admitted again against the new object instead of failing with 409."""
    path = configure(
        rules=[
            {
                "operations": ["UPDATE"],
                "apiGroups": ["apps"],
                "apiVersions": ["v1"],
                "resources": ["deployments/scale"],
            }
        ]
    )
    racy = f"/apis/apps/v1/namespaces/{namespace}/deployments/racy"

    def meanwhile(request: dict[str, Any]) -> dict[str, Any]:
        if len(hooks.requests[path]) == 1:  # the first call: someone else writes the Deployment now
            touched = api.patch(
                racy, {"metadata": {"labels": {"touched": "yes"}}}, "application/merge-patch+json"
            )
            assert touched.status_code == 200, touched.text
        return {"allowed": True}

    hooks.handlers[path] = meanwhile
    made = api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("racy"))
    assert made.status_code == 201, made.text
    scaled = api.patch(f"{racy}/scale", {"spec": {"replicas": 4}}, "application/merge-patch+json")
    assert scaled.status_code == 200, scaled.text
    assert len(hooks.requests[path]) == 2
    current = api.get(racy).json()
    assert (current["spec"]["replicas"], current["metadata"]["labels"]) == (4, {"touched": "yes"})


@pytest.mark.parametrize("kind", ["validating", "mutating"])
def test_the_write_after_a_configuration_is_made_or_deleted_meets_its_webhook_or_not(
    hooks: WebhookServer, kind: str
) -> None:
    """Whether admission covers a kind is remembered between writes (every write asks twice);
    a webhook configuration written, then deleted, changes it for the very next write. On a
    server of its own: no other test's configuration may make ConfigMaps covered first."""
    server = start_server()
    try:
        api = Client(server)
        configmaps = "/api/v1/namespaces/default/configmaps"
        assert api.post(configmaps, config_map("before")).status_code == 201  # not covered
        path = f"fresh-{kind}"
        hooks.handlers[path] = lambda request: {"allowed": False, "status": {"message": "not now"}}
        plural = f"{kind}webhookconfigurations"
        body = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration" if kind == "validating" else "MutatingWebhookConfiguration",
            "metadata": {"name": path},
            "webhooks": [
                {
                    "name": f"{path}.hooks.kubeloop.test",
                    "clientConfig": hooks.client_config(path),
                    "rules": [
                        {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}
                    ],
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                }
            ],
        }
        assert api.post(f"{ADMISSION}/{plural}", body).status_code == 201
        denied = api.post(configmaps, config_map("configured"))
        assert denied.status_code == 400, denied.text
        assert "not now" in denied.json()["message"]
        assert api.delete(f"{ADMISSION}/{plural}/{path}").status_code == 200
        assert api.post(configmaps, config_map("after")).status_code == 201
    finally:
        server.stop()
