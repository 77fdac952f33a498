"""The flowcontrol.apiserver.k8s.io group's defaults: FlowSchemas and
PriorityLevelConfigurations.
"""

from __future__ import annotations

from kubeloop.api.object import Obj
from kubeloop.apiserver.groups.defaulting import spec_of

__all__ = ["flow_schema", "priority_level_configuration"]


def flow_schema(obj: Obj) -> None:
    spec = spec_of(obj)
    if spec is not None and not spec.get("matchingPrecedence"):
        spec["matchingPrecedence"] = 1000


def priority_level_configuration(obj: Obj) -> None:
    limited = (spec_of(obj) or {}).get("limited")
    if isinstance(limited, dict):
        limited.setdefault("nominalConcurrencyShares", 30)
        limited.setdefault("lendablePercent", 0)
