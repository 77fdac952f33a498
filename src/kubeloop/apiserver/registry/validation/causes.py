"""The causes of a 422: apimachinery's ``field`` errors (``required``, ``invalid``, ``forbidden``,
``too_long``, ``duplicate``, ``not_supported``, from ``kubeloop.api.fielderrors``, which webhooks
use too); the shared checks ``nonnegative`` and ``immutable``; and ``as_dict`` /
``as_list`` / ``as_text`` / ``is_int``, the lenient readers of a decoded body every rule uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from kubeloop.api.fielderrors import (
    DUPLICATE,
    FORBIDDEN,
    INVALID,
    NOT_FOUND,
    NOT_SUPPORTED,
    REQUIRED,
    TOO_LONG,
    GoStruct,
    duplicate,
    forbidden,
    go_number,
    invalid,
    not_supported,
    render,
    required,
    too_long,
)
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


NEGATIVE = "must be greater than or equal to 0"


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
