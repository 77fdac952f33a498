"""The policy API group: PodDisruptionBudgets."""

from __future__ import annotations

from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.groups.declaration import BuiltinKind
from kubeloop.apiserver.groups.policy import columns, validation

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        ResourceType(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "poddisruptionbudget",
            "PodDisruptionBudget",
            True,
            short_names=("pdb",),
            subresources=("status",),
            tracks_generation=True,
        ),
        rules=validation.pod_disruption_budget_rules,
        columns=columns.pdb_columns,
    ),
)
