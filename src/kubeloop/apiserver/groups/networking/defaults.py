"""The networking.k8s.io group's defaults: NetworkPolicies' policy types and ports."""

from __future__ import annotations

from kubeloop.api.object import Obj
from kubeloop.apiserver.groups.defaulting import spec_of

__all__ = ["network_policy"]


def network_policy(obj: Obj) -> None:
    spec = spec_of(obj)
    if spec is None:
        return
    for direction in ("ingress", "egress"):
        for rule in spec.get(direction) or ():
            for port in (rule.get("ports") or ()) if isinstance(rule, dict) else ():
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")
    if not spec.get("policyTypes"):
        spec["policyTypes"] = ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]
