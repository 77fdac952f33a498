"""ValidatingAdmissionPolicy and its bindings, as kube-apiserver evaluates them, over real HTTPS:
kubectl (every version on the machine) and the official client write Deployments and
ConfigMaps past CEL policies. Each test's bindings select only its own namespace
(``kubernetes.io/metadata.name``), so they leave the other tests alone."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest

from kubeloop.apiserver.admission.admissionpolicy.policyadmission import PolicyAdmission
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import Client, ServerThread, start_server

ADMISSION = "/apis/admissionregistration.k8s.io/v1"


@pytest.fixture(scope="module")
def api(module_server: ServerThread) -> Client:
    return Client(module_server)


_count = iter(range(1, 10_000))


@pytest.fixture
def namespace(api: Client) -> str:
    name = f"vap{next(_count)}"
    made = api.post("/api/v1/namespaces", {"metadata": {"name": name, "labels": {"environment": "test"}}})
    assert made.status_code == 201
    return name


@pytest.fixture(params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def kubectl(request: pytest.FixtureRequest, module_server: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(request.param, module_server.kubeconfig, tmp_path)


Bind = Callable[..., str]


@pytest.fixture
def bind(api: Client, namespace: str) -> Iterator[Bind]:
    """``bind(policy_spec, **binding_spec)`` writes a policy and a binding of it that selects
    this test's namespace; the policy's name is returned. Both go at the end."""
    made: list[str] = []

    def make(policy: dict[str, Any], **binding: Any) -> str:
        name = f"{namespace}-policy-{len(made)}.example.com"
        created = api.post(
            f"{ADMISSION}/validatingadmissionpolicies",
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": name},
                "spec": policy,
            },
        )
        assert created.status_code == 201, created.text
        made.append(f"validatingadmissionpolicies/{name}")
        spec = {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
            **binding,
        }
        bound = api.post(
            f"{ADMISSION}/validatingadmissionpolicybindings",
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": f"{name}-binding"},
                "spec": spec,
            },
        )
        assert bound.status_code == 201, bound.text
        made.append(f"validatingadmissionpolicybindings/{name}-binding")
        return name

    yield make
    for path in made:
        api.delete(f"{ADMISSION}/{path}")


DEPLOYMENTS = {
    "apiGroups": ["apps"],
    "apiVersions": ["v1"],
    "operations": ["CREATE", "UPDATE"],
    "resources": ["deployments"],
}
CONFIGMAPS = {
    "apiGroups": [""],
    "apiVersions": ["v1"],
    "operations": ["CREATE", "UPDATE", "DELETE"],
    "resources": ["configmaps"],
}


def replicas_policy(**extra: Any) -> dict[str, Any]:
    """Upstream's documentation example: at most 5 replicas."""
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [DEPLOYMENTS]},
        "validations": [{"expression": "object.spec.replicas <= 5"}],
        **extra,
    }


def deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
        },
    }  # fmt: skip


def config_map(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


# ------------------------------------------------------------------ Deny, Warn


def test_kubectl_hears_the_denial_in_upstreams_words(
    kubectl: Kubectl, api: Client, bind: Bind, namespace: str
) -> None:
    policy = bind(replicas_policy())
    refused = kubectl(
        "create", "-n", namespace, "-f", "-", stdin=json.dumps(deployment("nginx", 6)), check=False
    )
    assert refused.returncode != 0
    # Upstream's documentation shows this very line for its example policy.
    assert (
        f"The deployments \"nginx\" is invalid: : ValidatingAdmissionPolicy '{policy}' with binding "
        f"'{policy}-binding' denied request: failed expression: object.spec.replicas <= 5"
    ) in refused.stderr
    assert api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/nginx").status_code == 404
    kubectl("create", "-n", namespace, "-f", "-", stdin=json.dumps(deployment("nginx", 5)))


def test_the_status_carries_the_reason_code_and_the_cause(api: Client, bind: Bind, namespace: str) -> None:
    policy = bind(
        replicas_policy(
            validations=[
                {"expression": "object.spec.replicas <= 5", "reason": "Forbidden", "messageExpression": "'replicas ' + string(object.spec.replicas) + ' > 5'"}
            ]
        )
    )  # fmt: skip
    refused = api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("big", 7))
    assert refused.status_code == 403
    status = refused.json()
    message = (
        f"ValidatingAdmissionPolicy '{policy}' with binding '{policy}-binding' denied request: replicas 7 > 5"
    )
    assert status["reason"] == "Forbidden"
    assert status["message"] == f'deployments.apps "big" is forbidden: {message}'
    assert status["details"] == {
        "name": "big",
        "group": "apps",
        "kind": "deployments",
        "causes": [{"message": message}],
    }


