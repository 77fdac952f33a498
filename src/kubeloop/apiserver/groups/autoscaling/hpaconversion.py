"""autoscaling/v2 HorizontalPodAutoscaler ↔ autoscaling/v1: two views of one stored object.

The server stores the v2 form (kube-apiserver's storage version) and serves autoscaling/v1
as a view of it, with the rules of upstream's ``pkg/apis/autoscaling/v1/conversion.go``:

- v1 has one metric of its own, ``spec.targetCPUUtilizationPercentage``: the first CPU
  Resource metric of v2, if it targets a utilization. Every other metric travels in the
  ``autoscaling.alpha.kubernetes.io/metrics`` annotation, in v1's metric shape
  (``targetAverageUtilization``, ``metricName``...).
- ``status.currentCPUUtilizationPercentage`` is the last CPU utilization among v2's current
  metrics; all current metrics travel in ``.../current-metrics``, the conditions in
  ``.../conditions`` and ``spec.behavior`` in ``.../behavior`` — the last as Go marshals the
  internal type, which has no JSON tags (``{"ScaleUp": {"StabilizationWindowSeconds": ...}}``).
- Back from v1, the annotations are read (an annotation that does not decode is ignored) and
  removed; the CPU percentage goes after the annotation's metrics; a v1 object with no metric
  at all gets the 80 % CPU target the v1 controller once applied implicitly.

So a v1 client that reads an object and writes it back loses nothing v2 set.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from kubeloop.api.object import Obj

__all__ = [
    "BEHAVIOR_ANNOTATION",
    "CONDITIONS_ANNOTATION",
    "CURRENT_METRICS_ANNOTATION",
    "DEFAULT_CPU_UTILIZATION",
    "METRICS_ANNOTATION",
    "V1_API_VERSION",
    "V2_API_VERSION",
    "v1_to_v2",
    "v2_to_v1",
]

V1_API_VERSION = "autoscaling/v1"
V2_API_VERSION = "autoscaling/v2"
METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"
BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
#: Annotations of the tolerance alpha feature, dropped with the others on every conversion.
_TOLERANCE_ANNOTATIONS = (
    "autoscaling.alpha.kubernetes.io/scale-down-tolerance",
    "autoscaling.alpha.kubernetes.io/scale-up-tolerance",
)
_ROUND_TRIP = (
    METRICS_ANNOTATION,
    CURRENT_METRICS_ANNOTATION,
    CONDITIONS_ANNOTATION,
    BEHAVIOR_ANNOTATION,
    *_TOLERANCE_ANNOTATIONS,
)
DEFAULT_CPU_UTILIZATION = 80
#: Go's zero resource.Quantity, as it marshals.
_ZERO_QUANTITY = "0"


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _copy_if_set(out: Obj, out_key: str, source: Mapping[str, Any], key: str) -> None:
    value = source.get(key)
    if value is not None:
        out[out_key] = copy.deepcopy(value)


def _reference(ref: Any) -> Obj:
    """A CrossVersionObjectReference: kind and name always (no ``omitempty``), apiVersion if set."""
    ref = _object(ref)
    out: Obj = {"kind": ref.get("kind", ""), "name": ref.get("name", "")}
    _copy_if_set(out, "apiVersion", ref, "apiVersion")
    return out


def _is_cpu(metric: Mapping[str, Any]) -> bool:
    return metric.get("type") == "Resource" and _object(metric.get("resource")).get("name") == "cpu"


def _cpu_utilization(metric: Mapping[str, Any], part: str) -> Any:
    """The averageUtilization of a CPU Resource metric's ``part`` ("target" or "current")."""
    if not _is_cpu(metric):
        return None
    return _object(_object(metric.get("resource")).get(part)).get("averageUtilization")


# ------------------------------------------------------------------ metrics: v2 → v1


def _identifier(source: Mapping[str, Any]) -> tuple[Any, Any]:
    metric = _object(source.get("metric"))
    return metric.get("name", ""), metric.get("selector")


