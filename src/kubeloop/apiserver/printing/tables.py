"""Server-side printing for ``kubectl get``: meta.k8s.io/v1 Tables with upstream's columns.

Columns and cells follow kube-apiserver's printers (kubernetes ``pkg/printers/internalversion``),
which the server always runs in wide mode: the ``priority: 1`` columns are in every row and
kubectl shows them only with ``-o wide``. Built-in kinds upstream has no printer for (Roles,
LimitRanges, CRDs) use the generic convertor (Name, Created At); custom resources without
``additionalPrinterColumns`` get Name and Age. Objects are printed in the form upstream's
printers read (core Events, autoscaling/v2 HorizontalPodAutoscalers). Ages are rendered like apimachinery's ``duration.HumanDuration``.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from kubeloop.apiserver.catalog import hpaconversion
from kubeloop.apiserver.catalog.resources import PrinterColumn, ResourceType
from kubeloop.apiserver.printing import jsonpath
from kubeloop.apiserver.printing.cells import (
    Cell,
    CellFn,
    Column,
    Obj,
    age_column,
    default_columns,
    generic_columns,
    name_column,
    since_text,
    text_at,
)
from kubeloop.apiserver.printing.columns import (
    admissionregistration,
    apiextensions,
    apiregistration,
    apps,
    autoscaling,
    batch,
    certificates,
    coordination,
    core,
    discovery,
    events,
    flowcontrol,
    networking,
    node,
    policy,
    rbac,
    resource,
    scheduling,
    storage,
    storagemigration,
)
from kubeloop.apiserver.printing.columns.core import (
    POD_CONDITIONS,
    core_event,
    last_summary,
)

META_API_VERSION = "meta.k8s.io/v1"

#: Custom resources without printer columns: Name and Age.
_DEFAULT_KEY = ("*", "*")

#: Built-in kinds without a printer: apiserver's default table convertor.
_BUILTIN_DEFAULT_KEY = ("*", "builtin")

_COLUMN_SETS: dict[tuple[str, str], Callable[[], list[Column]]] = {
    **admissionregistration.COLUMN_SETS,
    **apiextensions.COLUMN_SETS,
    **apiregistration.COLUMN_SETS,
    **apps.COLUMN_SETS,
    **autoscaling.COLUMN_SETS,
    **batch.COLUMN_SETS,
    **certificates.COLUMN_SETS,
    **coordination.COLUMN_SETS,
    **core.COLUMN_SETS,
    **discovery.COLUMN_SETS,
    **events.COLUMN_SETS,
    **flowcontrol.COLUMN_SETS,
    **networking.COLUMN_SETS,
    **node.COLUMN_SETS,
    **policy.COLUMN_SETS,
    **rbac.COLUMN_SETS,
    **resource.COLUMN_SETS,
    **scheduling.COLUMN_SETS,
    **storage.COLUMN_SETS,
    **storagemigration.COLUMN_SETS,
    _BUILTIN_DEFAULT_KEY: generic_columns,
}

_column_cache: dict[tuple[str, str], list[Column]] = {}


def _custom_cell(column: PrinterColumn) -> CellFn:
    """A cell of a CRD's column: the first value its JSONPath finds, by the column's type."""
    try:
        steps = jsonpath.compile_path(column.json_path)
    except jsonpath.JSONPathError:
        steps = None

    def cell(obj: Obj, now: datetime.datetime) -> Cell:
        if steps is None:
            return None
        values = jsonpath.find(obj, steps)
        if not values:
            return None
        value = values[0]
        if column.type == "date":
            return since_text(value, now) if isinstance(value, str) else None
        if column.type == "integer":
            return value if isinstance(value, int) and not isinstance(value, bool) else None
        if column.type == "number":
            return value if isinstance(value, int | float) and not isinstance(value, bool) else None
        if column.type == "boolean":
            return value if isinstance(value, bool) else None
        if isinstance(value, dict | list):
            return orjson.dumps(value).decode()
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return cell


def _custom_columns(resource: ResourceType) -> list[Column]:
    """NAME and the CRD's additionalPrinterColumns (NAME and AGE when it declares none)."""
    declared = resource.printer_columns or ()
    if not declared:
        return [name_column(), age_column("date")]
    return [
        name_column(),
        *(Column(c.name, c.type, _custom_cell(c), c.description, c.priority, c.format) for c in declared),
    ]


