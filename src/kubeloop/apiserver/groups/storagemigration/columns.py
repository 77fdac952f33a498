"""storagemigration.k8s.io kinds' columns: StorageVersionMigrations."""

from __future__ import annotations

import datetime
from collections.abc import Mapping

from kubeloop.apiserver.printing.cells import (
    OBJECT_META,
    Cell,
    Column,
    Obj,
    api_doc,
    list_at,
    name_cell,
    text_at,
)


def _migration_status(obj: Obj, now: datetime.datetime) -> Cell:
    status = "Unknown"
    for condition in list_at(obj, "status.conditions"):
        if (
            isinstance(condition, Mapping)
            and condition.get("status") == "True"
            and condition.get("type") in ("Running", "Failed", "Succeeded")
        ):
            status = str(condition["type"])
    return status


def storageversionmigration_columns() -> list[Column]:
    def group_resource(obj: Obj, now: datetime.datetime) -> Cell:
        resource, group = text_at(obj, "spec.resource.resource"), text_at(obj, "spec.resource.group")
        return f"{resource}.{group}" if group else resource

    return [
        Column("Name", "string", name_cell, api_doc(OBJECT_META, "name")),
        Column("Resource", "string", group_resource, "GroupResource to migrate"),
        Column("Status", "string", _migration_status, "Status of the migration"),
    ]
