"""The apps API group: Deployments, ReplicaSets, StatefulSets, DaemonSets and
ControllerRevisions."""

from __future__ import annotations

from types import MappingProxyType

from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.groups.apps import columns, defaults, validation
from kubeloop.apiserver.groups.declaration import BuiltinKind, plain
from kubeloop.apiserver.groups.defaulting import empty_status

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        ResourceType(
            "apps",
            "v1",
            "deployments",
            "deployment",
            "Deployment",
            True,
            short_names=("deploy",),
            categories=("all",),
            subresources=("status", "scale"),
            annotations_bump_generation=True,
            tracks_generation=True,
        ),
        defaults=defaults.deployment,
        initial_status=empty_status,
        rules=validation.deployment_rules,
        update_rules=validation.selector_update_rules,
        columns=columns.deployment_columns,
    ),
    BuiltinKind(
        ResourceType(
            "apps",
            "v1",
            "replicasets",
            "replicaset",
            "ReplicaSet",
            True,
            short_names=("rs",),
            categories=("all",),
            subresources=("status", "scale"),
            field_selectors=MappingProxyType({"status.replicas": "status.replicas"}),
            tracks_generation=True,
        ),
        defaults=defaults.replica_set,
        initial_status=empty_status,
        rules=validation.replica_set_rules,
        update_rules=validation.selector_update_rules,
        columns=columns.replicaset_columns,
    ),
    BuiltinKind(
        ResourceType(
            "apps",
            "v1",
            "statefulsets",
            "statefulset",
            "StatefulSet",
            True,
            short_names=("sts",),
            categories=("all",),
            subresources=("status", "scale"),
            tracks_generation=True,
            name_rule="label",
        ),
        defaults=defaults.stateful_set,
        initial_status=empty_status,
        rules=validation.stateful_set_rules,
        update_rules=validation.stateful_set_update_rules,
        columns=columns.statefulset_columns,
    ),
    BuiltinKind(
        ResourceType(
            "apps",
            "v1",
            "daemonsets",
            "daemonset",
            "DaemonSet",
            True,
            short_names=("ds",),
            categories=("all",),
            subresources=("status",),
            tracks_generation=True,
        ),
        defaults=defaults.daemon_set,
        initial_status=empty_status,
        rules=validation.daemon_set_rules,
        update_rules=validation.selector_update_rules,
        columns=columns.daemonset_columns,
    ),
    BuiltinKind(
        plain("apps", "controllerrevisions", "ControllerRevision", True),
        update_rules=validation.controller_revision_update_rules,
        columns=columns.controllerrevision_columns,
    ),
)