def columns_for(resource: ResourceType) -> list[Column]:
    """The columns of a resource's Table (built once per kind of printer)."""
    if resource.printer_columns is not None:
        return _custom_columns(resource)
    key = (resource.group, resource.plural)
    if key not in _COLUMN_SETS:
        key = _DEFAULT_KEY if resource.definition else _BUILTIN_DEFAULT_KEY
    columns = _column_cache.get(key)
    if columns is None:
        columns = _column_cache[key] = _COLUMN_SETS.get(key, default_columns)()
    return columns


def partial_object_metadata(obj: Obj) -> dict[str, Any]:
    """meta.k8s.io/v1 PartialObjectMetadata of an object."""
    metadata = obj.get("metadata")
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": META_API_VERSION,
        "metadata": dict(metadata) if isinstance(metadata, Mapping) else {},
    }


def _list_meta(
    resource_version: str, continue_token: str, remaining_item_count: int | None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    if continue_token:
        metadata["continue"] = continue_token
    if remaining_item_count is not None:
        metadata["remainingItemCount"] = remaining_item_count
    return metadata


def _printed_form(resource: ResourceType, obj: Obj) -> Obj:
    """The form a kind's printer reads, as upstream prints the internal version: core Events,
    autoscaling/v2 HorizontalPodAutoscalers."""
    if resource.plural == "events":
        return core_event(obj)
    if (
        resource.plural == "horizontalpodautoscalers"
        and obj.get("apiVersion") == hpaconversion.V1_API_VERSION
    ):
        return hpaconversion.v1_to_v2(obj)
    return obj


def _row(
    resource: ResourceType, columns: Sequence[Column], obj: Obj, include_object: str, now: datetime.datetime
) -> dict[str, Any]:
    view = _printed_form(resource, obj)
    row: dict[str, Any] = {"cells": [column.cell(view, now) for column in columns]}
    last_summary.clear()
    if resource.group == "" and resource.plural == "pods":
        phase = text_at(obj, "status.phase")
        if phase in POD_CONDITIONS:
            row["conditions"] = [
                {"type": "Completed", "status": "True", "reason": phase, "message": POD_CONDITIONS[phase]}
            ]
    if include_object == "Metadata":
        row["object"] = partial_object_metadata(obj)
    elif include_object == "Object":
        row["object"] = obj
    return row


def to_table(
    resource: ResourceType,
    objects: Sequence[Obj],
    *,
    include_object: str = "Metadata",
    resource_version: str = "",
    continue_token: str = "",
    now: datetime.datetime | None = None,
    remaining_item_count: int | None = None,
) -> dict[str, Any]:
    """A meta.k8s.io/v1 Table of ``objects``.

    ``include_object`` is the ``includeObject`` parameter: ``Metadata`` (the default; each row
    carries a PartialObjectMetadata), ``Object`` (the full object) or ``None`` (no object). Without
    a ``resource_version``, a one-object table (GET, watch events) takes the object's.
    """
    now = now or datetime.datetime.now(datetime.UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=datetime.UTC)
    columns = columns_for(resource)
    if not resource_version and len(objects) == 1:
        resource_version = text_at(objects[0], "metadata.resourceVersion")
    return {
        "kind": "Table",
        "apiVersion": META_API_VERSION,
        "metadata": _list_meta(resource_version, continue_token, remaining_item_count),
        "columnDefinitions": [column.definition() for column in columns],
        "rows": [_row(resource, columns, obj, include_object, now) for obj in objects],
    }


def to_partial_object_metadata_list(
    resource: ResourceType,
    objects: Sequence[Obj],
    resource_version: str,
    continue_token: str,
    remaining_item_count: int | None = None,
) -> dict[str, Any]:
    """meta.k8s.io/v1 PartialObjectMetadataList (``as=PartialObjectMetadataList``)."""
    return {
        "kind": "PartialObjectMetadataList",
        "apiVersion": META_API_VERSION,
        "metadata": _list_meta(resource_version, continue_token, remaining_item_count),
        "items": [partial_object_metadata(obj) for obj in objects],
    }
