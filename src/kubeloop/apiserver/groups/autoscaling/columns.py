"""autoscaling kinds' columns: HorizontalPodAutoscalers' references, targets and replicas."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from kubeloop.apiserver.printing.cells import (
    MORE,
    Cell,
    Column,
    Obj,
    age_column,
    api_doc,
    field_column,
    int_at,
    list_at,
    map_at,
    name_column,
    text_at,
    value_at,
)

_AUTOSCALING = "io.k8s.api.autoscaling.v2."


def _quantity_text(value: Any) -> str:
    """A quantity as a cell (as stored; Go prints a nil one as ``<nil>``)."""
    return "<nil>" if value is None else str(value)


def _hpa_metric(spec: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    """One entry of ``formatHPAMetrics``."""
    kind = spec.get("type")
    if kind in ("External", "Object"):
        key = kind.lower()
        target = map_at(spec, f"{key}.target")
        current = map_at(status, key)
        if target.get("averageValue") is not None:
            now = value_at(current, "current.averageValue")
            return f"{'<unknown>' if now is None else now}/{target['averageValue']} (avg)"
        now = _quantity_text(value_at(current, "current.value")) if current else "<unknown>"
        return f"{now}/{_quantity_text(target.get('value'))}"
    if kind == "Pods":
        current = map_at(status, "pods")
        now = _quantity_text(value_at(current, "current.averageValue")) if current else "<unknown>"
        return f"{now}/{_quantity_text(value_at(spec, 'pods.target.averageValue'))}"
    if kind in ("Resource", "ContainerResource"):
        key = "resource" if kind == "Resource" else "containerResource"
        source = map_at(spec, key)
        target = map_at(source, "target")
        current = map_at(status, key)
        name = source.get("name", "")
        if target.get("averageValue") is not None:
            now = _quantity_text(value_at(current, "current.averageValue")) if current else "<unknown>"
            return f"{name}: {now}/{target['averageValue']}"
        utilization = value_at(current, "current.averageUtilization")
        now = "<unknown>" if utilization is None else f"{utilization}%"
        wanted = target.get("averageUtilization")
        return f"{name}: {now}/{'<auto>' if wanted is None else f'{wanted}%'}"
    return "<unknown type>"


def _hpa_targets(obj: Obj, now: datetime.datetime) -> Cell:
    """``formatHPAMetrics``: each metric's current/target (statuses matched by position), two at most."""
    specs = [m for m in list_at(obj, "spec.metrics") if isinstance(m, Mapping)]
    if not specs:
        return "<none>"
    statuses = list_at(obj, "status.currentMetrics")
    entries = [
        _hpa_metric(spec, statuses[i] if i < len(statuses) and isinstance(statuses[i], Mapping) else {})
        for i, spec in enumerate(specs)
    ]
    text = ", ".join(entries[:2])
    return MORE.format(text, len(entries) - 2) if len(entries) > 2 else text


def hpa_columns() -> list[Column]:
    spec, status = (
        _AUTOSCALING + "HorizontalPodAutoscalerSpec",
        _AUTOSCALING + "HorizontalPodAutoscalerStatus",
    )
    return [
        name_column(),
        Column(
            "Reference",
            "string",
            lambda o, n: f"{text_at(o, 'spec.scaleTargetRef.kind')}/{text_at(o, 'spec.scaleTargetRef.name')}",
            api_doc(spec, "scaleTargetRef"),
        ),
        Column("Targets", "string", _hpa_targets, api_doc(spec, "metrics")),
        field_column("MinPods", spec, "spec.minReplicas", default="<unset>"),
        Column("MaxPods", "string", lambda o, n: int_at(o, "spec.maxReplicas"), api_doc(spec, "maxReplicas")),
        Column(
            "Replicas",
            "string",
            lambda o, n: int_at(o, "status.currentReplicas"),
            api_doc(status, "currentReplicas"),
        ),
        age_column(),
    ]
