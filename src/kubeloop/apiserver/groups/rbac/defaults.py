"""The rbac.authorization.k8s.io group's defaults: a binding's subjects' API groups."""

from __future__ import annotations

from kubeloop.api.object import Obj

__all__ = ["role_binding"]


_RBAC_GROUP = "rbac.authorization.k8s.io"


def role_binding(obj: Obj) -> None:
    """SetDefaults_RoleBinding / _ClusterRoleBinding / _Subject: the roleRef's group, and each
    User or Group subject's, is rbac.authorization.k8s.io when left out."""
    ref = obj.get("roleRef")
    if isinstance(ref, dict) and not ref.get("apiGroup"):
        ref["apiGroup"] = _RBAC_GROUP
    for subject in obj.get("subjects") or ():
        if (
            isinstance(subject, dict)
            and not subject.get("apiGroup")
            and subject.get("kind") in ("User", "Group")
        ):
            subject["apiGroup"] = _RBAC_GROUP
