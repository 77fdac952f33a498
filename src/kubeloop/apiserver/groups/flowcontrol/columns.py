"""flowcontrol.apiserver.k8s.io kinds' columns: FlowSchemas and PriorityLevelConfigurations."""

from __future__ import annotations

import datetime
from collections.abc import Mapping

from kubeloop.apiserver.printing.cells import (
    Cell,
    CellFn,
    Column,
    Obj,
    age_column,
    api_doc,
    field_column,
    int_at,
    list_at,
    name_column,
    text_at,
    value_at,
)

_FLOWCONTROL = "io.k8s.api.flowcontrol.v1."


def _dangling(obj: Obj, now: datetime.datetime) -> Cell:
    for condition in list_at(obj, "status.conditions"):
        if isinstance(condition, Mapping) and condition.get("type") == "Dangling":
            return str(condition.get("status", ""))
    return "?"


def flowschema_columns() -> list[Column]:
    spec = _FLOWCONTROL + "FlowSchemaSpec"
    return [
        name_column(),
        field_column(
            "PriorityLevel",
            _FLOWCONTROL + "PriorityLevelConfigurationReference",
            "spec.priorityLevelConfiguration.name",
        ),
        Column(
            "MatchingPrecedence",
            "string",
            lambda o, n: int_at(o, "spec.matchingPrecedence"),
            api_doc(spec, "matchingPrecedence"),
        ),
        Column(
            "DistinguisherMethod",
            "string",
            lambda o, n: text_at(o, "spec.distinguisherMethod.type") or "<none>",
            api_doc(spec, "distinguisherMethod"),
        ),
        age_column(),
        Column(
            "MissingPL", "string", _dangling, "references a broken or non-existent PriorityLevelConfiguration"
        ),
    ]


def _limited(path: str) -> CellFn:
    def cell(obj: Obj, now: datetime.datetime) -> Cell:
        value = value_at(obj, path)
        return "<none>" if value is None else int_at(obj, path)

    return cell


def prioritylevel_columns() -> list[Column]:
    queuing = _FLOWCONTROL + "QueuingConfiguration"
    base = "spec.limited.limitResponse.queuing."
    return [
        name_column(),
        field_column("Type", _FLOWCONTROL + "PriorityLevelConfigurationSpec", "spec.type"),
        Column(
            "NominalConcurrencyShares",
            "string",
            _limited("spec.limited.nominalConcurrencyShares"),
            api_doc(_FLOWCONTROL + "LimitedPriorityLevelConfiguration", "nominalConcurrencyShares"),
        ),
        Column("Queues", "string", _limited(base + "queues"), api_doc(queuing, "queues")),
        Column("HandSize", "string", _limited(base + "handSize"), api_doc(queuing, "handSize")),
        Column(
            "QueueLengthLimit",
            "string",
            _limited(base + "queueLengthLimit"),
            api_doc(queuing, "queueLengthLimit"),
        ),
        age_column(),
    ]
