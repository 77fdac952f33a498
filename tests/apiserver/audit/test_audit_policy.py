"""The audit policy as kube-apiserver reads and applies ``--audit-policy-file``: the first rule
that matches decides the level; each list a rule gives must hold the request's part; a policy
file is validated with upstream's words."""

from __future__ import annotations

import pathlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubeloop.apiserver.audit.policy import (
    AuditPolicyError,
    RequestAttributes,
    load_policy,
    policy_of,
)
from kubeloop.apiserver.userinfo import UserInfo

ALICE = UserInfo("alice", ("dev", "system:authenticated"))
PROXY = UserInfo("system:kube-proxy", ("system:authenticated",))

# Upstream's documented example policy (kubernetes.io, "Auditing"), in part.
EXAMPLE = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "RequestResponse", "resources": [{"group": "", "resources": ["pods"]}]},
        {"level": "Metadata", "resources": [{"group": "", "resources": ["pods/log", "pods/status"]}]},
        {"level": "None", "resources": [{"group": "", "resources": ["configmaps"], "resourceNames": ["controller-leader"]}]},
        {"level": "None", "users": ["system:kube-proxy"], "verbs": ["watch"], "resources": [{"group": "", "resources": ["endpoints", "services"]}]},
        {"level": "None", "userGroups": ["system:authenticated"], "nonResourceURLs": ["/api*", "/version"]},
        {"level": "Request", "resources": [{"group": "", "resources": ["configmaps"]}], "namespaces": ["kube-system"]},
        {"level": "Metadata", "resources": [{"group": "", "resources": ["secrets", "configmaps"]}]},
        {"level": "Request", "resources": [{"group": ""}, {"group": "extensions"}]},
        {"level": "Metadata", "omitStages": ["ResponseStarted"]},
    ],
}  # fmt: skip


def resource(
    verb: str, plural: str, *, group: str = "", namespace: str = "", name: str = "", sub: str = "", user: UserInfo = ALICE
) -> RequestAttributes:
    return RequestAttributes(
        user=user, verb=verb, path="/", resource_request=True, api_group=group, namespace=namespace,
        resource=plural, subresource=sub, name=name,
    )  # fmt: skip


def path(url: str, user: UserInfo = ALICE) -> RequestAttributes:
    return RequestAttributes(user=user, verb="get", path=url, resource_request=False)


@pytest.mark.parametrize(
    ("attributes", "level"),
    [
        (resource("get", "pods", namespace="a", name="p"), "RequestResponse"),
        (resource("get", "pods", namespace="a", name="p", sub="log"), "Metadata"),
        (resource("update", "pods", namespace="a", name="p", sub="status"), "Metadata"),
        (resource("update", "configmaps", namespace="kube-system", name="controller-leader"), "None"),
        (resource("update", "configmaps", namespace="kube-system", name="other"), "Request"),
        (resource("get", "configmaps", namespace="default", name="other"), "Metadata"),
        (resource("watch", "endpoints", namespace="a", user=PROXY), "None"),
        (resource("list", "endpoints", namespace="a", user=PROXY), "Request"),
        (resource("watch", "endpoints", namespace="a"), "Request"),
        (path("/apis"), "None"),
        (path("/api/v1"), "None"),
        (path("/version"), "None"),
        (path("/openapi/v2"), "Metadata"),
        (path("/version", user=UserInfo("anonymous")), "Metadata"),
        (resource("create", "deployments", group="apps", namespace="a"), "Metadata"),
    ],
)
def test_the_first_matching_rule_decides(attributes: RequestAttributes, level: str) -> None:
    assert policy_of(EXAMPLE).decide(attributes).level == level


def test_omitted_stages_of_the_rule_and_the_policy_add_up() -> None:
    decision = policy_of(EXAMPLE).decide(resource("create", "deployments", group="apps"))
    assert decision.omit_stages == {"RequestReceived", "ResponseStarted"}
    assert policy_of(EXAMPLE).decide(resource("get", "pods")).omit_stages == {"RequestReceived"}


