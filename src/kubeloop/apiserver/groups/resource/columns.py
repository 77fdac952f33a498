"""resource.k8s.io kinds' columns: DeviceTaintRules, ResourceClaims, ResourceSlices."""

from __future__ import annotations

import datetime

from kubeloop.apiserver.printing.cells import (
    Cell,
    Column,
    Obj,
    age_column,
    api_doc,
    field_column,
    list_at,
    name_column,
    since_text,
    value_at,
)

_RESOURCE = "io.k8s.api.resource.v1."


def devicetaintrule_columns() -> list[Column]:
    taint = _RESOURCE + "DeviceTaint"

    def added(obj: Obj, now: datetime.datetime) -> Cell:
        value = value_at(obj, "spec.taint.timeAdded")
        return "" if value is None else since_text(value, now)

    return [
        name_column(),
        field_column("Key", taint, "spec.taint.key"),
        field_column("Value", taint, "spec.taint.value"),
        field_column("Effect", taint, "spec.taint.effect"),
        Column("TimeAdded", "string", added, api_doc(taint, "timeAdded")),
        age_column(),
    ]


def _claim_state(obj: Obj, now: datetime.datetime) -> Cell:
    states = []
    deleted = value_at(obj, "metadata.deletionTimestamp") is not None
    if deleted:
        states.append("deleted")
    if value_at(obj, "status.allocation") is None:
        if not deleted:
            states.append("pending")
    else:
        states.append("allocated")
        if list_at(obj, "status.reservedFor"):
            states.append("reserved")
    return ",".join(states)


def resourceclaim_columns() -> list[Column]:
    return [
        name_column(),
        Column(
            "State",
            "string",
            _claim_state,
            "A summary of the current state (allocated, pending, reserved, etc.).",
        ),
        age_column(),
    ]


def resourceslice_columns() -> list[Column]:
    spec = _RESOURCE + "ResourceSliceSpec"
    return [
        name_column(),
        field_column("Node", spec, "spec.nodeName"),
        field_column("Driver", spec, "spec.driver"),
        field_column("Pool", _RESOURCE + "ResourcePool", "spec.pool.name"),
        age_column(),
    ]
