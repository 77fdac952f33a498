"""rbac: the rules of Roles and ClusterRoles, aggregation and bindings."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.apiserver.registry.validation.objects import strategy, validate_object

RBAC = "rbac.authorization.k8s.io"

_VERBS_REQUIRED = "Required value: verbs must contain at least one value"


@pytest.mark.parametrize(
    ("kind", "rules", "expected"),
    [
        ("Role", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}], []),
        ("ClusterRole", [{"nonResourceURLs": ["/healthz", "/api/*"], "verbs": ["get"]}], []),
        (
            "Role",
            [{"resources": ["pods"]}],
            [
                ("rules[0].verbs", _VERBS_REQUIRED),
                ("rules[0].apiGroups", "Required value: resource rules must supply at least one api group"),
            ],
        ),
        (
            "Role",
            [{"apiGroups": ["apps"], "verbs": ["*"]}],
            [("rules[0].resources", "Required value: resource rules must supply at least one resource")],
        ),
        (
            "Role",
            [{"nonResourceURLs": ["/x"], "verbs": ["get"]}],
            [
                (
                    "rules[0].nonResourceURLs",
                    'Invalid value: ["/x"]: namespaced rules cannot apply to non-resource URLs',
                )
            ],
        ),
        (
            "ClusterRole",
            [{"nonResourceURLs": ["/x"], "resources": ["pods"], "verbs": ["get"]}],
            [
                (
                    "rules[0].nonResourceURLs",
                    'Invalid value: ["/x"]: rules cannot apply to both regular resources and non-resource URLs',
                )
            ],
        ),
    ],
)
def test_policy_rules(kind: str, rules: list[dict[str, Any]], expected: list[tuple[str, str]]) -> None:
    meta = {"name": "r", "namespace": "a"} if kind == "Role" else {"name": "r"}
    causes = validate_object(RBAC, kind, {"metadata": meta, "rules": rules})
    assert [(c.field, c.message) for c in causes] == expected


def test_aggregation_rule_needs_a_valid_selector() -> None:
    role = {"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": []}}
    assert [(c.field, c.message) for c in validate_object(RBAC, "ClusterRole", role)] == [
        (
            "aggregationRule.clusterRoleSelectors",
            "Required value: at least one clusterRoleSelector required if aggregationRule is non-nil",
        )
    ]
    role["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {"bad key!": "x"}}]}
    assert [c.field for c in validate_object(RBAC, "ClusterRole", role)] == [
        "aggregationRule.clusterRoleSelectors[0].matchLabels"
    ]


def _binding(kind: str, ref: dict[str, Any], subjects: list[dict[str, Any]]) -> dict[str, Any]:
    meta = {"name": "b", "namespace": "a"} if kind == "RoleBinding" else {"name": "b"}
    binding = {"metadata": meta, "roleRef": ref, "subjects": subjects}
    strategy(RBAC, kind).default(binding)
    return binding


def test_bindings_default_the_rbac_group_for_the_role_users_and_groups() -> None:
    binding = _binding(
        "RoleBinding",
        {"kind": "Role", "name": "r"},
        [
            {"kind": "User", "name": "u"},
            {"kind": "Group", "name": "g"},
            {"kind": "ServiceAccount", "name": "s"},
        ],
    )
    assert binding["roleRef"]["apiGroup"] == RBAC
    assert [s.get("apiGroup") for s in binding["subjects"]] == [RBAC, RBAC, None]
    assert validate_object(RBAC, "RoleBinding", binding) == []


@pytest.mark.parametrize(
    ("kind", "ref", "subjects", "expected"),
    [
        (
            "ClusterRoleBinding",
            {"kind": "Role", "name": "r"},
            [{"kind": "ServiceAccount", "name": "s"}],
            [
                ("roleRef.kind", 'Unsupported value: "Role": supported values: "ClusterRole"'),
                ("subjects[0].namespace", "Required value"),
            ],
        ),
        (
            "RoleBinding",
            {"apiGroup": "example.com", "kind": "Thing", "name": "a/b"},
            [],
            [
                (
                    "roleRef.apiGroup",
                    'Unsupported value: "example.com": supported values: "rbac.authorization.k8s.io"',
                ),
                ("roleRef.kind", 'Unsupported value: "Thing": supported values: "Role", "ClusterRole"'),
                ("roleRef.name", "Invalid value: \"a/b\": may not contain '/'"),
            ],
        ),
        (
            "RoleBinding",
            {"kind": "ClusterRole", "name": "view"},
            [
                {"kind": "Robot", "name": "r2"},
                {"kind": "ServiceAccount", "name": "Bad_Name", "apiGroup": "x"},
                {"kind": "User", "name": "", "apiGroup": "x"},
            ],
            [
                (
                    "subjects[0].kind",
                    'Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"',
                ),
                (
                    "subjects[1].name",
                    'Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case '
                    "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character "
                    "(e.g. 'example.com', regex used for validation is "
                    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                ),
                ("subjects[1].apiGroup", 'Unsupported value: "x": supported values: ""'),
                ("subjects[2].name", "Required value"),
                (
                    "subjects[2].apiGroup",
                    'Unsupported value: "x": supported values: "rbac.authorization.k8s.io"',
                ),
            ],
        ),
    ],
)
def test_binding_rules(
    kind: str, ref: dict[str, Any], subjects: list[dict[str, Any]], expected: list[tuple[str, str]]
) -> None:
    causes = validate_object(RBAC, kind, _binding(kind, ref, subjects))
    assert [(c.field, c.message) for c in causes] == expected


def test_a_bindings_role_ref_cannot_change() -> None:
    old = _binding("RoleBinding", {"kind": "Role", "name": "r"}, [])
    new = copy.deepcopy(old)
    assert strategy(RBAC, "RoleBinding").validate_write(new, old) == []
    new["roleRef"]["name"] = "other"
    assert [(c.field, c.message) for c in strategy(RBAC, "RoleBinding").validate_write(new, old)] == [
        (
            "roleRef",
            'Invalid value: {"APIGroup":"rbac.authorization.k8s.io","Kind":"Role","Name":"other"}: '
            "cannot change roleRef",
        )
    ]
