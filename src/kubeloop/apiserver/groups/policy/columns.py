"""policy/v1 kinds' columns: PodDisruptionBudgets."""

from __future__ import annotations

from kubeloop.apiserver.printing.cells import Column, age_column, api_doc, field_column, name_column, value_at


def pdb_columns() -> list[Column]:
    spec = "io.k8s.api.policy.v1.PodDisruptionBudgetSpec"
    return [
        name_column(),
        Column(
            "Min Available",
            "string",
            lambda o, n: str(value_at(o, "spec.minAvailable", "N/A")),
            api_doc(spec, "minAvailable"),
        ),
        Column(
            "Max Unavailable",
            "string",
            lambda o, n: str(value_at(o, "spec.maxUnavailable", "N/A")),
            api_doc(spec, "maxUnavailable"),
        ),
        field_column(
            "Allowed Disruptions",
            "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
            "status.disruptionsAllowed",
            "integer",
        ),
        age_column(),
    ]
