"""The rbac.authorization.k8s.io API group: Roles, RoleBindings, ClusterRoles and
ClusterRoleBindings."""

from __future__ import annotations

from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.groups.declaration import BuiltinKind
from kubeloop.apiserver.groups.rbac import columns, defaults, validation

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        ResourceType("rbac.authorization.k8s.io", "v1", "roles", "role", "Role", True, name_rule="path"),
        rules=validation.role_rules,
    ),
    BuiltinKind(
        ResourceType(
            "rbac.authorization.k8s.io",
            "v1",
            "rolebindings",
            "rolebinding",
            "RoleBinding",
            True,
            name_rule="path",
        ),
        defaults=defaults.role_binding,
        rules=validation.role_binding_rules,
        update_rules=validation.binding_update_rules,
        columns=columns.rolebinding_columns,
    ),
    BuiltinKind(
        ResourceType(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterroles",
            "clusterrole",
            "ClusterRole",
            False,
            name_rule="path",
        ),
        rules=validation.cluster_role_rules,
    ),
    BuiltinKind(
        ResourceType(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            "clusterrolebinding",
            "ClusterRoleBinding",
            False,
            name_rule="path",
        ),
        defaults=defaults.role_binding,
        rules=validation.cluster_role_binding_rules,
        update_rules=validation.binding_update_rules,
        columns=columns.clusterrolebinding_columns,
    ),
)
