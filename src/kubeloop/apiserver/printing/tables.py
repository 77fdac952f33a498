"""Server-side printing for ``kubectl get``: meta.k8s.io/v1 Tables with upstream's columns.

Columns and cells follow kube-apiserver's printers (kubernetes ``pkg/printers/internalversion``),
which the server always runs in wide mode: the ``priority: 1`` columns are in every row and
kubectl shows them only with ``-o wide``. Each built-in kind's :class:`KindPrinter` is declared
by its API group (``apiserver.groups``); kinds upstream has no printer for (Roles, LimitRanges,
CRDs) use the generic convertor (Name, Created At); custom resources without
``additionalPrinterColumns`` get Name and Age. Ages are rendered like apimachinery's
``duration.HumanDuration``.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

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

META_API_VERSION = "meta.k8s.io/v1"

#: A row's conditions (``kubectl get`` greys out rows whose Completed condition is true).
RowConditions = Callable[[Obj], list[Obj] | None]
#: The form a kind's columns read, from the served one.
PrintedForm = Callable[[Obj], Obj]


@dataclass(frozen=True)
class KindPrinter:
    """How a built-in kind is printed (upstream's printer handler for it): its columns, the form
    they read when it is not the served one (core Events for events.k8s.io, autoscaling/v2 for
    v1 HorizontalPodAutoscalers, as upstream prints the internal version) and a row's
    conditions."""

    columns: Callable[[], list[Column]]
    printed_form: PrintedForm | None = None
    row_conditions: RowConditions | None = None


#: Each column set built, by the function that builds it.
_built: dict[Callable[[], list[Column]], list[Column]] = {}


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
            return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        if column.type == "boolean":
            return value if isinstance(value, bool) else None
        if isinstance(value, (dict, list)):
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


def columns_for(resource: ResourceType, printer: KindPrinter | None = None) -> list[Column]:
    """The columns of a resource's Table: its printer's (built once), a CRD's declared ones, Name
    and Age for a CRD that declares none, Name and Created At for a built-in kind without a
    printer (apiserver's default table convertor)."""
    if resource.printer_columns is not None:
        return _custom_columns(resource)
    if printer is None:
        make = default_columns if resource.definition else generic_columns
    else:
        make = printer.columns
    columns = _built.get(make)
    if columns is None:
        columns = _built[make] = make()
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


def _row(
    printer: KindPrinter | None, columns: Sequence[Column], obj: Obj, include_object: str, now: datetime.datetime
) -> dict[str, Any]:
    view = obj if printer is None or printer.printed_form is None else printer.printed_form(obj)
    row: dict[str, Any] = {"cells": [column.cell(view, now) for column in columns]}
    if printer is not None and printer.row_conditions is not None:
        conditions = printer.row_conditions(obj)
        if conditions is not None:
            row["conditions"] = conditions
    if include_object == "Metadata":
        row["object"] = partial_object_metadata(obj)
    elif include_object == "Object":
        row["object"] = obj
    return row


def to_table(
    resource: ResourceType,
    objects: Sequence[Obj],
    *,
    printer: KindPrinter | None = None,
    include_object: str = "Metadata",
    resource_version: str = "",
    continue_token: str = "",
    now: datetime.datetime | None = None,
    remaining_item_count: int | None = None,
) -> dict[str, Any]:
    """A meta.k8s.io/v1 Table of ``objects``.

    ``printer``: the kind's (its strategy's); None for custom resources and built-in kinds
    without one. ``include_object`` is the ``includeObject`` parameter: ``Metadata`` (the default; each row
    carries a PartialObjectMetadata), ``Object`` (the full object) or ``None`` (no object). Without
    a ``resource_version``, a one-object table (GET, watch events) takes the object's.
    """
    now = now or datetime.datetime.now(datetime.UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=datetime.UTC)
    columns = columns_for(resource, printer)
    if not resource_version and len(objects) == 1:
        resource_version = text_at(objects[0], "metadata.resourceVersion")
    return {
        "kind": "Table",
        "apiVersion": META_API_VERSION,
        "metadata": _list_meta(resource_version, continue_token, remaining_item_count),
        "columnDefinitions": [column.definition() for column in columns],
        "rows": [_row(printer, columns, obj, include_object, now) for obj in objects],
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
