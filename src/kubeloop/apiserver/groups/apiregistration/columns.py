"""apiregistration.k8s.io kinds' columns: APIServices."""

from __future__ import annotations

import datetime
from collections.abc import Mapping

from kubeloop.apiserver.printing.cells import (
    Cell,
    Column,
    Obj,
    age_column,
    list_at,
    map_at,
    name_column,
    text_at,
)


def _apiservice_available(obj: Obj, now: datetime.datetime) -> Cell:
    for condition in list_at(obj, "status.conditions"):
        if isinstance(condition, Mapping) and condition.get("type") == "Available":
            status = str(condition.get("status", ""))
            if status == "True":
                return "True"
            return f"{status} ({condition['reason']})" if condition.get("reason") else status
    return "Unknown"


def apiservice_columns() -> list[Column]:
    return [
        name_column(),
        Column(
            "Service",
            "string",
            lambda o, n: (
                f"{text_at(o, 'spec.service.namespace')}/{text_at(o, 'spec.service.name')}"
                if map_at(o, "spec.service")
                else "Local"
            ),
            "The reference to the service that hosts this API endpoint.",
        ),
        Column("Available", "string", _apiservice_available, "Whether this service is available."),
        age_column(),
    ]
