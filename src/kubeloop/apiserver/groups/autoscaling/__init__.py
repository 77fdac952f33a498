"""The autoscaling API group: HorizontalPodAutoscalers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.groups.autoscaling import columns, defaults, hpaconversion, validation
from kubeloop.apiserver.groups.autoscaling.strategies import HorizontalPodAutoscalerV1Strategy
from kubeloop.apiserver.groups.declaration import BuiltinKind
from kubeloop.apiserver.groups.defaulting import empty_status


def _autoscaler(version: str, stored_version: str = "") -> ResourceType:
    """HorizontalPodAutoscalers, served as v2 (stored) and as v1 (a view of v2)."""
    return ResourceType(
        "autoscaling",
        version,
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        "HorizontalPodAutoscaler",
        True,
        short_names=("hpa",),
        categories=("all",),
        subresources=("status",),
        stored_version=stored_version,
    )


def _as_v2(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """v1 objects are printed from their v2 form, as upstream prints the internal version."""
    if obj.get("apiVersion") == hpaconversion.V1_API_VERSION:
        return hpaconversion.v1_to_v2(obj)
    return obj


#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        _autoscaler("v2"),
        defaults=defaults.horizontal_pod_autoscaler,
        initial_status=empty_status,
        rules=validation.horizontal_pod_autoscaler_rules,
        columns=columns.hpa_columns,
    ),
    BuiltinKind(
        _autoscaler("v1", stored_version="v2"),
        strategy=HorizontalPodAutoscalerV1Strategy,
        defaults=defaults.horizontal_pod_autoscaler,
        initial_status=empty_status,
        rules=validation.horizontal_pod_autoscaler_rules,
        columns=columns.hpa_columns,
        printed_form=_as_v2,
    ),
)