def test_warn_and_deny_actions(kubectl: Kubectl, api: Client, bind: Bind, namespace: str) -> None:
    policy = bind(
        {"matchConstraints": {"resourceRules": [CONFIGMAPS]}, "validations": [{"expression": "!has(object.data) || !('password' in object.data)", "message": "no passwords"}]},
        validationActions=["Warn", "Audit"],
    )  # fmt: skip
    created = kubectl("create", "-n", namespace, "configmap", "leaky", "--from-literal=password=x")
    assert (
        f"Warning: Validation failed for ValidatingAdmissionPolicy '{policy}' with binding '{policy}-binding': no passwords"
        in created.stderr
    )
    assert api.get(f"/api/v1/namespaces/{namespace}/configmaps/leaky").status_code == 200


def test_an_update_sees_the_old_object_and_variables_compose(api: Client, bind: Bind, namespace: str) -> None:
    bind(
        {
            "matchConstraints": {"resourceRules": [CONFIGMAPS]},
            "variables": [
                {"name": "size", "expression": "object == null || !has(object.data) ? 0 : size(object.data)"},
                {"name": "before", "expression": "oldObject == null || !has(oldObject.data) ? 0 : size(oldObject.data)"},
            ],
            "validations": [
                {"expression": "request.operation == 'DELETE' || variables.size >= variables.before", "messageExpression": "'keys may not go: ' + string(variables.before) + ' -> ' + string(variables.size)"},
                {"expression": "request.operation != 'DELETE' || !has(oldObject.metadata.labels) || !('keep' in oldObject.metadata.labels)", "message": "kept"},
            ],
        }
    )  # fmt: skip
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    assert api.post(path, config_map("c", a="1", b="2")).status_code == 201
    shrunk = api.patch(f"{path}/c", {"data": {"b": None}}, content_type="application/merge-patch+json")
    assert shrunk.status_code == 422
    assert shrunk.json()["message"].endswith("denied request: keys may not go: 2 -> 1")
    grown = api.patch(
        f"{path}/c",
        {"data": {"c": "3"}, "metadata": {"labels": {"keep": "yes"}}},
        content_type="application/merge-patch+json",
    )
    assert grown.status_code == 200, grown.text
    kept = api.delete(f"{path}/c")
    assert kept.status_code == 422 and kept.json()["message"].endswith("denied request: kept")


def test_match_constraints_exclusions_selectors_and_conditions(
    api: Client, bind: Bind, namespace: str
) -> None:
    bind(
        {
            "matchConstraints": {
                "resourceRules": [CONFIGMAPS],
                "excludeResourceRules": [{**CONFIGMAPS, "resourceNames": ["exempt"]}],
                "objectSelector": {"matchExpressions": [{"key": "checked", "operator": "NotIn", "values": ["no"]}]},
            },
            "matchConditions": [{"name": "not-system", "expression": "!object.metadata.name.startsWith('system-')"}],
            "validations": [{"expression": "false", "message": "every ConfigMap is refused"}],
        }
    )  # fmt: skip
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    assert api.post(path, config_map("plain")).status_code == 422
    assert api.post(path, config_map("exempt")).status_code == 201  # excluded by name
    unchecked = {**config_map("unchecked"), "metadata": {"name": "unchecked", "labels": {"checked": "no"}}}
    assert api.post(path, unchecked).status_code == 201  # the object selector
    assert api.post(path, config_map("system-x")).status_code == 201  # the match condition
    # A Secret is not a ConfigMap; another namespace is not this binding's.
    assert api.post(f"/api/v1/namespaces/{namespace}/secrets", {"metadata": {"name": "s"}}).status_code == 201
    assert (
        api.post("/api/v1/namespaces/default/configmaps", config_map(f"elsewhere-{namespace}")).status_code
        == 201
    )