@pytest.mark.parametrize(
    ("pattern", "sub", "matches"),
    [("*", "", True), ("*", "status", True), ("*/status", "status", True), ("*/status", "", False),
     ("pods/*", "log", True), ("pods/*", "", True), ("pods", "status", False), ("pods/status", "status", True)],
)  # fmt: skip
def test_resource_patterns(pattern: str, sub: str, matches: bool) -> None:
    policy = policy_of({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Request", "resources": [{"resources": [pattern]}]}]})  # fmt: skip
    assert (policy.decide(resource("get", "pods", name="p", sub=sub)).level == "Request") is matches


def test_no_matching_rule_is_not_recorded_and_omit_managed_fields_is_inherited() -> None:
    policy = policy_of(
        {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitManagedFields": True, "rules": [
            {"level": "Request", "verbs": ["create"]},
            {"level": "Request", "verbs": ["update"], "omitManagedFields": False},
        ]}
    )  # fmt: skip
    assert policy.decide(resource("get", "pods")).level == "None"
    assert policy.decide(resource("create", "pods")).omit_managed_fields is True
    assert policy.decide(resource("update", "pods")).omit_managed_fields is False


names = st.text(alphabet="abcxyz-:", min_size=1, max_size=6)


@given(users=st.lists(names, max_size=3), groups=st.lists(names, max_size=3), name=names, own=st.lists(names, max_size=3))
def test_user_and_group_lists_hold_or_the_rule_passes(users: list[str], groups: list[str], name: str, own: list[str]) -> None:  # fmt: skip
    policy = policy_of({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Request", "users": users, "userGroups": groups}]})  # fmt: skip
    level = policy.decide(resource("get", "pods", user=UserInfo(name, tuple(own)))).level
    expected = (not users or name in users) and (not groups or bool(set(groups) & set(own)))
    assert (level == "Request") is expected


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": []}, "loaded illegal policy with 0 rules"),
        ({"apiVersion": "audit.k8s.io/v1beta1", "kind": "Policy", "rules": [{"level": "None"}]}, "unknown group version field audit.k8s.io/v1beta1"),
        ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Everything"}]},
         'rules[0].level: Unsupported value: "Everything": supported values: "None", "Metadata", "Request", "RequestResponse"'),
        ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "None", "omitStages": ["Later"]}]},
         'rules[0].omitStages[0]: Unsupported value: "Later"'),
        ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "None", "nonResourceURLs": ["healthz"]}]},
         "non-resource URL rules must begin with a '/' character"),
        ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "None", "nonResourceURLs": ["/a*b"]}]},
         "non-resource URL wildcards '*' must be the final character of the rule"),
        ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "None", "nonResourceURLs": ["/a"], "namespaces": ["x"]}]},
         "rules cannot apply to both regular resources and non-resource URLs"),
        ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "None", "resources": [{"resourceNames": ["x"]}]}]},
         "using resourceNames requires at least one resource"),
    ],
)  # fmt: skip
def test_invalid_policies_are_refused_with_upstreams_words(raw: dict[str, object], message: str) -> None:
    with pytest.raises(AuditPolicyError, match=None) as refused:
        policy_of(raw)
    assert message in str(refused.value)


def test_a_policy_file_is_read_as_yaml_and_its_errors_name_it(tmp_path: pathlib.Path) -> None:
    good = tmp_path / "policy.yaml"
    good.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n")
    assert load_policy(good).decide(path("/version")).level == "Metadata"
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n")
    with pytest.raises(AuditPolicyError) as refused:
        load_policy(bad)
    assert str(refused.value).startswith(f"{bad}: invalid audit policy: rules[0].level")
    with pytest.raises(AuditPolicyError, match="failed to read audit policy file"):
        load_policy(tmp_path / "missing.yaml")
