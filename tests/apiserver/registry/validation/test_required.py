"""Required fields, as upstream's types require them (an empty list is missing unless upstream
accepts it)."""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop.apiserver.registry import validation
from kubeloop.errors import StatusCause
from tests.apiserver.registry.validation.objects import CONFIGMAP, DEPLOYMENT, LEASE, POD, SERVICE, strategy


@pytest.mark.parametrize(
    ("schema", "obj", "fields"),
    [
        (POD, {"spec": {"containers": [{"image": "x"}]}}, ["spec.containers[0].name"]),
        (POD, {"spec": {"containers": [{"name": "", "image": "x"}]}}, ["spec.containers[0].name"]),
        (POD, {"spec": {}}, ["spec.containers"]),
        (POD, {"spec": {"containers": []}}, ["spec.containers"]),
        (
            POD,
            {"spec": {"containers": [{"name": "a", "env": [{"value": "1"}], "ports": [{"name": "p"}]}]}},
            ["spec.containers[0].env[0].name", "spec.containers[0].ports[0].containerPort"],
        ),
        (
            DEPLOYMENT,
            {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}},
            ["spec.template.spec.containers[0].name"],
        ),
        (SERVICE, {"spec": {"ports": [{"name": "http"}]}}, ["spec.ports[0].port"]),
        (POD, {"spec": {"containers": [{"name": "a"}]}, "status": {"conditions": [{}]}}, []),
        (CONFIGMAP, {"data": {"a": "b"}}, []),
        (LEASE, {"spec": {}}, []),
    ],
)
def test_validate_required(schema: Any, obj: dict[str, Any], fields: list[str]) -> None:
    causes = validation.validate_required(obj, schema)
    assert sorted(c.field for c in causes) == sorted(fields)
    assert all(c == StatusCause("FieldValueRequired", "Required value", c.field) for c in causes)


@pytest.mark.parametrize(
    ("group", "kind", "obj", "required"),
    [
        # A kubelet registers its CSINode before any driver; a LimitRange may list no limits.
        ("storage.k8s.io", "CSINode", {"metadata": {"name": "n"}, "spec": {"drivers": []}}, []),
        ("storage.k8s.io", "CSINode", {"metadata": {"name": "n"}, "spec": {}}, []),
        ("", "LimitRange", {"metadata": {"name": "l", "namespace": "a"}, "spec": {"limits": []}}, []),
        # Lists upstream asks an item of stay required.
        (
            "",
            "Pod",
            {"metadata": {"name": "p", "namespace": "a"}, "spec": {"containers": []}},
            ["spec.containers"],
        ),
        (
            "rbac.authorization.k8s.io",
            "Role",
            {
                "metadata": {"name": "r", "namespace": "a"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": []}],
            },
            ["rules[0].verbs"],
        ),
    ],
)
def test_empty_required_lists_are_missing_unless_upstream_accepts_them(
    group: str, kind: str, obj: dict[str, Any], required: list[str]
) -> None:
    causes = strategy(group, kind).validate(obj)
    assert [c.field for c in causes if c.type == validation.causes.REQUIRED] == required
