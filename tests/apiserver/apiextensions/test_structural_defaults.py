"""Defaulting a custom resource by its structural schema: what it fills and drops, and that it
changes only the caller's top-level object: a container below it that a default changes is
copied first, so an object sharing parts with a stored one never changes the stored one."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.apiserver.apiextensions import structural

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "size": {"type": "integer", "default": 1},
                "color": {"type": "string"},  # not nullable, no default: a null is dropped
                "note": {"type": "string", "nullable": True, "default": "n"},  # a null stays
                "limits": {
                    "type": "object",
                    "default": {},
                    "properties": {"cpu": {"type": "string", "default": "1"}},
                },
                "ports": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "protocol": {"type": "string", "default": "TCP"},
                            "port": {"type": "integer"},
                        },
                    },
                },
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},  # nothing below
                "labels": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "properties": {"value": {"type": "string", "default": "x"}},
                    },
                },
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string", "default": "Pending"}}},
    },
}
NODE = structural.compile_schema(SCHEMA, "spec.validation.openAPIV3Schema")

_names = st.sampled_from(
    [
        *("spec", "status", "size", "color", "note", "limits", "cpu", "ports", "protocol", "port"),
        *("free", "labels", "value", "phase", "other"),
    ]
)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=3))
_json = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_names, children, max_size=4),
    max_leaves=25,
)
_objects = st.dictionaries(_names, _json, max_size=4)


def defaulted_in_place(value: Any, node: structural.Node) -> None:
    """The reference: every container changed in place (what ``default`` did before it copied
    on write), applied here to a deep copy."""
    if isinstance(value, dict):
        for key, sub in node.properties.items():
            current = value.get(key, structural._MISSING)
            if current is None and not sub.nullable:
                if sub.has_default:
                    value[key] = copy.deepcopy(sub.default)
                else:
                    del value[key]
            elif current is structural._MISSING and sub.has_default:
                value[key] = copy.deepcopy(sub.default)
        for key, item in value.items():
            child = node.properties.get(key) or node.additional
            if child is not None and item is not None:
                defaulted_in_place(item, child)
    elif isinstance(value, list) and node.items is not None:
        for item in value:
            if item is not None:
                defaulted_in_place(item, node.items)


@settings(max_examples=400, deadline=None)
@given(stored=_objects)
def test_defaults_fill_as_in_place_and_change_nothing_below_the_callers_object(stored: dict[str, Any]) -> None:
    before = copy.deepcopy(stored)
    expected = copy.deepcopy(stored)
    defaulted_in_place(expected, NODE)

    written = dict(stored)  # a new version's top level, its members shared with the stored one
    structural.default(written, NODE)

    assert written == expected
    assert stored == before  # nothing shared was changed
    for key, member in written.items():
        if isinstance(member, dict | list) and member != before.get(key, structural._MISSING):
            assert member is not stored.get(key)  # what changed is a copy


def test_a_status_write_defaulted_by_a_newer_schema_leaves_the_stored_spec_alone() -> None:
    # The stored object was written under a schema without spec defaults; a /status write keeps
    # its spec (shared, not copied) and is defaulted by the schema as it is now.
    stored = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"ports": [{"port": 80}], "labels": {"a": {}}},
        "status": {"phase": "Running"},
    }
    before = copy.deepcopy(stored)
    written = {**stored, "metadata": dict(stored["metadata"]), "status": {"phase": "Done"}}

    structural.default(written, NODE)

    assert written["spec"] == {
        "ports": [{"port": 80, "protocol": "TCP"}],
        "labels": {"a": {"value": "x"}},
        "size": 1,
        "note": "n",
        "limits": {"cpu": "1"},
    }
    assert stored == before
    assert written["spec"]["ports"] is not stored["spec"]["ports"]


def test_an_object_without_anything_to_default_is_not_copied() -> None:
    spec = {"size": 2, "note": None, "limits": {"cpu": "2"}, "ports": [{"port": 1, "protocol": "UDP"}]}
    written = {"spec": spec, "status": {"phase": "Done"}}
    structural.default(written, NODE)
    assert written["spec"] is spec and written["spec"]["ports"] is spec["ports"]
    assert written == {
        "spec": {"size": 2, "note": None, "limits": {"cpu": "2"}, "ports": [{"port": 1, "protocol": "UDP"}]},
        "status": {"phase": "Done"},
    }


def test_a_default_put_in_place_of_a_null_is_defaulted_itself_and_keeps_its_place() -> None:
    """A null a property may not hold becomes its default where it was (key order is what the
    object is written with), and that default's own defaults are filled; a null with no default
    goes; a nullable one stays; defaults for absent fields come after."""
    written = {"spec": {"limits": None, "color": None, "note": None, "port": 1}}
    structural.default(written, NODE)
    assert list(written["spec"].items()) == [
        ("limits", {"cpu": "1"}),
        ("note", None),
        ("port", 1),
        ("size", 1),
    ]
