"""The autoscaling group's rules (``pkg/apis/autoscaling/validation``): HorizontalPodAutoscalers'
target reference, replicas, metrics and scaling behaviour.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeloop.api import naming, quantity
from kubeloop.apiserver.registry.validation.causes import (
    NEGATIVE,
    as_dict,
    as_list,
    as_text,
    forbidden,
    invalid,
    is_int,
    not_supported,
    required,
)
from kubeloop.errors import StatusCause

__all__ = ["horizontal_pod_autoscaler_rules"]


_MAX_PERIOD_SECONDS = 1800


_MAX_STABILIZATION_WINDOW_SECONDS = 3600


_METRIC_SOURCES = ("ContainerResource", "External", "Object", "Pods", "Resource")


_METRIC_SOURCE_FIELDS = (
    ("Object", "object"),
    ("External", "external"),
    ("Pods", "pods"),
    ("Resource", "resource"),
    ("ContainerResource", "containerResource"),
)


_SELECT_POLICIES = ("Disabled", "Max", "Min")


_SCALING_POLICY_TYPES = ("Percent", "Pods")


def _cross_version_reference(ref: Mapping[str, Any], path: str) -> list[StatusCause]:
    """``ValidateCrossVersionObjectReference``: kind and name, both path segments."""
    causes: list[StatusCause] = []
    for key in ("kind", "name"):
        value = as_text(ref.get(key))
        if not value:
            causes.append(required(f"{path}.{key}"))
        else:
            causes.extend(invalid(f"{path}.{key}", value, m) for m in naming.path_segment_errors(value))
    return causes


def _metric_target(target: Mapping[str, Any], path: str) -> list[StatusCause]:
    causes: list[StatusCause] = []
    kind = target.get("type")
    if not kind:
        causes.append(required(f"{path}.type", "must specify a metric target type"))
    if kind not in ("Utilization", "Value", "AverageValue"):
        causes.append(
            invalid(f"{path}.type", kind or "", "must be either Utilization, Value, or AverageValue")
        )
    for key in ("value", "averageValue"):
        if target.get(key) is not None and quantity.sign(target[key]) != 1:
            causes.append(invalid(f"{path}.{key}", target[key], "must be positive"))
    utilization = target.get("averageUtilization")
    if is_int(utilization) and utilization < 1:
        causes.append(invalid(f"{path}.averageUtilization", utilization, "must be greater than 0"))
    return causes


def _metric_identifier(identifier: Mapping[str, Any], path: str) -> list[StatusCause]:
    name = as_text(identifier.get("name"))
    if not name:
        return [required(f"{path}.name", "must specify a metric name")]
    return [invalid(f"{path}.name", name, m) for m in naming.path_segment_errors(name)]


def _metric_source(key: str, source: Mapping[str, Any], path: str) -> list[StatusCause]:
    """One metric source's own rules (``validateObjectSource``, ``validatePodsSource``...)."""
    target = as_dict(source.get("target"))
    causes: list[StatusCause] = []
    if key == "object":
        causes += _cross_version_reference(as_dict(source.get("describedObject")), f"{path}.describedObject")
    if key in ("object", "external", "pods"):
        causes += _metric_identifier(as_dict(source.get("metric")), f"{path}.metric")
    if key in ("resource", "containerResource"):
        if not as_text(source.get("name")):
            causes.append(required(f"{path}.name", "must specify a resource name"))
        if key == "containerResource":
            container = as_text(source.get("container"))
            if not container:
                causes.append(required(f"{path}.container", "must specify a container"))
            else:
                causes += [
                    invalid(f"{path}.container", container, m) for m in naming.dns1123_label_errors(container)
                ]
    causes += _metric_target(target, f"{path}.target")
    value, average = target.get("value"), target.get("averageValue")
    utilization = target.get("averageUtilization")
    if key == "object" and value is None and average is None:
        causes.append(
            required(f"{path}.target.averageValue", "must set either a target value or averageValue")
        )
    elif key == "external":
        if value is None and average is None:
            causes.append(
                required(
                    f"{path}.target.averageValue",
                    "must set either a target value for metric or a per-pod target",
                )
            )
        if value is not None and average is not None:
            causes.append(
                forbidden(
                    f"{path}.target.value", "may not set both a target value for metric and a per-pod target"
                )
            )
    elif key == "pods" and average is None:
        causes.append(required(f"{path}.target.averageValue", "must specify a positive target averageValue"))
    elif key in ("resource", "containerResource"):
        if utilization is None and average is None:
            causes.append(
                required(
                    f"{path}.target.averageUtilization",
                    "must set either a target raw value or a target utilization",
                )
            )
        if utilization is not None and average is not None:
            causes.append(
                forbidden(
                    f"{path}.target.averageValue",
                    "may not set both a target raw value and a target utilization",
                )
            )
    return causes


