"""What a Table's columns are made of: :class:`Column`, the cells' values read from an object
(fields, durations as kubectl prints them, labels and selectors, containers), and the columns
many kinds share (name, age, a field described as upstream's API docs describe it, a pod
template's containers).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubeloop.api import timestamps
from kubeloop.api.timestamps import parse_time
from kubeloop.apiserver.catalog import schemas

Obj = Mapping[str, Any]

Cell = str | int | float | bool | None

CellFn = Callable[[Obj, datetime.datetime], Cell]


def human_duration(seconds: float) -> str:
    """apimachinery ``duration.HumanDuration``: "5s", "3m2s", "15m", "5h3m", "2d3h", "40d", "3y20d"."""
    whole = int(seconds)  # truncates toward zero, like Go's int(d.Seconds())
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 60 * 2:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if rest == 0 else f"{hours // 24 // 365}y{rest}d"
    return f"{hours // 24 // 365}y"


def since_text(value: Any, now: datetime.datetime) -> str:
    """``translateTimestampSince``: "<unknown>" for a missing timestamp."""
    when = parse_time(value)
    if when is None:
        return "<unknown>"
    return human_duration((now - when).total_seconds())


def value_at(obj: Any, path: str, default: Any = None) -> Any:
    node = obj
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return default
        node = node.get(part)
        if node is None:
            return default
    return node


def text_at(obj: Obj, path: str, default: str = "") -> str:
    value = value_at(obj, path)
    return default if value is None else str(value)


def int_at(obj: Obj, path: str, default: int = 0) -> int:
    value = value_at(obj, path)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return default
    return default


def list_at(obj: Obj, path: str) -> list[Any]:
    value = value_at(obj, path)
    return list(value) if isinstance(value, list) else []


def map_at(obj: Obj, path: str) -> Mapping[str, Any]:
    value = value_at(obj, path)
    return value if isinstance(value, Mapping) else {}


def name_cell(obj: Obj, now: datetime.datetime) -> Cell:
    return text_at(obj, "metadata.name")


def age_cell(obj: Obj, now: datetime.datetime) -> Cell:
    return since_text(value_at(obj, "metadata.creationTimestamp"), now)


def format_labels(labels: Mapping[str, Any]) -> str:
    """``labels.FormatLabels``: sorted ``k=v`` pairs, ``<none>`` when empty."""
    text = ",".join(f"{key}={labels[key]}" for key in sorted(labels))
    return text or "<none>"


def format_label_selector(selector: Any) -> str:
    """``metav1.LabelSelectorAsSelector(selector).String()`` ("" for a nil or empty selector)."""
    if not isinstance(selector, Mapping):
        return ""
    requirements: list[tuple[str, str]] = []
    match_labels = selector.get("matchLabels")
    if isinstance(match_labels, Mapping):
        requirements.extend((str(k), f"{k}={v}") for k, v in match_labels.items())
    for expression in selector.get("matchExpressions") or ():
        if not isinstance(expression, Mapping):
            continue
        key = str(expression.get("key", ""))
        operator = expression.get("operator")
        values = ",".join(sorted(str(v) for v in expression.get("values") or ()))
        if operator == "In":
            requirements.append((key, f"{key} in ({values})"))
        elif operator == "NotIn":
            requirements.append((key, f"{key} notin ({values})"))
        elif operator == "Exists":
            requirements.append((key, key))
        elif operator == "DoesNotExist":
            requirements.append((key, f"!{key}"))
        else:
            return "<error>"
    return ",".join(text for _key, text in sorted(requirements, key=lambda r: r[0]))


def selector_or_none(selector: Any) -> str:
    """``metav1.FormatLabelSelector``."""
    return format_label_selector(selector) or "<none>"


def container_cells(obj: Obj, path: str) -> tuple[str, str]:
    """``layoutContainerCells``: comma-separated container names and images."""
    containers = [c for c in list_at(obj, path) if isinstance(c, Mapping)]
    return (
        ",".join(str(c.get("name") or "") for c in containers),
        ",".join(str(c.get("image") or "") for c in containers),
    )


def bool_ptr(value: Any) -> str:
    """``printBoolPtr``."""
    if value is None:
        return "<unset>"
    return "True" if value else "False"


def has_condition(obj: Obj, path: str, kind: str) -> bool:
    for condition in list_at(obj, path):
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition.get("status") == "True"
    return False


def terminated_at(status: Mapping[str, Any]) -> datetime.datetime | None:
    return parse_time(value_at(status, "lastState.terminated.finishedAt"))


def later_of(a: datetime.datetime | None, b: datetime.datetime | None) -> datetime.datetime | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def restartable_init(container: Any) -> bool:
    return isinstance(container, Mapping) and container.get("restartPolicy") == "Always"


def _created_at(obj: Obj, now: datetime.datetime) -> Cell:
    when = parse_time(value_at(obj, "metadata.creationTimestamp"))
    if when is None:
        return "0001-01-01T00:00:00Z"
    return timestamps.format_time(when)


@dataclass(frozen=True)
class Column:
    """One TableColumnDefinition and how to compute its cell."""

    name: str
    type: str
    cell: CellFn
    description: str = ""
    priority: int = 0
    format: str = ""

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


def api_doc(definition: str, field: str) -> str:
    """The description upstream's printers take from the API types' SwaggerDoc."""
    node = schemas.definitions().get(definition) or {}
    props = node.get("properties") or {}
    prop = props.get(field) or {}
    return str(prop.get("description") or "")


OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

CORE = "io.k8s.api.core.v1."

APPS = "io.k8s.api.apps.v1."

BATCH = "io.k8s.api.batch.v1."

TEMPLATE_NAMES = "Names of each container in the template."

TEMPLATE_IMAGES = "Images referenced by each container in the template."

READY_PODS = "Number of the pod with ready state"


def name_column() -> Column:
    return Column("Name", "string", name_cell, api_doc(OBJECT_META, "name"), format="name")


def age_column(kind: str = "string") -> Column:
    return Column("Age", kind, age_cell, api_doc(OBJECT_META, "creationTimestamp"))


def field_column(
    title: str,
    definition: str,
    path: str,
    type: str = "string",
    priority: int = 0,
    *,
    default: str = "",
    cell: CellFn | None = None,
) -> Column:
    """A column showing the field at ``path`` (as text, or as a number for ``"integer"``; ``default``
    when it is absent), described as upstream's API docs describe that field of ``definition``."""
    if cell is None:
        if type == "integer":

            def cell(obj: Obj, now: datetime.datetime) -> Cell:
                return int_at(obj, path)
        else:

            def cell(obj: Obj, now: datetime.datetime) -> Cell:
                return text_at(obj, path, default)

    return Column(title, type, cell, api_doc(definition, path.rsplit(".", 1)[-1]), priority)


