"""RBAC's escalation check: a user writes a Role only with the permissions it grants, and a
binding only to a role whose permissions they hold — unless they may ``escalate`` or ``bind``
it — with upstream's message, for kubectl 1.27 and 1.33 as a user with a certificate of its own."""

# ruff: noqa: F811

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.apiserver.auth import escalation
from kubeloop.apiserver.auth.escalation import compact, compact_string, uncovered
from kubeloop.apiserver.auth.rbacauthorizer import Attributes, rule_allows
from tests.apiserver.auth.test_rbac import admin, alice, binary  # noqa: F401
from tests.apiserver.test_kubectl import Kubectl
from tests.conftest import Client

# ---------------------------------------------------------------------- Covers

verbs = st.sampled_from(["get", "list", "delete", "*"])
groups = st.sampled_from(["", "apps", "*"])
resources = st.sampled_from(["pods", "pods/log", "deployments", "deployments/scale", "*", "*/scale"])
names = st.sampled_from(["a", "b"])
urls = st.sampled_from(["/healthz", "/healthz/ready", "/healthz/*", "/*", "/metrics"])


def rules(with_names: bool) -> st.SearchStrategy[dict[str, Any]]:
    resource_rule = st.fixed_dictionaries(
        {
            "verbs": st.lists(verbs, min_size=1, max_size=2),
            "apiGroups": st.lists(groups, min_size=1, max_size=2),
            "resources": st.lists(resources, min_size=1, max_size=2),
        },
        optional={"resourceNames": st.lists(names, min_size=1, max_size=2)} if with_names else {},
    )
    url_rule = st.fixed_dictionaries(
        {
            "verbs": st.lists(verbs, min_size=1, max_size=2),
            "nonResourceURLs": st.lists(urls, min_size=1, max_size=2),
        }
    )
    return resource_rule | url_rule


def _pieces_allowed(held: list[dict[str, Any]], granted: dict[str, Any]) -> bool:
    """Whether the authorizer allows each request the granted rule names, one at a time."""
    requests: list[Attributes] = []
    for verb in granted["verbs"]:
        for url in granted.get("nonResourceURLs", ()):
            requests.append(Attributes(verb=verb, path=url))
        for group in granted.get("apiGroups", ()):
            for resource in granted.get("resources", ()):
                plural, _, sub = resource.partition("/")
                for name in granted.get("resourceNames") or [""]:
                    requests.append(
                        Attributes(verb=verb, group=group, resource=plural, subresource=sub, name=name)
                    )
    return all(any(rule_allows(rule, request) for rule in held) for request in requests)


@settings(max_examples=500, deadline=None)
@given(st.lists(rules(with_names=True), max_size=3), rules(with_names=True))
def test_held_rules_cover_a_grant_exactly_when_they_allow_each_of_its_requests(
    held: list[dict[str, Any]], granted: dict[str, Any]
) -> None:
    # Covers is the authorizer applied to the grant's pieces: wildcards in a grant are covered
    # only by the same wildcards, resource names only narrow, "/x*" covers the paths it prefixes.
    assert (not uncovered(held, [granted])) == _pieces_allowed(held, granted)


def test_missing_permissions_are_compacted_and_worded_as_upstream() -> None:
    held = [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]
    granted = [
        {"verbs": ["get", "list", "delete"], "apiGroups": ["", "apps"], "resources": ["pods"]},
        {"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"]},
        {"verbs": ["get"], "nonResourceURLs": ["/metrics"]},
    ]
    assert sorted(compact_string(rule) for rule in compact(uncovered(held, granted))) == [
        '{APIGroups:[""], Resources:["pods"], Verbs:["list" "delete"]}',
        '{APIGroups:[""], Resources:["secrets"], ResourceNames:["a"], Verbs:["get"]}',
        '{APIGroups:["apps"], Resources:["pods"], Verbs:["get" "list" "delete"]}',
        '{NonResourceURLs:["/metrics"], Verbs:["get"]}',
    ]


# ---------------------------------------------------------------------- the server


