"""The node.k8s.io API group: RuntimeClasses."""

from __future__ import annotations

from kubeloop.apiserver.groups.declaration import BuiltinKind, plain
from kubeloop.apiserver.groups.node import columns

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        plain("node.k8s.io", "runtimeclasses", "RuntimeClass", False),
        columns=columns.runtimeclass_columns,
    ),
)
