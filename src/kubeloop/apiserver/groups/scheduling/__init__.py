"""The scheduling.k8s.io API group: PriorityClasses."""

from __future__ import annotations

from kubeloop.apiserver.groups.declaration import BuiltinKind, plain
from kubeloop.apiserver.groups.scheduling import columns, defaults

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        plain("scheduling.k8s.io", "priorityclasses", "PriorityClass", False, short_names=("pc",)),
        defaults=defaults.priority_class,
        columns=columns.priorityclass_columns,
    ),
)
