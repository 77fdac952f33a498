"""Structural validation's shortcuts: a scalar of a node that checks nothing beyond its type is
passed over without a call, an object of an object node goes straight to its members; every
other value gets the full check."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.apiserver.apiextensions import structural

_SCALAR_TYPES = ["string", "integer", "number", "boolean"]

#: Constraints a scalar node may carry, each with a value for it.
_CONSTRAINTS: dict[str, st.SearchStrategy[Any]] = {
    "maximum": st.integers(-5, 5),
    "minimum": st.integers(-5, 5),
    "multipleOf": st.sampled_from([2, 3, 0.5]),
    "maxLength": st.integers(0, 4),
    "minLength": st.integers(0, 4),
    "pattern": st.sampled_from(["^a", "b$", "[0-9]"]),
    "format": st.sampled_from(["int32", "int64", "date-time", "uuid", "byte"]),
    "enum": st.lists(st.sampled_from([1, "a", True, 2.5, "b"]), min_size=1, max_size=3, unique=True),
}


def _scalar_schemas(constraint: str) -> st.SearchStrategy[dict[str, Any]]:
    """Scalar schemas of every type with ``constraint`` (and maybe nullable)."""

    @st.composite
    def schemas(draw: st.DrawFn) -> dict[str, Any]:
        kind = draw(st.sampled_from([*_SCALAR_TYPES, "int-or-string"]))
        schema: dict[str, Any] = {"x-kubernetes-int-or-string": True} if kind == "int-or-string" else {"type": kind}
        if draw(st.booleans()):
            schema["nullable"] = True
        if constraint in _CONSTRAINTS:
            schema[constraint] = draw(_CONSTRAINTS[constraint])
        return schema

    return schemas()


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from([1.0, 4.0, -3.0]),
    st.text(max_size=6),
    st.sampled_from(["a1", "ab", "2024-01-01T00:00:00Z", "aGk=", "b", "a"]),
    st.just({}),
    st.just([1]),
)


def _without_shortcut(node: structural.Node | None) -> structural.Node | None:
    """``node`` and the nodes below it, every value given the full check."""
    if node is None:
        return None
    return dataclasses.replace(
        node,
        plain_scalars=frozenset(),
        plain_object=False,
        properties={key: _without_shortcut(child) for key, child in node.properties.items()},  # type: ignore[misc]
        additional=_without_shortcut(node.additional),
        items=_without_shortcut(node.items),
    )


@pytest.mark.parametrize("constraint", [*sorted(_CONSTRAINTS), "none"])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_the_plain_scalar_shortcut_finds_what_the_full_check_finds(constraint: str, data: st.DataObject) -> None:
    """A scalar schema of each type with each constraint (or none), as a struct's field, a
    map's values and a list's items: the causes are those of the full check of every value."""
    scalar = data.draw(_scalar_schemas(constraint))
    fields = data.draw(st.dictionaries(st.sampled_from(["a", "b", "m"]), _values, min_size=1, max_size=3))
    items = data.draw(st.lists(_values, max_size=3))
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {"a": scalar, "b": scalar, "list": {"type": "array", "items": scalar}},
            },
            "map": {"type": "object", "additionalProperties": scalar},
        },
    }
    node = structural.compile_schema(schema, "spec.validation.openAPIV3Schema")
    body = {"spec": {**{k: v for k, v in fields.items() if k != "m"}, "list": items}, "map": fields}
    assert structural.validate(body, node) == structural.validate(body, _without_shortcut(node))  # type: ignore[arg-type]


_object_values = st.one_of(_values, st.just({"a": 1}), st.just({"a": "x", "b": {}}), st.just({"b": {"a": []}}))


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_plain_object_shortcut_finds_what_the_full_check_finds(data: st.DataObject) -> None:
    """Objects, scalars, lists and null given to object nodes (typed, untyped, nullable, with an
    enum), to scalar nodes and to int-or-string ones: the causes are those of the full check."""
    leaf = {"type": "object", "properties": {"a": {"type": "integer"}}}
    schema = {
        "type": "object",
        "properties": {
            "obj": {"type": "object", "properties": {"a": {"type": "string"}, "b": leaf}},
            "free": {"x-kubernetes-preserve-unknown-fields": True},
            "nullable": {**leaf, "nullable": True},
            "choice": {"type": "object", "enum": [{"a": 1}], "properties": {"a": {"type": "integer"}}},
            "size": {"type": "integer"},
            "port": {"x-kubernetes-int-or-string": True},
            "map": {"type": "object", "additionalProperties": leaf},
        },
    }
    node = structural.compile_schema(schema, "spec.validation.openAPIV3Schema")
    body = data.draw(
        st.dictionaries(
            st.sampled_from(["obj", "free", "nullable", "choice", "size", "port", "map"]),
            _object_values,
            max_size=7,
        )
    )
    assert structural.validate(body, node) == structural.validate(body, _without_shortcut(node))  # type: ignore[arg-type]
    assert node.plain_object and node.properties["obj"].plain_object
    assert not node.properties["choice"].plain_object and not node.properties["size"].plain_object


def test_a_plain_field_is_passed_over_and_a_constrained_one_is_not() -> None:
    """What the shortcut covers: by type alone, and only where the type is exact (a boolean is
    no integer, a whole float is left to the full check)."""
    node = structural.compile_schema(
        {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "size": {"type": "integer"},
                "ratio": {"type": "number"},
                "port": {"x-kubernetes-int-or-string": True},
                "short": {"type": "string", "maxLength": 3},
                "mode": {"type": "string", "enum": ["a"]},
            },
        },
        "schema",
    )
    plain = {key: child.plain_scalars for key, child in node.properties.items()}
    assert plain == {
        "name": {str},
        "size": {int},
        "ratio": {int, float},
        "port": {int, str},
        "short": set(),
        "mode": set(),
    }
    assert [cause.field for cause in structural.validate({"size": True, "short": "long", "mode": "b"}, node)] == [
        "size",
        "short",
        "mode",
    ]
