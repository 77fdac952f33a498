"""scheduling.k8s.io kinds' columns: PriorityClasses."""

from __future__ import annotations

from kubeloop.apiserver.printing.cells import Column, age_column, api_doc, field_column, name_column, value_at


def priorityclass_columns() -> list[Column]:
    kind = "io.k8s.api.scheduling.v1.PriorityClass"
    return [
        name_column(),
        field_column("Value", kind, "value", "integer"),
        Column(
            "Global-Default",
            "boolean",
            lambda o, n: bool(value_at(o, "globalDefault", False)),
            api_doc(kind, "globalDefault"),
        ),
        age_column(),
        field_column("PreemptionPolicy", kind, "preemptionPolicy"),
    ]
