"""coordination.k8s.io kinds' columns: Leases."""

from __future__ import annotations

from kubeloop.apiserver.printing.cells import Column, age_column, field_column, name_column


def lease_columns() -> list[Column]:
    return [
        name_column(),
        field_column("Holder", "io.k8s.api.coordination.v1.LeaseSpec", "spec.holderIdentity"),
        age_column(),
    ]