def _metric_spec(metric: Mapping[str, Any], path: str) -> list[StatusCause]:
    """``validateMetricSpec``: a known type, its source filled in, and no other source."""
    causes: list[StatusCause] = []
    kind = as_text(metric.get("type"))
    if not kind:
        causes.append(required(f"{path}.type", "must specify a metric source type"))
    if kind not in _METRIC_SOURCES:
        causes.append(not_supported(f"{path}.type", kind, _METRIC_SOURCES))
    present = [key for _, key in _METRIC_SOURCE_FIELDS if metric.get(key) is not None]
    if present:
        causes += _metric_source(present[0], as_dict(metric.get(present[0])), f"{path}.{present[0]}")
    expected = dict(_METRIC_SOURCE_FIELDS).get(kind, "")
    if expected and expected not in present:
        causes.append(required(f"{path}.{expected}", "must populate information for the given metric source"))
    if len(present) > 1:
        causes += [
            forbidden(f"{path}.{key}", "must populate the given metric source only")
            for key in present
            if key != expected
        ]
    return causes


def _scaling_rules(rules: Mapping[str, Any], path: str) -> list[StatusCause]:
    causes: list[StatusCause] = []
    window = rules.get("stabilizationWindowSeconds")
    if is_int(window) and window < 0:
        causes.append(
            invalid(f"{path}.stabilizationWindowSeconds", window, "must be greater than or equal to zero")
        )
    if is_int(window) and window > _MAX_STABILIZATION_WINDOW_SECONDS:
        causes.append(
            invalid(
                f"{path}.stabilizationWindowSeconds",
                window,
                f"must be less than or equal to {_MAX_STABILIZATION_WINDOW_SECONDS}",
            )
        )
    select = rules.get("selectPolicy")
    if select is not None and select not in _SELECT_POLICIES:
        causes.append(not_supported(f"{path}.selectPolicy", select, _SELECT_POLICIES))
    policies = as_list(rules.get("policies"))
    if not policies:
        causes.append(required(f"{path}.policies", "must specify at least one Policy"))
    for i, policy in enumerate(policies):
        item = as_dict(policy)
        at = f"{path}.policies[{i}]"
        if item.get("type") not in _SCALING_POLICY_TYPES:
            causes.append(not_supported(f"{at}.type", item.get("type") or "", _SCALING_POLICY_TYPES))
        value = item.get("value", 0)
        if is_int(value) and value <= 0:
            causes.append(invalid(f"{at}.value", value, "must be greater than zero"))
        period = item.get("periodSeconds", 0)
        if is_int(period) and period <= 0:
            causes.append(invalid(f"{at}.periodSeconds", period, "must be greater than zero"))
        if is_int(period) and period > _MAX_PERIOD_SECONDS:
            causes.append(
                invalid(f"{at}.periodSeconds", period, f"must be less than or equal to {_MAX_PERIOD_SECONDS}")
            )
    return causes


def horizontal_pod_autoscaler_rules(obj: Mapping[str, Any]) -> list[StatusCause]:
    """``validateHorizontalPodAutoscalerSpec`` on the autoscaling/v2 form (what upstream
    validates whichever version a client writes; HPAScaleToZero is off)."""
    spec = as_dict(obj.get("spec"))
    causes: list[StatusCause] = []
    low = spec.get("minReplicas")
    high = spec.get("maxReplicas", 0)
    if is_int(low) and low < 1:
        causes.append(invalid("spec.minReplicas", low, "must be greater than or equal to 1"))
    if is_int(high) and high < 1:
        causes.append(invalid("spec.maxReplicas", high, "must be greater than 0"))
    if is_int(low) and is_int(high) and high < low:
        causes.append(invalid("spec.maxReplicas", high, "must be greater than or equal to `minReplicas`"))
    causes += _cross_version_reference(as_dict(spec.get("scaleTargetRef")), "spec.scaleTargetRef")
    for i, metric in enumerate(as_list(spec.get("metrics"))):
        causes += _metric_spec(as_dict(metric), f"spec.metrics[{i}]")
    behavior = spec.get("behavior")
    if isinstance(behavior, Mapping):
        for direction in ("scaleUp", "scaleDown"):
            if isinstance(behavior.get(direction), Mapping):
                causes += _scaling_rules(behavior[direction], f"spec.behavior.{direction}")
    status = obj.get("status")
    if isinstance(status, Mapping):
        for key in ("currentReplicas", "desiredReplicas"):
            if is_int(status.get(key)) and status[key] < 0:
                causes.append(invalid(f"status.{key}", status[key], NEGATIVE))
    return causes
