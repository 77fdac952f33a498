"""apps/v1 kinds' columns: Deployments, ReplicaSets, StatefulSets, DaemonSets, ControllerRevisions.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping

from kubeloop.apiserver.printing.cells import (
    APPS,
    CORE,
    READY_PODS,
    Cell,
    CellFn,
    Column,
    Obj,
    age_column,
    api_doc,
    field_column,
    format_label_selector,
    format_labels,
    int_at,
    list_at,
    map_at,
    name_column,
    ready_of,
    template_columns,
    value_at,
)


def deployment_columns() -> list[Column]:
    return [
        name_column(),
        Column("Ready", "string", ready_of(1), READY_PODS),
        Column(
            "Up-to-date",
            "string",
            lambda o, n: int_at(o, "status.updatedReplicas"),
            api_doc(APPS + "DeploymentStatus", "updatedReplicas"),
        ),
        Column(
            "Available",
            "string",
            lambda o, n: int_at(o, "status.availableReplicas"),
            api_doc(APPS + "DeploymentStatus", "availableReplicas"),
        ),
        age_column(),
        *template_columns("spec.template.spec.containers", None),
        Column(
            "Selector",
            "string",
            lambda o, n: format_label_selector(value_at(o, "spec.selector")),
            api_doc(APPS + "DeploymentSpec", "selector"),
            1,
        ),
    ]


def replicaset_columns() -> list[Column]:
    return [
        name_column(),
        Column(
            "Desired",
            "integer",
            lambda o, n: int_at(o, "spec.replicas", 1),
            api_doc(APPS + "ReplicaSetSpec", "replicas"),
        ),
        field_column("Current", APPS + "ReplicaSetStatus", "status.replicas", "integer"),
        field_column("Ready", APPS + "ReplicaSetStatus", "status.readyReplicas", "integer"),
        age_column(),
        *template_columns(
            "spec.template.spec.containers", "spec.selector", api_doc(APPS + "ReplicaSetSpec", "selector")
        ),
    ]


def statefulset_columns() -> list[Column]:
    return [
        name_column(),
        Column("Ready", "string", ready_of(1), READY_PODS),
        age_column(),
        *template_columns("spec.template.spec.containers", None),
    ]


def daemonset_columns() -> list[Column]:
    status = APPS + "DaemonSetStatus"

    def count(field: str) -> CellFn:
        return lambda o, n: int_at(o, f"status.{field}")

    return [
        name_column(),
        Column(
            "Desired", "integer", count("desiredNumberScheduled"), api_doc(status, "desiredNumberScheduled")
        ),
        Column(
            "Current", "integer", count("currentNumberScheduled"), api_doc(status, "currentNumberScheduled")
        ),
        Column("Ready", "integer", count("numberReady"), api_doc(status, "numberReady")),
        Column(
            "Up-to-date",
            "integer",
            count("updatedNumberScheduled"),
            api_doc(status, "updatedNumberScheduled"),
        ),
        Column("Available", "integer", count("numberAvailable"), api_doc(status, "numberAvailable")),
        Column(
            "Node Selector",
            "string",
            lambda o, n: format_labels(map_at(o, "spec.template.spec.nodeSelector")),
            api_doc(CORE + "PodSpec", "nodeSelector"),
        ),
        age_column(),
        *template_columns(
            "spec.template.spec.containers", "spec.selector", api_doc(APPS + "DaemonSetSpec", "selector")
        ),
    ]


def _controller_of(obj: Obj, now: datetime.datetime) -> Cell:
    for ref in list_at(obj, "metadata.ownerReferences"):
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            kind = str(ref.get("kind", ""))
            return f"{(kind + '.' + group if group else kind).lower()}/{ref.get('name', '')}"
    return "<none>"


def controllerrevision_columns() -> list[Column]:
    return [
        name_column(),
        Column("Controller", "string", _controller_of, "Controller of the object"),
        Column(
            "Revision",
            "string",
            lambda o, n: int_at(o, "revision"),
            api_doc(APPS + "ControllerRevision", "revision"),
        ),
        age_column(),
    ]