def _not_held(user: str, *rules: str) -> str:
    return (
        f'user "{user}" (groups=["devs" "system:authenticated"]) is attempting to grant RBAC permissions not '
        "currently held:\n" + "\n".join(rules)
    )


def test_a_user_grants_only_what_they_hold(
    admin: Kubectl, alice: Kubectl, api: Client, namespace: str
) -> None:
    ns = ["-n", namespace]
    admin("create", "role", "pod-reader", "--verb=get,list", "--resource=pods", *ns)
    admin(
        "create",
        "role",
        "rbac-writer",
        "--verb=create,update,patch,get",
        "--resource=roles,rolebindings",
        *ns,
    )
    admin("create", "rolebinding", "alice-reads", "--role=pod-reader", "--user=alice", *ns)
    admin("create", "rolebinding", "alice-writes", "--role=rbac-writer", "--user=alice", *ns)

    # What she holds she may grant, as a Role and as a binding of it.
    alice("create", "role", "readers", "--verb=get", "--resource=pods", *ns)
    alice("create", "rolebinding", "bob-reads", "--role=readers", "--user=bob", *ns)

    # Deleting pods she may not: neither in a Role of her own nor by binding one.
    refused = alice("create", "role", "deleters", "--verb=delete,get", "--resource=pods", *ns, check=False)
    assert refused.returncode == 1
    expected = 'roles.rbac.authorization.k8s.io "deleters" is forbidden: ' + _not_held(
        "alice", '{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}'
    )
    assert expected in refused.stderr
    assert (
        api.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/deleters").status_code
        == 404
    )
    admin("create", "role", "deleters", "--verb=delete", "--resource=pods", *ns)
    bound = alice("create", "rolebinding", "bob-deletes", "--role=deleters", "--user=bob", *ns, check=False)
    assert (
        'rolebindings.rbac.authorization.k8s.io "bob-deletes" is forbidden: '
        + _not_held("alice", '{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}')
        in bound.stderr
    )
    # A missing role is a 404 for whoever cannot bind it.
    missing = alice("create", "rolebinding", "ghost", "--role=ghost", "--user=bob", *ns, check=False)
    assert 'roles.rbac.authorization.k8s.io "ghost" not found' in missing.stderr

    # An edit of her Role that adds what she lacks is refused; the stored Role is unchanged.
    patch = json.dumps({"rules": [{"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["get"]}]})
    edited = alice("patch", "role", "readers", "--type=merge", "-p", patch, *ns, check=False)
    assert (
        'roles.rbac.authorization.k8s.io "readers" is forbidden: '
        + _not_held("alice", '{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}')
        in edited.stderr
    )
    readers = api.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/readers").json()
    assert readers["rules"] == [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]

    # Touching only what the garbage collector touches is no grant at all.
    admin("label", "role", "deleters", "owned=yes", *ns)
    finalizer = json.dumps({"metadata": {"finalizers": ["example.com/keep"]}})
    alice("patch", "role", "deleters", "--type=merge", "-p", finalizer, *ns)
    alice(
        "patch",
        "role",
        "deleters",
        "--type=json",
        "-p",
        '[{"op": "remove", "path": "/metadata/finalizers"}]',
        *ns,
    )

    # With `bind` on the role she may bind it; with `escalate` on roles she may write any Role.
    admin("create", "role", "binder", "--verb=bind", "--resource=roles", "--resource-name=deleters", *ns)
    admin("create", "rolebinding", "alice-binds", "--role=binder", "--user=alice", *ns)
    alice("create", "rolebinding", "bob-deletes", "--role=deleters", "--user=bob", *ns)
    admin("create", "role", "escalator", "--verb=escalate", "--resource=roles", *ns)
    admin("create", "rolebinding", "alice-escalates", "--role=escalator", "--user=alice", *ns)
    alice("create", "role", "deleters-too", "--verb=delete,get", "--resource=pods", *ns)


def test_aggregating_and_cluster_roles_need_cluster_wide_permissions(
    admin: Kubectl, alice: Kubectl, namespace: str
) -> None:
    name = f"{namespace}-writer"
    admin(
        "create",
        "clusterrole",
        name,
        "--verb=create,get,update",
        "--resource=clusterroles,clusterrolebindings",
    )
    admin("create", "clusterrolebinding", name, f"--clusterrole={name}", "--user=alice")
    try:
        # Her namespaced pod reading does not count at the cluster scope.
        admin("create", "role", "pod-reader", "--verb=get", "--resource=pods", "-n", namespace)
        admin("create", "rolebinding", "alice-reads", "--role=pod-reader", "--user=alice", "-n", namespace)
        refused = alice(
            "create", "clusterrole", f"{namespace}-readers", "--verb=get", "--resource=pods", check=False
        )
        assert (
            f'clusterroles.rbac.authorization.k8s.io "{namespace}-readers" is forbidden: '
            + _not_held("alice", '{APIGroups:[""], Resources:["pods"], Verbs:["get"]}')
            in refused.stderr
        )
        aggregating = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"{namespace}-aggregate"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"team": namespace}}]},
        }
        denied = alice("create", "-f", "-", stdin=json.dumps(aggregating), check=False)
        assert (
            f'clusterroles.rbac.authorization.k8s.io "{namespace}-aggregate" is forbidden: '
            "must have cluster-admin privileges to use the aggregationRule" in denied.stderr
        )
        # Binding the view ClusterRole cluster-wide grants far more than she holds.
        binding = alice(
            "create",
            "clusterrolebinding",
            f"{namespace}-view",
            "--clusterrole=view",
            "--user=bob",
            check=False,
        )
        assert (
            f'clusterrolebindings.rbac.authorization.k8s.io "{namespace}-view" is forbidden: user "alice"'
            in binding.stderr
        )
        assert "is attempting to grant RBAC permissions not currently held:\n{APIGroups:[" in binding.stderr

    finally:  # the grant is cluster-wide: later tests of the worker must not inherit it
        admin("delete", "clusterrolebinding", name, "--ignore-not-found", check=False)
        admin("delete", "clusterrole", name, "--ignore-not-found", check=False)