def test_params_by_name_and_by_selector(api: Client, bind: Bind, namespace: str) -> None:
    limits = f"/api/v1/namespaces/{namespace}/configmaps"
    assert (
        api.post(
            limits,
            {**config_map("limits", max="3"), "metadata": {"name": "limits", "labels": {"role": "limit"}}},
        ).status_code
        == 201
    )
    policy = {
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {"resourceRules": [DEPLOYMENTS]},
        "validations": [{"expression": "object.spec.replicas <= int(params.data.max)", "messageExpression": "'at most ' + params.data.max"}],
    }  # fmt: skip
    bind(policy, paramRef={"name": "limits", "parameterNotFoundAction": "Deny"})
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    refused = api.post(deployments, deployment("four", 4))
    assert refused.status_code == 422 and refused.json()["message"].endswith("denied request: at most 3")
    assert api.post(deployments, deployment("three", 3)).status_code == 201
    # The param changes: the next request is judged by the new value.
    assert (
        api.patch(
            f"{limits}/limits", {"data": {"max": "4"}}, content_type="application/merge-patch+json"
        ).status_code
        == 200
    )
    assert api.post(deployments, deployment("four", 4)).status_code == 201


def test_a_missing_param_under_deny_refuses_and_under_allow_admits(
    api: Client, bind: Bind, namespace: str
) -> None:
    policy = {
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {"resourceRules": [CONFIGMAPS]},
        "validations": [{"expression": "params.data.allowed == 'yes'"}],
    }
    denying = bind(
        policy, paramRef={"selector": {"matchLabels": {"role": "gate"}}, "parameterNotFoundAction": "Deny"}
    )
    refused = api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("first"))
    assert refused.status_code == 422
    assert refused.json()["message"] == (
        f"configmaps \"first\" is forbidden: ValidatingAdmissionPolicy '{denying}' with binding '{denying}-binding' "
        "denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    )
    api.delete(f"{ADMISSION}/validatingadmissionpolicybindings/{denying}-binding")
    bind(policy, paramRef={"selector": {"matchLabels": {"role": "gate"}}, "parameterNotFoundAction": "Allow"})
    assert api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("second")).status_code == 201


def test_an_expression_that_errs_follows_the_failure_policy(api: Client, bind: Bind, namespace: str) -> None:
    broken = {
        "matchConstraints": {"resourceRules": [CONFIGMAPS]},
        "validations": [{"expression": "object.data.missing == 'x'"}],
    }
    name = bind({**broken, "failurePolicy": "Fail"})
    refused = api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("a", present="1"))
    assert refused.status_code == 422
    assert (
        f"ValidatingAdmissionPolicy '{name}' with binding '{name}-binding' denied request: expression 'object.data.missing == 'x'' resulted in error: "
        in refused.json()["message"]
    )
    api.delete(f"{ADMISSION}/validatingadmissionpolicybindings/{name}-binding")
    bind({**broken, "failurePolicy": "Ignore"})
    assert (
        api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("b", present="1")).status_code
        == 201
    )


def test_the_official_client_gets_an_api_exception(
    module_server: ServerThread, bind: Bind, namespace: str
) -> None:
    bind(replicas_policy())
    client = kubernetes.config.new_client_from_config(str(module_server.kubeconfig))
    try:
        with pytest.raises(kubernetes.client.ApiException) as refused:
            kubernetes.client.AppsV1Api(client).create_namespaced_deployment(namespace, deployment("many", 8))
    finally:
        client.close()
    assert refused.value.status == 422
    assert (
        "denied request: failed expression: object.spec.replicas <= 5"
        in json.loads(refused.value.body)["message"]
    )


