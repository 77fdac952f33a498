"""The discovery.k8s.io group's defaults: EndpointSlices' ports."""

from __future__ import annotations

from kubeloop.api.object import Obj

__all__ = ["endpoint_slice"]


def endpoint_slice(obj: Obj) -> None:
    for port in obj.get("ports") or ():
        if isinstance(port, dict):
            port.setdefault("name", "")
            port.setdefault("protocol", "TCP")
