"""The storagemigration.k8s.io API group: StorageVersionMigrations."""

from __future__ import annotations

from kubeloop.apiserver.groups.declaration import BuiltinKind, plain
from kubeloop.apiserver.groups.storagemigration import columns

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        plain(
            "storagemigration.k8s.io",
            "storageversionmigrations",
            "StorageVersionMigration",
            False,
            subresources=("status",),
        ),
        columns=columns.storageversionmigration_columns,
    ),
)