def _metric_v2_to_v1(metric: Mapping[str, Any], *, status: bool) -> Obj:
    """One MetricSpec (``status``: MetricStatus) in autoscaling/v1's shape."""
    value_key = "current" if status else "target"
    out: Obj = {"type": metric.get("type", "")}
    source = _object(metric.get("object"))
    if source:
        name, selector = _identifier(source)
        values = _object(source.get(value_key))
        converted: Obj = {"target": _reference(source.get("describedObject")), "metricName": name}
        converted["currentValue" if status else "targetValue"] = values.get("value", _ZERO_QUANTITY)
        if selector is not None:
            converted["selector"] = copy.deepcopy(selector)
        _copy_if_set(converted, "averageValue", values, "averageValue")
        out["object"] = converted
    source = _object(metric.get("pods"))
    if source:
        name, selector = _identifier(source)
        values = _object(source.get(value_key))
        converted = {"metricName": name}
        converted["currentAverageValue" if status else "targetAverageValue"] = values.get(
            "averageValue", _ZERO_QUANTITY
        )
        if selector is not None:
            converted["selector"] = copy.deepcopy(selector)
        out["pods"] = converted
    for key in ("resource", "containerResource"):
        source = _object(metric.get(key))
        if not source:
            continue
        values = _object(source.get(value_key))
        converted = {"name": source.get("name", "")}
        if status:
            _copy_if_set(converted, "currentAverageUtilization", values, "averageUtilization")
            converted["currentAverageValue"] = values.get("averageValue", _ZERO_QUANTITY)
        else:
            _copy_if_set(converted, "targetAverageUtilization", values, "averageUtilization")
            _copy_if_set(converted, "targetAverageValue", values, "averageValue")
        if key == "containerResource":
            converted["container"] = source.get("container", "")
        out[key] = converted
    source = _object(metric.get("external"))
    if source:
        name, selector = _identifier(source)
        values = _object(source.get(value_key))
        converted = {"metricName": name}
        if selector is not None:
            converted["metricSelector"] = copy.deepcopy(selector)
        if status:
            converted["currentValue"] = values.get("value", _ZERO_QUANTITY)
            _copy_if_set(converted, "currentAverageValue", values, "averageValue")
        else:
            _copy_if_set(converted, "targetValue", values, "value")
            _copy_if_set(converted, "targetAverageValue", values, "averageValue")
        out["external"] = converted
    return out


# ------------------------------------------------------------------ metrics: v1 → v2


def _identifier_from(source: Mapping[str, Any], selector_key: str) -> Obj:
    out: Obj = {"name": source.get("metricName", "")}
    _copy_if_set(out, "selector", source, selector_key)
    return out


def _target_type(has_first: bool, first: str, otherwise: str) -> str:
    return first if has_first else otherwise


def _metric_v1_to_v2(metric: Mapping[str, Any], *, status: bool) -> Obj:
    """One autoscaling/v1 MetricSpec (``status``: MetricStatus) in v2's shape."""
    out: Obj = {"type": metric.get("type", "")}
    prefix = "current" if status else "target"
    values_key = "current" if status else "target"
    source = _object(metric.get("object"))
    if source:
        values: Obj = {}
        if not status:
            values["type"] = _target_type(source.get("averageValue") is None, "Value", "AverageValue")
        values["value"] = source.get(f"{prefix}Value", _ZERO_QUANTITY)
        _copy_if_set(values, "averageValue", source, "averageValue")
        out["object"] = {
            "describedObject": _reference(source.get("target")),
            "metric": _identifier_from(source, "selector"),
            values_key: values,
        }
    source = _object(metric.get("pods"))
    if source:
        values = {} if status else {"type": "AverageValue"}
        values["averageValue"] = source.get(f"{prefix}AverageValue", _ZERO_QUANTITY)
        out["pods"] = {"metric": _identifier_from(source, "selector"), values_key: values}
    for key in ("resource", "containerResource"):
        source = _object(metric.get(key))
        if not source:
            continue
        utilization = source.get(f"{prefix}AverageUtilization")
        values = {}
        if not status:
            values["type"] = _target_type(utilization is not None, "Utilization", "AverageValue")
        _copy_if_set(values, "averageValue", source, f"{prefix}AverageValue")
        if utilization is not None:
            values["averageUtilization"] = utilization
        converted: Obj = {"name": source.get("name", "")}
        if key == "containerResource":
            converted["container"] = source.get("container", "")
        converted[values_key] = values
        out[key] = converted
    source = _object(metric.get("external"))
    if source:
        values = {}
        if not status:
            values["type"] = _target_type(source.get("targetValue") is not None, "Value", "AverageValue")
        _copy_if_set(values, "value", source, f"{prefix}Value")
        _copy_if_set(values, "averageValue", source, f"{prefix}AverageValue")
        out["external"] = {"metric": _identifier_from(source, "metricSelector"), values_key: values}
    return out


