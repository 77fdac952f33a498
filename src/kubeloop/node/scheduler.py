"""Whether a pod may run on a node, as the scheduler's filters decide for the simulated cluster:
``nodeName``, ``nodeSelector``, required node affinity (label expressions and ``metadata.name``
fields) and taints with effect NoSchedule or NoExecute, which the pod must tolerate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeloop.api.object import Obj


def fits(pod_spec: Obj, node: Obj) -> bool:
    """Whether a pod with ``pod_spec`` may be placed on ``node``."""
    meta = node.get("metadata") or {}
    name = str(meta.get("name") or "")
    labels: Mapping[str, str] = meta.get("labels") or {}
    wanted_node = pod_spec.get("nodeName")
    if wanted_node and wanted_node != name:
        return False
    selector = pod_spec.get("nodeSelector") or {}
    if any(labels.get(key) != value for key, value in selector.items()):
        return False
    affinity = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = affinity.get("nodeSelectorTerms")
    if terms and not any(_term_matches(term, labels, name) for term in terms if isinstance(term, dict)):
        return False
    tolerations = [t for t in pod_spec.get("tolerations") or () if isinstance(t, dict)]
    return all(
        any(_tolerates(toleration, taint) for toleration in tolerations)
        for taint in (node.get("spec") or {}).get("taints") or ()
        if isinstance(taint, dict) and taint.get("effect") in ("NoSchedule", "NoExecute")
    )


def required_node_name(pod_spec: Obj) -> str | None:
    """The one node a pod is pinned to (``nodeName``, or a ``metadata.name`` affinity term)."""
    if pod_spec.get("nodeName"):
        return str(pod_spec["nodeName"])
    affinity = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in affinity.get("nodeSelectorTerms") or ():
        for field in (term or {}).get("matchFields") or ():
            values = field.get("values") or []
            if field.get("key") == "metadata.name" and field.get("operator") == "In" and len(values) == 1:
                return str(values[0])
    return None


def _term_matches(term: Obj, labels: Mapping[str, str], name: str) -> bool:
    expressions = [e for e in term.get("matchExpressions") or () if isinstance(e, dict)]
    fields = [f for f in term.get("matchFields") or () if isinstance(f, dict)]
    if not expressions and not fields:
        return False  # an empty term matches no node
    return all(_requirement(e, labels) for e in expressions) and all(
        _requirement(f, {"metadata.name": name}) for f in fields
    )


def _requirement(requirement: Obj, values: Mapping[str, str]) -> bool:
    key = str(requirement.get("key") or "")
    operator = requirement.get("operator")
    wanted: list[Any] = list(requirement.get("values") or ())
    present = key in values
    value = values.get(key)
    if operator == "In":
        return present and value in wanted
    if operator == "NotIn":
        return not present or value not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(wanted) == 1:
        try:
            have, bound = int(str(value)), int(str(wanted[0]))
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def _tolerates(toleration: Obj, taint: Obj) -> bool:
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration.get("key") == taint.get("key")
    return toleration.get("key") == taint.get("key") and (toleration.get("value") or "") == (
        taint.get("value") or ""
    )
