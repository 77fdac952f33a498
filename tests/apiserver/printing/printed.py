"""The Tables the server answers for built-in kinds: the printing engine with each kind's printer,
as its API group declares it."""

from __future__ import annotations

from typing import Any

from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.groups import builtin_strategy
from kubeloop.apiserver.printing import tables
from kubeloop.apiserver.printing.cells import Column


def to_table(resource: ResourceType, objects: list[Any], **options: Any) -> dict[str, Any]:
    """The Table of ``objects`` of a built-in kind."""
    return tables.to_table(resource, objects, printer=builtin_strategy(resource).printer, **options)


def columns_for(resource: ResourceType) -> list[Column]:
    """A built-in kind's columns."""
    return tables.columns_for(resource, builtin_strategy(resource).printer)
