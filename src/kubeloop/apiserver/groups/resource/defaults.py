"""The resource.k8s.io group's defaults: ResourceClaims and their templates."""

from __future__ import annotations

from kubeloop.api.object import Obj
from kubeloop.apiserver.groups.defaulting import spec_of

__all__ = ["resource_claim", "resource_claim_spec", "resource_claim_template"]


def resource_claim_spec(spec: Obj | None) -> None:
    devices = (spec or {}).get("devices")
    for request in (devices.get("requests") or ()) if isinstance(devices, dict) else ():
        exactly = request.get("exactly") if isinstance(request, dict) else None
        if isinstance(exactly, dict):
            exactly.setdefault("allocationMode", "ExactCount")
            if exactly["allocationMode"] == "ExactCount":
                exactly.setdefault("count", 1)


def resource_claim(obj: Obj) -> None:
    resource_claim_spec(spec_of(obj))


def resource_claim_template(obj: Obj) -> None:
    spec = spec_of(obj)
    inner = spec.get("spec") if spec is not None else None
    resource_claim_spec(inner if isinstance(inner, dict) else None)
