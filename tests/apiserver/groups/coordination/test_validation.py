"""coordination: Leases."""

from __future__ import annotations

from typing import Any

import pytest

from tests.apiserver.registry.validation.objects import kind_rules


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"leaseDurationSeconds": 15, "leaseTransitions": 0}, []),
        ({}, []),
        (
            {"leaseDurationSeconds": 0},
            [("spec.leaseDurationSeconds", "Invalid value: 0: must be greater than 0")],
        ),
        (
            {"leaseDurationSeconds": -5},
            [("spec.leaseDurationSeconds", "Invalid value: -5: must be greater than 0")],
        ),
        (
            {"leaseTransitions": -1},
            [("spec.leaseTransitions", "Invalid value: -1: must be greater than or equal to 0")],
        ),
    ],
)
def test_lease_rules(spec: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    causes = kind_rules("coordination.k8s.io", "Lease", {"spec": spec})
    assert [(c.field, c.message) for c in causes] == expected
