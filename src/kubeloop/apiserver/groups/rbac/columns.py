"""rbac.authorization.k8s.io kinds' columns: the bindings' role and subjects."""

from __future__ import annotations

from collections.abc import Mapping

from kubeloop.apiserver.printing.cells import (
    Column,
    Obj,
    age_column,
    api_doc,
    list_at,
    name_column,
    text_at,
)


def _subjects(obj: Obj, kind: str) -> str:
    """One column of ``rbac.SubjectsStrings``."""
    names = []
    for subject in list_at(obj, "subjects"):
        if isinstance(subject, Mapping) and subject.get("kind") == kind:
            if kind == "ServiceAccount":
                names.append(f"{subject.get('namespace', '')}/{subject.get('name', '')}")
            else:
                names.append(str(subject.get("name", "")))
    return ", ".join(names)


def binding_columns(kind: str) -> list[Column]:
    what = kind[0].lower() + kind[1:]
    return [
        name_column(),
        Column(
            "Role",
            "string",
            lambda o, n: f"{text_at(o, 'roleRef.kind')}/{text_at(o, 'roleRef.name')}",
            api_doc(f"io.k8s.api.rbac.v1.{kind}", "roleRef"),
        ),
        age_column(),
        Column("Users", "string", lambda o, n: _subjects(o, "User"), f"Users in the {what}", 1),
        Column("Groups", "string", lambda o, n: _subjects(o, "Group"), f"Groups in the {what}", 1),
        Column(
            "ServiceAccounts",
            "string",
            lambda o, n: _subjects(o, "ServiceAccount"),
            f"ServiceAccounts in the {what}",
            1,
        ),
    ]


def rolebinding_columns() -> list[Column]:
    return binding_columns("RoleBinding")


def clusterrolebinding_columns() -> list[Column]:
    return binding_columns("ClusterRoleBinding")
