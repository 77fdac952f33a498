"""The autoscaling group's defaults (``pkg/apis/autoscaling/v2/defaults.go``): a
HorizontalPodAutoscaler's minimum replicas, default metric and scaling behaviour.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubeloop.api.object import Obj
from kubeloop.apiserver.groups.defaulting import spec_of

__all__ = ["horizontal_pod_autoscaler"]


#: autoscaling/v2 ``GenerateHPAScaleUpRules`` / ``GenerateHPAScaleDownRules``: each direction's
#: stabilization window and policies when a behavior leaves them out.
_SCALING_DEFAULTS: Mapping[str, tuple[int, tuple[tuple[str, int, int], ...]]] = {
    "scaleUp": (0, (("Pods", 4, 15), ("Percent", 100, 15))),
    "scaleDown": (300, (("Percent", 100, 15),)),
}


def horizontal_pod_autoscaler(obj: Obj) -> None:
    """autoscaling/v2: one replica at least, 80% CPU when no metric is given, and a behavior's
    missing scaling rules filled in as the HPA controller would apply them."""
    spec = spec_of(obj)
    if spec is None:
        return
    spec.setdefault("minReplicas", 1)
    if not spec.get("metrics"):
        spec["metrics"] = [
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
            }
        ]
    behavior = spec.get("behavior")
    if not isinstance(behavior, dict):
        return
    for direction, (window, policies) in _SCALING_DEFAULTS.items():
        rules = behavior.get(direction)
        if not isinstance(rules, dict):
            rules = behavior[direction] = {}
        if rules.get("stabilizationWindowSeconds") is None:
            rules["stabilizationWindowSeconds"] = window
        if rules.get("selectPolicy") is None:
            rules["selectPolicy"] = "Max"
        if rules.get("policies") is None:
            rules["policies"] = [{"type": t, "value": v, "periodSeconds": p} for t, v, p in policies]