def test_a_binding_of_no_policy_and_an_unbound_policy_do_nothing(api: Client, namespace: str) -> None:
    orphan = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": f"{namespace}-orphan"},
        "spec": {"policyName": "no-such-policy", "validationActions": ["Deny"]},
    }
    assert api.post(f"{ADMISSION}/validatingadmissionpolicybindings", orphan).status_code == 201
    unbound = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": f"{namespace}-unbound"},
        "spec": {
            "matchConstraints": {"resourceRules": [CONFIGMAPS]},
            "validations": [{"expression": "false"}],
        },
    }
    assert api.post(f"{ADMISSION}/validatingadmissionpolicies", unbound).status_code == 201
    try:
        assert api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("free")).status_code == 201
    finally:
        api.delete(f"{ADMISSION}/validatingadmissionpolicybindings/{namespace}-orphan")
        api.delete(f"{ADMISSION}/validatingadmissionpolicies/{namespace}-unbound")


def test_invalid_policies_and_bindings_are_refused_with_upstreams_messages(api: Client) -> None:
    def refused(plural: str, kind: str, spec: dict[str, Any]) -> str:
        body = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": "bad"},
            "spec": spec,
        }
        answer = api.post(f"{ADMISSION}/{plural}", body)
        assert answer.status_code == 422, answer.text
        return str(answer.json()["message"])

    def policy(spec: dict[str, Any]) -> str:
        return refused("validatingadmissionpolicies", "ValidatingAdmissionPolicy", spec)

    def binding(spec: dict[str, Any]) -> str:
        return refused("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", spec)

    assert "spec.matchConstraints: Required value" in policy({"validations": [{"expression": "true"}]})
    assert "spec.matchConstraints.resourceRules: Required value" in policy(
        {"matchConstraints": {}, "validations": [{"expression": "true"}]}
    )
    assert (
        "spec.validations: Required value: validations or auditAnnotations must contain at least one item"
        in policy({"matchConstraints": {"resourceRules": [CONFIGMAPS]}})
    )
    assert "spec.validations[0].expression: Required value: expression is not specified" in policy(
        {"matchConstraints": {"resourceRules": [CONFIGMAPS]}, "validations": [{"message": "m"}]}
    )
    assert 'spec.failurePolicy: Unsupported value: "Sometimes": supported values: "Fail", "Ignore"' in policy(
        {
            "matchConstraints": {"resourceRules": [CONFIGMAPS]},
            "validations": [{"expression": "true"}],
            "failurePolicy": "Sometimes",
        }
    )
    assert "spec.policyName: Required value" in binding({"validationActions": ["Deny"]})
    assert "spec.validationActions: Required value: at least one validation action is required" in binding(
        {"policyName": "p"}
    )
    assert (
        'spec.validationActions[0]: Unsupported value: "Block": supported values: "Audit", "Deny", "Warn"'
        in binding({"policyName": "p", "validationActions": ["Block"]})
    )
    assert "must not contain both Deny and Warn" in binding(
        {"policyName": "p", "validationActions": ["Deny", "Warn"]}
    )
    assert "spec.paramRef.parameterNotFoundAction: Required value" in binding(
        {"policyName": "p", "validationActions": ["Deny"], "paramRef": {"name": "x"}}
    )
    assert "spec.paramRef.name: Forbidden: name and selector are mutually exclusive" in binding(
        {
            "policyName": "p",
            "validationActions": ["Deny"],
            "paramRef": {"name": "x", "selector": {}, "parameterNotFoundAction": "Deny"},
        }
    )


def _status_for_generation(
    module_server: ServerThread, api: Client, name: str, generation: int
) -> dict[str, Any]:
    """The policy's status once the controller has seen ``generation`` (read from a watch)."""
    watch = api.session.get(
        f"{module_server.url}{ADMISSION}/validatingadmissionpolicies",
        params={"watch": "1", "fieldSelector": f"metadata.name={name}"},
        stream=True,
        timeout=60,
    )
    try:
        for line in watch.iter_lines():
            status = json.loads(line)["object"].get("status") or {}
            if status.get("observedGeneration") == generation:
                return dict(status)
    finally:
        watch.close()
    raise AssertionError("the watch ended before the status saw the generation")


