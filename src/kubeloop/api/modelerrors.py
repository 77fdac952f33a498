"""A model's validation errors as the API server words a schema's: field causes of a 422.

When an object does not fit its model (a webhook handed ``spec.keep: 99`` for a field of
``Field(le=30)``), pydantic's ``ValidationError`` is a Python traceback's language. The API server
would have refused the same object in its own words — ``spec.keep: Invalid value: 99: spec.keep
in body should be less than or equal to 30`` — and so should anything that answers a client for
the operator. ``invalid_object`` turns the error into that 422 (``errors.Invalid`` with one
``StatusCause`` per field, paths in the object's JSON names), as apiextensions-apiserver's schema
validation words each check; ``field_causes`` gives the causes alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic

from kubeloop import errors
from kubeloop.api import fielderrors
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.errors import StatusCause

#: pydantic's error types of a value of the wrong JSON type, by the type the schema says.
_TYPES = {
    "int_type": "integer",
    "int_parsing": "integer",
    "int_from_float": "integer",
    "float_type": "number",
    "float_parsing": "number",
    "string_type": "string",
    "bool_type": "boolean",
    "bool_parsing": "boolean",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
    "list_type": "array",
    "tuple_type": "array",
    "set_type": "array",
}


def _path(location: tuple[int | str, ...]) -> str:
    """``("spec", "items", 0, "name")`` → ``spec.items[0].name``."""
    out = ""
    for part in location:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _cause(error: Mapping[str, Any]) -> StatusCause:
    path = _path(tuple(error.get("loc") or ()))
    kind = str(error.get("type", ""))
    value = error.get("input")
    context: Mapping[str, Any] = error.get("ctx") or {}
    bound = {key: fielderrors.render(context[key]) for key in context if key in ("le", "lt", "ge", "gt")}
    name = path or "body"
    if kind == "missing":
        return fielderrors.required(path)
    if kind in _TYPES:
        shown = fielderrors.json_type(value)
        return StatusCause(
            fielderrors.INVALID,
            f'Invalid value: "{shown}": {name} in body must be of type {_TYPES[kind]}: "{shown}"',
            path,
        )
    checks = {
        "less_than_equal": f"should be less than or equal to {bound.get('le')}",
        "less_than": f"should be less than {bound.get('lt')}",
        "greater_than_equal": f"should be greater than or equal to {bound.get('ge')}",
        "greater_than": f"should be greater than {bound.get('gt')}",
        "multiple_of": f"should be a multiple of {context.get('multiple_of')}",
        "string_too_short": f"should be at least {context.get('min_length')} chars long",
        "string_pattern_mismatch": f"should match '{context.get('pattern')}'",
        "too_short": f"should have at least {context.get('min_length')} items",
    }
    if kind in checks:
        return fielderrors.invalid(path, value, f"{name} in body {checks[kind]}")
    if kind == "string_too_long":
        return fielderrors.too_long(path, int(context.get("max_length", 0)))
    if kind == "too_long":
        count = len(value) if isinstance(value, (list, tuple, dict, set)) else context.get("actual_length")
        return StatusCause(
            "FieldValueTooMany",
            f"Too many: {count}: must have at most {context.get('max_length')} items",
            path,
        )
    if kind in ("literal_error", "enum"):
        expected = str(context.get("expected", ""))
        supported = [
            part.strip().strip("'\"") for part in expected.replace(" or ", ",").split(",") if part.strip()
        ]
        return fielderrors.not_supported(path, value, supported)
    if kind == "extra_forbidden":
        return StatusCause("FieldValueInvalid", f'unknown field "{path}"', path)
    # A validator of the model's own (value_error, assertion_error) or any other check: its message.
    message = (
        str(error.get("msg", "is invalid")).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    )
    return fielderrors.invalid(path, value, message)


def field_causes(error: pydantic.ValidationError) -> list[StatusCause]:
    """One cause per failed check, in pydantic's order, in the API server's words."""
    return [_cause(detail) for detail in error.errors(include_url=False)]


def invalid_object(data: Mapping[str, Any], error: pydantic.ValidationError) -> errors.Invalid:
    """The 422 for an object (``data``, as JSON) its model refused:
    ``Backup.example.com "nightly" is invalid: spec.keep: Invalid value: 99: ...``."""
    try:
        gvk = GroupVersionKind.of_object(data)
    except ValueError:
        gvk = GroupVersionKind("", "", "Object")
    metadata = data.get("metadata")
    name = str(metadata.get("name") or "") if isinstance(metadata, Mapping) else ""
    return errors.invalid(gvk.group, gvk.kind, name, field_causes(error))
