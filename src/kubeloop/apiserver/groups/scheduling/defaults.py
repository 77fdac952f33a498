"""The scheduling.k8s.io group's defaults: PriorityClasses' preemption policy."""

from __future__ import annotations

from kubeloop.api.object import Obj

__all__ = ["priority_class"]


def priority_class(obj: Obj) -> None:
    obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