def test_the_policy_controller_type_checks_expressions_into_status(
    module_server: ServerThread, api: Client, namespace: str
) -> None:
    name = f"{namespace}-typed.example.com"
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": {"resourceRules": [DEPLOYMENTS]},
            "validations": [
                {"expression": "object.spec.replicass <= 5"},
                {
                    "expression": "object.spec.replicas <= 5",
                    "messageExpression": "'too many: ' + object.spec.replicas",
                },
            ],
        },
    }
    assert api.post(f"{ADMISSION}/validatingadmissionpolicies", body).status_code == 201
    try:
        status = _status_for_generation(module_server, api, name, 1)
        assert status["typeChecking"]["expressionWarnings"] == [
            {
                "fieldRef": "spec.validations[0].expression",
                "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicass'\n"
                " | object.spec.replicass <= 5\n | ...........^",
            },
            {
                "fieldRef": "spec.validations[1].messageExpression",
                "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:14: found no matching overload for "
                "'_+_' applied to '(string, int)'\n | 'too many: ' + object.spec.replicas\n | .............^",
            },
        ]
        fixed = api.get(f"{ADMISSION}/validatingadmissionpolicies/{name}").json()
        fixed["spec"]["validations"] = [{"expression": "object.spec.replicas <= 5"}]
        assert api.put(f"{ADMISSION}/validatingadmissionpolicies/{name}", fixed).status_code == 200
        assert _status_for_generation(module_server, api, name, 2)["typeChecking"] == {
            "expressionWarnings": []
        }
    finally:
        api.delete(f"{ADMISSION}/validatingadmissionpolicies/{name}")


def test_expressions_that_do_not_compile_are_refused_when_written(api: Client) -> None:
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "uncompiled.example.com"},
        "spec": {
            "matchConstraints": {"resourceRules": [CONFIGMAPS]},
            "validations": [{"expression": "object.data.size() <="}],
        },
    }
    refused = api.post(f"{ADMISSION}/validatingadmissionpolicies", policy)
    assert refused.status_code == 422, refused.text
    [cause] = refused.json()["details"]["causes"]
    assert cause["field"] == "spec.validations[0].expression"
    assert cause["message"].startswith(
        'Invalid value: "object.data.size() <=": compilation failed: ERROR: <input>:1:22: Syntax error:'
    )
    webhooks = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "uncompiled"},
        "webhooks": [
            {
                "name": "uncompiled.example.com",
                "clientConfig": {"url": "https://127.0.0.1:1/x"},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "matchConditions": [{"name": "broken", "expression": "(("}],
            }
        ],
    }
    refused = api.post(f"{ADMISSION}/validatingwebhookconfigurations", webhooks)
    assert refused.status_code == 422, refused.text
    assert refused.json()["details"]["causes"][0]["field"] == "webhooks[0].matchConditions[0].expression"


def test_the_authorizer_asks_rbac_what_the_requesting_user_may_do(
    api: Client, bind: Bind, namespace: str
) -> None:
    bind(
        {
            "matchConstraints": {"resourceRules": [CONFIGMAPS]},
            "validations": [
                {
                    "expression": "authorizer.group('').resource('secrets').namespace(object.metadata.namespace)"
                    ".check('get').allowed()",
                    "message": "only those who may read Secrets write ConfigMaps here",
                }
            ],
        }
    )
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    for user, resources in (("alice", ["configmaps"]), ("bob", ["configmaps", "secrets"])):
        role = {
            "metadata": {"name": user},
            "rules": [{"apiGroups": [""], "resources": resources, "verbs": ["*"]}],
        }
        assert api.post(f"{rbac}/roles", role).status_code == 201
        binding = {
            "metadata": {"name": user},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
            "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
        }
        assert api.post(f"{rbac}/rolebindings", binding).status_code == 201
    configmaps = f"/api/v1/namespaces/{namespace}/configmaps"
    as_alice = api.post(configmaps, config_map("alices"), headers={"Impersonate-User": "alice"})
    assert as_alice.status_code == 422
    assert as_alice.json()["message"].endswith(
        "denied request: only those who may read Secrets write ConfigMaps here"
    )
    assert api.post(configmaps, config_map("bobs"), headers={"Impersonate-User": "bob"}).status_code == 201
    assert api.post(configmaps, config_map("admins")).status_code == 201  # system:masters


