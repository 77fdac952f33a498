"""policy: PodDisruptionBudgets."""

from __future__ import annotations

from typing import Any

import pytest

from tests.apiserver.registry.validation.objects import PERCENT_ERROR, kind_rules


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}, []),
        ({"maxUnavailable": "100%", "unhealthyPodEvictionPolicy": "AlwaysAllow"}, []),
        ({"minAvailable": "0%"}, []),
        (
            {"minAvailable": "50%", "maxUnavailable": 1, "selector": {"matchLabels": {"b": "2", "a": "1"}}},
            [
                (
                    "spec",
                    'Invalid value: {"MinAvailable":"50%","Selector":{"matchLabels":{"a":"1","b":"2"}},'
                    '"MaxUnavailable":1,"UnhealthyPodEvictionPolicy":null}: '
                    "minAvailable and maxUnavailable cannot be both set",
                )
            ],
        ),
        (
            {"minAvailable": "101%"},
            [("spec.minAvailable", 'Invalid value: "101%": must not be greater than 100%')],
        ),
        ({"maxUnavailable": "half"}, [("spec.maxUnavailable", f'Invalid value: "half": {PERCENT_ERROR}')]),
        (
            {"maxUnavailable": -2},
            [("spec.maxUnavailable", "Invalid value: -2: must be greater than or equal to 0")],
        ),
        (
            {"selector": {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}},
            [
                (
                    "spec.selector.matchExpressions[0].values",
                    "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            ],
        ),
        # Thousands of digits are still a percent, and above 100 (not an overflow).
        (
            {"minAvailable": "9" * 5000 + "%"},
            [("spec.minAvailable", f'Invalid value: "{"9" * 5000}%": must not be greater than 100%')],
        ),
        ({"minAvailable": "0000000100%"}, []),
        (
            {"unhealthyPodEvictionPolicy": "Never"},
            [
                (
                    "spec.unhealthyPodEvictionPolicy",
                    'Unsupported value: "Never": supported values: "AlwaysAllow", "IfHealthyBudget"',
                )
            ],
        ),
    ],
)
def test_pod_disruption_budget_rules(spec: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    causes = kind_rules("policy", "PodDisruptionBudget", {"spec": spec})
    assert [(c.field, c.message) for c in causes] == expected
