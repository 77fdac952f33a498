"""The causes of a 422, as apimachinery's ``field.ErrorList`` words them: ``required``,
``invalid`` (the value rendered as Go prints it), ``forbidden``, ``too_long``, ``duplicate``,
``not_supported``; the shared checks ``nonnegative`` and ``immutable``; and ``as_dict`` /
``as_list`` / ``as_text`` / ``is_int``, the lenient readers of a decoded body every rule uses.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from kubeloop.api.naming import go_quote
from kubeloop.errors import StatusCause

__all__ = [
    "DUPLICATE",
    "FORBIDDEN",
    "INVALID",
    "NEGATIVE",
    "NOT_FOUND",
    "NOT_SUPPORTED",
    "REQUIRED",
    "TOO_LONG",
    "GoStruct",
    "as_dict",
    "as_list",
    "as_text",
    "deduplicated",
    "duplicate",
    "forbidden",
    "go_number",
    "immutable",
    "invalid",
    "is_int",
    "nonnegative",
    "not_supported",
    "render",
    "required",
    "too_long",
]


# Cause types (metav1.CauseType values of field.ErrorType).
REQUIRED = "FieldValueRequired"


INVALID = "FieldValueInvalid"


FORBIDDEN = "FieldValueForbidden"


TOO_LONG = "FieldValueTooLong"


DUPLICATE = "FieldValueDuplicate"


NOT_SUPPORTED = "FieldValueNotSupported"


NOT_FOUND = "FieldValueNotFound"


NEGATIVE = "must be greater than or equal to 0"


class GoStruct(dict[str, Any]):
    """A Go struct's value in an error message: its fields in declaration order (a map's keys are
    sorted). Internal types have no JSON tags, so their fields print with Go's names."""


def _go_json(value: Any) -> str:
    """``json.Marshal`` as Go prints it in ``Invalid value: ...`` (maps sorted, HTML escaped)."""
    try:
        text = json.dumps(
            value,
            sort_keys=isinstance(value, dict) and not isinstance(value, GoStruct),
            separators=(",", ":"),
            ensure_ascii=False,
            default=str,
        )
    except (TypeError, ValueError):
        text = str(value)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def render(value: Any) -> str:
    """How ``field.Error.ErrorBody`` prints a bad value."""
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return go_number(value)
    return _go_json(value)


def go_number(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def required(path: str, detail: str = "") -> StatusCause:
    return StatusCause(REQUIRED, f"Required value: {detail}" if detail else "Required value", path)


def invalid(path: str, value: Any, detail: str) -> StatusCause:
    body = f"Invalid value: {render(value)}"
    return StatusCause(INVALID, f"{body}: {detail}" if detail else body, path)


def forbidden(path: str, detail: str) -> StatusCause:
    return StatusCause(FORBIDDEN, f"Forbidden: {detail}" if detail else "Forbidden", path)


def too_long(path: str, max_bytes: int) -> StatusCause:
    unit = "byte" if max_bytes == 1 else "bytes"
    return StatusCause(TOO_LONG, f"Too long: may not be more than {max_bytes} {unit}", path)


def duplicate(path: str, value: Any) -> StatusCause:
    return StatusCause(DUPLICATE, f"Duplicate value: {render(value)}", path)


def not_supported(path: str, value: Any, supported: Iterable[str]) -> StatusCause:
    allowed = ", ".join(go_quote(s) for s in supported)
    return StatusCause(
        NOT_SUPPORTED, f"Unsupported value: {render(value)}: supported values: {allowed}", path
    )


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def nonnegative(spec: Mapping[str, Any], name: str, path: str) -> list[StatusCause]:
    value = spec.get(name)
    if is_int(value) and value < 0:
        return [invalid(f"{path}.{name}", value, NEGATIVE)]
    return []


_IMMUTABLE = "field is immutable"


def immutable(path: str, new: Any, old: Any, shown: Any = None) -> list[StatusCause]:
    """``ValidateImmutableField``."""
    if new == old:
        return []
    return [invalid(path, new if shown is None else shown, _IMMUTABLE)]


def deduplicated(causes: Iterable[StatusCause]) -> list[StatusCause]:
    """The causes in order, each once (the schema's required fields and a kind's rules overlap)."""
    unique: list[StatusCause] = []
    seen: set[StatusCause] = set()
    for cause in causes:
        if cause not in seen:
            seen.add(cause)
            unique.append(cause)
    return unique