def test_expressions_of_a_deleted_policy_are_forgotten(
    module_server: ServerThread, api: Client, bind: Bind
) -> None:
    """The policy store keeps compiled expressions only while a policy has them."""
    name = bind(
        {
            "matchConstraints": {"resourceRules": [CONFIGMAPS]},
            "validations": [{"expression": "'forgettable' != ''"}],
        }
    )
    chain = module_server.server.registry.admission  # type: ignore[union-attr]
    (policies,) = [plugin for plugin in chain.plugins if isinstance(plugin, PolicyAdmission)]
    store = policies.store
    assert api.post("/api/v1/namespaces/default/configmaps", config_map(f"probe-{name}")).status_code == 201
    assert "'forgettable' != ''" in store._compiled
    assert api.delete(f"{ADMISSION}/validatingadmissionpolicies/{name}").status_code == 200
    assert api.post("/api/v1/namespaces/default/configmaps", config_map(f"probe2-{name}")).status_code == 201
    assert "'forgettable' != ''" not in store._compiled


# ------------------------------------------------------------------ cost limits

_QUADRATIC = "object.data.all(k, object.data.all(j, k == j || k != j))"


def _keys(count: int) -> dict[str, str]:
    return {f"k{index}": "v" for index in range(count)}


def test_an_expression_past_the_per_call_limit_fails_as_upstreams_does(
    api: Client, bind: Bind, namespace: str
) -> None:
    """Nested comprehensions over 1,100 keys cost about 1,100² > 1,000,000: the expression is
    cancelled, and the failure policy (Fail) refuses; 100 keys are well within."""
    bind({"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [CONFIGMAPS]}, "validations": [{"expression": _QUADRATIC}]})  # fmt: skip
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    assert api.post(path, config_map("small", **_keys(100))).status_code == 201
    refused = api.post(path, config_map("large", **_keys(1_100)))
    assert refused.status_code == 422
    assert refused.json()["message"].endswith(
        f"denied request: expression '{_QUADRATIC}' resulted in error: operation cancelled: actual cost limit exceeded"
    )


def test_expressions_past_the_runtime_budget_fail_the_evaluation_as_a_whole(
    api: Client, bind: Bind, namespace: str
) -> None:
    """Each of 13 validations reads an object of about 930 nodes (450 keys, in data and in
    managedFields): 930² is within the per-call limit, and 13 of them pass the 10,000,000
    budget of one evaluation; with 350 keys they stay within it."""
    validations = [{"expression": _QUADRATIC} for _ in range(13)]
    bind({"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [CONFIGMAPS]}, "validations": validations})
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    refused = api.post(path, config_map("costly", **_keys(450)))
    assert refused.status_code == 422
    assert refused.json()["message"].endswith(
        "denied request: validation failed due to running out of cost budget, no further validation rules will be run"
    )
    assert api.post(path, config_map("cheaper", **_keys(350))).status_code == 201


def test_a_webhook_match_condition_past_the_budget_follows_its_failure_policy(api: Client, namespace: str) -> None:
    name = f"{namespace}.costly.example.com"
    webhook = {
        "name": name,
        "clientConfig": {"url": "https://127.0.0.1:1/never-called"},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "matchConditions": [{"name": f"c{index}", "expression": _QUADRATIC} for index in range(13)],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "failurePolicy": "Fail",
    }  # fmt: skip
    made = api.post(f"{ADMISSION}/validatingwebhookconfigurations", {"metadata": {"name": name}, "webhooks": [webhook]})
    assert made.status_code == 201, made.text
    try:
        refused = api.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map("costly", **_keys(450)))
        assert refused.status_code == 403
        assert refused.json()["message"] == (
            'configmaps "costly" is forbidden: validation failed due to running out of cost budget, '
            "no further validation rules will be run"
        )
    finally:
        api.delete(f"{ADMISSION}/validatingwebhookconfigurations/{name}")


async def test_a_policy_whose_status_lags_is_type_checked_when_a_server_starts_on_its_data(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A policy stored without the status of its generation (written by a server that stopped
    before its controller got to it) is checked by the next server on that data directory: its
    controller's start looks at every stored policy, not only at the ones written while it runs."""
    from kubeloop.api.gvk import GroupVersionKind
    from kubeloop.apiserver.admission.admissionpolicy.typechecking import TypeCheckingController
    from kubeloop.client.config import load_kubeconfig
    from kubeloop.client.rest import APIClient
    from kubeloop.testing import eventually
    from tests.conftest import start_server

    looked_at: list[str] = []

    async def look_only(controller: TypeCheckingController, name: str) -> bool:
        looked_at.append(name)  # and writes no status, as a server stopped in time would not
        return True

    monkeypatch.setattr(TypeCheckingController, "_check", look_only)
    data = tmp_path / "data"
    policies = GroupVersionKind("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy")
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "lagging.example.com"},
        "spec": {
            "matchConstraints": {"resourceRules": [DEPLOYMENTS]},
            "validations": [{"expression": "object.spec.replicass <= 5"}],
        },
    }
    server = start_server(data)
    try:
        async with APIClient(load_kubeconfig(server.kubeconfig)) as client:
            await client.create(body)
            await eventually(lambda: looked_at == ["lagging.example.com"])
            stored = await client.get(policies, "lagging.example.com")
            assert "status" not in stored or not stored["status"].get("observedGeneration")
    finally:
        server.stop()
    monkeypatch.undo()

    server = start_server(data)
    try:
        async with APIClient(load_kubeconfig(server.kubeconfig)) as client:

            async def checked() -> dict[str, Any]:
                status = (await client.get(policies, "lagging.example.com")).get("status") or {}
                assert status.get("observedGeneration") == 1
                return dict(status)

            status = await eventually(checked, timeout=30)
            [warning] = status["typeChecking"]["expressionWarnings"]
            assert warning["fieldRef"] == "spec.validations[0].expression"
            assert "undefined field 'replicass'" in warning["warning"]
    finally:
        server.stop()


def test_the_write_after_a_binding_is_made_or_deleted_meets_it_or_not() -> None:
    """Whether admission covers a kind is remembered between writes (every write asks twice);
    a binding written, then deleted, changes it for the very next write. On a server of its
    own: no other test's binding may make ConfigMaps covered first."""
    server = start_server()
    try:
        api = Client(server)
        configmaps = "/api/v1/namespaces/default/configmaps"
        assert api.post(configmaps, config_map("before")).status_code == 201  # not covered
        policy = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "no-configmaps.example.com"},
            "spec": {"matchConstraints": {"resourceRules": [CONFIGMAPS]}, "validations": [{"expression": "false"}]},
        }
        assert api.post(f"{ADMISSION}/validatingadmissionpolicies", policy).status_code == 201
        assert api.post(configmaps, config_map("unbound")).status_code == 201  # a policy alone does nothing
        binding = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "no-configmaps-binding"},
            "spec": {"policyName": "no-configmaps.example.com", "validationActions": ["Deny"]},
        }
        assert api.post(f"{ADMISSION}/validatingadmissionpolicybindings", binding).status_code == 201
        denied = api.post(configmaps, config_map("bound"))
        assert denied.status_code == 422, denied.text
        assert "no-configmaps.example.com" in denied.json()["message"]
        deleted = api.delete(f"{ADMISSION}/validatingadmissionpolicybindings/no-configmaps-binding")
        assert deleted.status_code == 200
        assert api.post(configmaps, config_map("after")).status_code == 201
    finally:
        server.stop()