def _huge_rule(size: int) -> dict[str, Any]:
    return {
        "verbs": [f"verb{i}" for i in range(size)],
        "apiGroups": [f"group{i}.example.com" for i in range(size)],
        "resources": [f"things{i}" for i in range(size)],
        "resourceNames": [f"name{i}" for i in range(size)],
    }


def test_a_grant_of_a_hundred_million_pieces_is_checked_whole() -> None:
    # Broken down, this rule is 100^4 pieces: past the budget it is checked as one rule.
    granted = [_huge_rule(100)]
    assert not uncovered([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}], granted)
    [missing] = uncovered([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}], granted)
    assert len(missing.verbs) == len(missing.resource_names) == 100


def test_a_huge_role_from_a_user_is_refused_quickly(
    api: Client, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """50 rules of 100^4 pieces each: the check stays within its budget of pieces (counted, not
    timed: a check piece by piece would compare 5 billion)."""
    checked = 0
    limit = 20 * escalation.MAX_PIECES
    covers = escalation._covers

    def counted(held: Any, rule: Any) -> bool:
        nonlocal checked
        checked += 1
        if checked > limit:
            raise RuntimeError(f"more than {limit} comparisons for one write")
        return covers(held, rule)

    monkeypatch.setattr(escalation, "_covers", counted)
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    writer = {"verbs": ["create"], "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"]}
    assert api.post(f"{rbac}/roles", {"metadata": {"name": "writer"}, "rules": [writer]}).status_code == 201
    binding = {
        "metadata": {"name": "mallory-writes"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "writer"},
        "subjects": [{"kind": "User", "name": "mallory"}],
    }
    assert api.post(f"{rbac}/rolebindings", binding).status_code == 201
    answer = api.post(
        f"{rbac}/roles",
        {"metadata": {"name": "everything"}, "rules": [_huge_rule(100)] * 50},
        headers={"Impersonate-User": "mallory"},
    )
    assert answer.status_code == 403, answer.text[:300]
    assert 0 < checked <= limit
    assert (
        'user "mallory" (groups=["system:authenticated"]) is attempting to grant' in answer.json()["message"]
    )
    assert api.get(f"{rbac}/roles/everything").status_code == 404
