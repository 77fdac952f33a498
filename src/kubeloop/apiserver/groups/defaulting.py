"""What every group's defaulting shares: an object's ``spec`` (a struct in Go: None when it is
not an object), and the empty status a create of many kinds starts with.
"""

from __future__ import annotations

from kubeloop.api.object import Obj

__all__ = ["empty_status", "spec_of"]


def empty_status(obj: Obj) -> None:
    """Workloads start with an empty status, which their controllers fill."""
    obj["status"] = {}


def spec_of(obj: Obj) -> Obj | None:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else None