# ------------------------------------------------------------------ behavior

_RULE_FIELDS = (
    ("stabilizationWindowSeconds", "StabilizationWindowSeconds"),
    ("selectPolicy", "SelectPolicy"),
    ("policies", "Policies"),
    ("tolerance", "Tolerance"),
)
_POLICY_FIELDS = (("type", "Type", ""), ("value", "Value", 0), ("periodSeconds", "PeriodSeconds", 0))
_DIRECTIONS = (("scaleUp", "ScaleUp"), ("scaleDown", "ScaleDown"))


def _behavior_to_go(behavior: Mapping[str, Any]) -> Obj:
    """spec.behavior as Go marshals the internal type: Go's field names, nil pointers as null."""

    def rules(value: Any) -> Obj | None:
        if not isinstance(value, Mapping):
            return None
        out: Obj = {}
        for key, go_key in _RULE_FIELDS:
            item = value.get(key)
            if key == "policies" and isinstance(item, list):
                item = [
                    {go: _object(policy).get(field, zero) for field, go, zero in _POLICY_FIELDS}
                    for policy in item
                ]
            out[go_key] = copy.deepcopy(item)
        return out

    return {go_key: rules(behavior.get(key)) for key, go_key in _DIRECTIONS}


def _go_field(source: Mapping[str, Any], go_key: str) -> Any:
    """A field as Go's ``encoding/json`` finds it: exact name first, then any case."""
    if go_key in source:
        return source[go_key]
    lowered = go_key.lower()
    for key, value in source.items():
        if key.lower() == lowered:
            return value
    return None


def _policy_from_go(policy: Mapping[str, Any]) -> Obj:
    out: Obj = {}
    for field, go_key, zero in _POLICY_FIELDS:
        value = _go_field(policy, go_key)
        out[field] = zero if value is None else value
    return out


def _behavior_from_go(raw: Any) -> Obj | None:
    if not isinstance(raw, Mapping):
        return None
    out: Obj = {}
    for key, go_key in _DIRECTIONS:
        value = _go_field(raw, go_key)
        if not isinstance(value, Mapping):
            continue
        rules: Obj = {}
        for field, go_field in _RULE_FIELDS:
            item = _go_field(value, go_field)
            if item is None:
                continue
            if field == "policies":
                if not isinstance(item, list):
                    continue
                item = [_policy_from_go(_object(policy)) for policy in item]
            rules[field] = copy.deepcopy(item)
        out[key] = rules
    return out or None


# ------------------------------------------------------------------ annotations


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _object(_object(obj.get("metadata")).get("annotations"))


def _decoded(obj: Mapping[str, Any], key: str, accept: Callable[[Any], bool]) -> Any:
    raw = _annotations(obj).get(key)
    if not isinstance(raw, str):
        return None
    try:
        value = orjson.loads(raw)  # nesting past orjson's limit is a decode error, not a crash
    except orjson.JSONDecodeError:
        return None
    return value if accept(value) else None


def _without_round_trip_annotations(metadata: Obj) -> Obj:
    annotations = _object(metadata.get("annotations"))
    if not any(key in annotations for key in _ROUND_TRIP):
        return metadata
    kept = {key: value for key, value in annotations.items() if key not in _ROUND_TRIP}
    metadata = dict(metadata)
    if kept:
        metadata["annotations"] = kept
    else:
        metadata.pop("annotations", None)
    return metadata


