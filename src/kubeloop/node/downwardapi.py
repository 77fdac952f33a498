"""The downward API: what a pod's own object and its containers' resources say, as values of
environment variables (``fieldRef``, ``resourceFieldRef``) and files of volumes."""

from __future__ import annotations

import json
import re

from kubeloop.api.object import Obj

_MAP_FIELD = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")
_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_SCALE = {
    "": 1,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
}


def field_value(pod: Obj, path: str) -> str:
    """A ``fieldRef``'s value. ``metadata.labels`` and ``metadata.annotations`` (volumes only)
    are one ``key="value"`` line per entry, sorted by key, as the kubelet writes them."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    mapped = _MAP_FIELD.match(path)
    if mapped:
        return str((meta.get(mapped.group(1)) or {}).get(mapped.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        entries = meta.get(path.partition(".")[2]) or {}
        return "\n".join(f"{key}={json.dumps(str(entries[key]))}" for key in sorted(entries))
    values = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.podIP": status.get("podIP"),
        "status.podIPs": ",".join(str(ip.get("ip")) for ip in status.get("podIPs") or ()),
        "status.hostIP": status.get("hostIP"),
        "status.hostIPs": ",".join(str(ip.get("ip")) for ip in status.get("hostIPs") or ()),
    }
    return str(values.get(path) or "")


def resource_value(container: Obj, ref: Obj) -> str:
    """A ``resourceFieldRef``'s value: the quantity over the divisor, rounded up (as upstream)."""
    section, _, resource = str(ref.get("resource") or "").partition(".")
    value = ((container.get("resources") or {}).get(section) or {}).get(resource)
    if value is None:
        return "0"
    amount, divisor = _quantity(str(value)), _quantity(str(ref.get("divisor") or "1"))
    whole = -(-amount // divisor) if divisor else amount
    return str(int(whole))


def _quantity(text: str) -> float:
    match = _QUANTITY.match(text.strip())
    if match is None or match.group(2) not in _SCALE:
        return 0.0
    return float(match.group(1)) * _SCALE[match.group(2)]