def template_columns(path: str, selector: str | None, selector_doc: str = "") -> list[Column]:
    columns = [
        Column("Containers", "string", lambda o, n: container_cells(o, path)[0], TEMPLATE_NAMES, 1),
        Column("Images", "string", lambda o, n: container_cells(o, path)[1], TEMPLATE_IMAGES, 1),
    ]
    if selector is not None:
        columns.append(
            Column(
                "Selector", "string", lambda o, n: selector_or_none(value_at(o, selector)), selector_doc, 1
            )
        )
    return columns


def ready_of(desired_default: int) -> CellFn:
    return lambda o, n: f"{int_at(o, 'status.readyReplicas')}/{int_at(o, 'spec.replicas', desired_default)}"


def generic_columns() -> list[Column]:
    """apiserver's default table convertor (kinds without a printer, e.g. Role)."""
    return [
        name_column(),
        Column("Created At", "date", _created_at, api_doc(OBJECT_META, "creationTimestamp")),
    ]


def default_columns() -> list[Column]:
    """A custom resource without additionalPrinterColumns."""
    return [name_column(), age_column("date")]


def storage_class_name(obj: Obj, now: datetime.datetime) -> Cell:
    default = map_at(obj, "metadata.annotations").get("storageclass.kubernetes.io/is-default-class") == "true"
    return text_at(obj, "metadata.name") + (" (default)" if default else "")


MORE = "{} + {} more..."


def with_more(items: Sequence[str], total: int, limit: int = 3) -> str:
    """``listWithMoreString``: the first ``limit`` items, ``<unset>`` when there are none."""
    text = ",".join(items[:limit])
    if total > limit:
        return MORE.format(text, total - limit)
    return text or "<unset>"


def count_column(title: str, path: str, description: str) -> Column:
    return Column(title, "integer", lambda o, n: len(list_at(o, path)), description)


def name_and_age() -> list[Column]:
    return [name_column(), age_column()]
