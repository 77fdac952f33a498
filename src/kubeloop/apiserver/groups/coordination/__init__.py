"""The coordination.k8s.io API group: Leases."""

from __future__ import annotations

from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.groups.coordination import columns, validation
from kubeloop.apiserver.groups.declaration import BuiltinKind

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        ResourceType("coordination.k8s.io", "v1", "leases", "lease", "Lease", True),
        rules=validation.lease_rules,
        columns=columns.lease_columns,
    ),
)
