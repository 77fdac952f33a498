"""Field errors, as apimachinery's ``field.ErrorList`` words them (``k8s.io/apimachinery/pkg/util/
validation/field``): each is a ``StatusCause`` — its type, the message with the bad value rendered
as Go prints it, and the field's path — which a 422 carries in ``details.causes``. The embedded
server's validation and an operator's validating webhooks both build their denials from these::

    raise kubeloop.webhook.invalid(website, kubeloop.field.invalid("spec.replicas", 0, "must be at least 1"))
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from kubeloop.api.naming import go_quote
from kubeloop.errors import StatusCause

__all__ = [
    "DUPLICATE",
    "FORBIDDEN",
    "INVALID",
    "NOT_FOUND",
    "NOT_SUPPORTED",
    "REQUIRED",
    "TOO_LONG",
    "GoStruct",
    "duplicate",
    "forbidden",
    "go_number",
    "go_type",
    "invalid",
    "json_type",
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


class GoStruct(dict[str, Any]):
    """A Go struct's value in an error message: its fields in declaration order (a map's keys are
    sorted). Internal types have no JSON tags, so their fields print with Go's names."""


def go_json(value: Any) -> str:
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
    if isinstance(value, (int, float)):
        return go_number(value)
    return go_json(value)


def go_number(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def go_type(value: Any) -> str:
    """The Go type ``encoding/json`` decodes a JSON value into, as ``%T`` prints it (what
    upstream's messages about a value of the wrong type name)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, dict):
        return "map[string]interface {}"
    return "<nil>"


def json_type(value: Any) -> str:
    """A decoded JSON value's type as the API server names it in a type error (a whole number
    is an integer, whichever way it was written)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


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
