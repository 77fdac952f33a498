"""The policy group's rules (``pkg/apis/policy/validation``): PodDisruptionBudgets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeloop.apiserver.registry.validation.causes import (
    GoStruct,
    as_dict,
    as_text,
    invalid,
    nonnegative,
    not_supported,
)
from kubeloop.apiserver.registry.validation.intstr import positive_int_or_percent
from kubeloop.apiserver.registry.validation.selectors import go_label_selector, validate_label_selector
from kubeloop.errors import StatusCause

__all__ = ["pod_disruption_budget_rules"]


_UNHEALTHY_POD_EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")


def pod_disruption_budget_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``ValidatePodDisruptionBudget`` (and the status counters of its status update rules)."""
    spec = as_dict(obj.get("spec"))
    causes: list[StatusCause] = []
    minimum, maximum = spec.get("minAvailable"), spec.get("maxUnavailable")
    if minimum is not None and maximum is not None:
        shown = GoStruct(
            MinAvailable=minimum,
            Selector=go_label_selector(spec.get("selector")),
            MaxUnavailable=maximum,
            UnhealthyPodEvictionPolicy=spec.get("unhealthyPodEvictionPolicy"),
        )
        causes.append(invalid("spec", shown, "minAvailable and maxUnavailable cannot be both set"))
    if minimum is not None:
        causes.extend(positive_int_or_percent(minimum, "spec.minAvailable"))
    if maximum is not None:
        causes.extend(positive_int_or_percent(maximum, "spec.maxUnavailable"))
    if isinstance(spec.get("selector"), dict):
        causes.extend(validate_label_selector(spec["selector"], "spec.selector"))
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in _UNHEALTHY_POD_EVICTION_POLICIES:
        causes.append(
            not_supported(
                "spec.unhealthyPodEvictionPolicy", as_text(policy), _UNHEALTHY_POD_EVICTION_POLICIES
            )
        )
    status = as_dict(obj.get("status"))
    for key in ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"):
        causes.extend(nonnegative(status, key, "status"))
    return causes