def _encode(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _is_list(value: Any) -> bool:
    return isinstance(value, list)


# ------------------------------------------------------------------ whole objects


def v2_to_v1(stored: Mapping[str, Any]) -> Obj:
    """The autoscaling/v1 view of a stored autoscaling/v2 HorizontalPodAutoscaler."""
    spec = _object(stored.get("spec"))
    status = _object(stored.get("status"))
    out: Obj = {key: value for key, value in stored.items() if key not in ("spec", "status")}
    out["apiVersion"] = V1_API_VERSION
    out["kind"] = "HorizontalPodAutoscaler"
    metadata = _without_round_trip_annotations(dict(_object(stored.get("metadata"))))

    metrics = [m for m in spec.get("metrics") or () if isinstance(m, Mapping)]
    v1_spec: Obj = {"scaleTargetRef": _reference(spec.get("scaleTargetRef"))}
    _copy_if_set(v1_spec, "minReplicas", spec, "minReplicas")
    v1_spec["maxReplicas"] = spec.get("maxReplicas", 0)
    for metric in metrics:
        if _is_cpu(metric):
            utilization = _cpu_utilization(metric, "target")
            if utilization is not None:
                v1_spec["targetCPUUtilizationPercentage"] = utilization
            break
    out["spec"] = v1_spec

    v1_status: Obj = {}
    _copy_if_set(v1_status, "observedGeneration", status, "observedGeneration")
    _copy_if_set(v1_status, "lastScaleTime", status, "lastScaleTime")
    v1_status["currentReplicas"] = status.get("currentReplicas", 0)
    v1_status["desiredReplicas"] = status.get("desiredReplicas", 0)
    current = [m for m in status.get("currentMetrics") or () if isinstance(m, Mapping)]
    for metric in current:
        utilization = _cpu_utilization(metric, "current")
        if utilization is not None:
            v1_status["currentCPUUtilizationPercentage"] = utilization
    out["status"] = v1_status

    carried: dict[str, str] = {}
    others = [_metric_v2_to_v1(m, status=False) for m in metrics if _cpu_utilization(m, "target") is None]
    if others:
        carried[METRICS_ANNOTATION] = _encode(others)
    if current:
        carried[CURRENT_METRICS_ANNOTATION] = _encode([_metric_v2_to_v1(m, status=True) for m in current])
    conditions = status.get("conditions")
    if isinstance(conditions, list) and conditions:
        carried[CONDITIONS_ANNOTATION] = _encode(conditions)
    behavior = spec.get("behavior")
    if isinstance(behavior, Mapping):
        carried[BEHAVIOR_ANNOTATION] = _encode(_behavior_to_go(behavior))
    if carried:
        metadata["annotations"] = {**_object(metadata.get("annotations")), **carried}
    out["metadata"] = metadata
    return out


def v1_to_v2(served: Mapping[str, Any]) -> Obj:
    """The autoscaling/v2 object an autoscaling/v1 HorizontalPodAutoscaler stands for."""
    spec = _object(served.get("spec"))
    status = _object(served.get("status"))
    out: Obj = {key: value for key, value in served.items() if key not in ("spec", "status")}
    out["apiVersion"] = V2_API_VERSION
    out["kind"] = "HorizontalPodAutoscaler"

    v2_spec: Obj = {"scaleTargetRef": _reference(spec.get("scaleTargetRef"))}
    _copy_if_set(v2_spec, "minReplicas", spec, "minReplicas")
    v2_spec["maxReplicas"] = spec.get("maxReplicas", 0)
    metrics: list[Any] = []
    percentage = spec.get("targetCPUUtilizationPercentage")
    if percentage is not None:
        metrics.append(
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": percentage},
                },
            }
        )
    others = _decoded(served, METRICS_ANNOTATION, _is_list)
    if others is not None:
        metrics = [_metric_v1_to_v2(_object(m), status=False) for m in others] + metrics
    if not metrics:
        metrics.append(
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION},
                },
            }
        )
    v2_spec["metrics"] = metrics
    behavior = _behavior_from_go(_decoded(served, BEHAVIOR_ANNOTATION, lambda v: isinstance(v, Mapping)))
    if behavior is not None:
        v2_spec["behavior"] = behavior
    out["spec"] = v2_spec

    v2_status: Obj = {}
    _copy_if_set(v2_status, "observedGeneration", status, "observedGeneration")
    _copy_if_set(v2_status, "lastScaleTime", status, "lastScaleTime")
    if status.get("currentReplicas"):  # ``omitempty`` in v2: Go leaves out a zero
        v2_status["currentReplicas"] = status["currentReplicas"]
    v2_status["desiredReplicas"] = status.get("desiredReplicas", 0)
    current = _decoded(served, CURRENT_METRICS_ANNOTATION, _is_list)
    if current is not None:
        v2_status["currentMetrics"] = [_metric_v1_to_v2(_object(m), status=True) for m in current]
    elif status.get("currentCPUUtilizationPercentage") is not None:
        v2_status["currentMetrics"] = [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "current": {"averageUtilization": status["currentCPUUtilizationPercentage"]},
                },
            }
        ]
    conditions = _decoded(served, CONDITIONS_ANNOTATION, _is_list)
    if conditions is not None:
        v2_status["conditions"] = conditions
    if "status" in served:
        out["status"] = v2_status
    out["metadata"] = _without_round_trip_annotations(dict(_object(served.get("metadata"))))
    return out
