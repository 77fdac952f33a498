"""The coordination.k8s.io group's rules (``pkg/apis/coordination/validation``): Leases."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeloop.apiserver.registry.validation.causes import NEGATIVE, as_dict, invalid, is_int
from kubeloop.errors import StatusCause

__all__ = ["lease_rules"]


def lease_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    spec = as_dict(obj.get("spec"))
    causes: list[StatusCause] = []
    duration = spec.get("leaseDurationSeconds")
    if is_int(duration) and duration <= 0:
        causes.append(invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if is_int(transitions) and transitions < 0:
        causes.append(invalid("spec.leaseTransitions", transitions, NEGATIVE))
    return causes
