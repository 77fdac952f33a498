"""The flowcontrol.apiserver.k8s.io API group: FlowSchemas and PriorityLevelConfigurations."""

from __future__ import annotations

from kubeloop.apiserver.groups.declaration import BuiltinKind, plain
from kubeloop.apiserver.groups.flowcontrol import columns, defaults

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        plain("flowcontrol.apiserver.k8s.io", "flowschemas", "FlowSchema", False, subresources=("status",)),
        defaults=defaults.flow_schema,
        columns=columns.flowschema_columns,
    ),
    BuiltinKind(
        plain(
            "flowcontrol.apiserver.k8s.io",
            "prioritylevelconfigurations",
            "PriorityLevelConfiguration",
            False,
            subresources=("status",),
        ),
        defaults=defaults.priority_level_configuration,
        columns=columns.prioritylevel_columns,
    ),
)
