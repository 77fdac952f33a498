"""The patch a defaulter's answer carries: applied by the server's own RFC 6902 code, it turns the
object the server sent into the one the defaulter made, for any JSON."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kubeloop.apiserver.patch.jsonpatch import apply_json_patch
from kubeloop.webhook.jsonpatchdiff import create_patch

keys = st.text(alphabet="ab/~0", min_size=0, max_size=3)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=3)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=20,
)
objects = st.dictionaries(keys, json_values, max_size=5)


@given(objects, objects)
def test_the_patch_turns_the_original_into_the_current(
    original: dict[str, Any], current: dict[str, Any]
) -> None:
    patch = create_patch(original, current)
    assert apply_json_patch(copy.deepcopy(original), patch) == current


@given(objects)
def test_an_unchanged_object_needs_no_patch(original: dict[str, Any]) -> None:
    assert create_patch(original, copy.deepcopy(original)) == []


def test_appended_items_are_added_and_keys_are_escaped() -> None:
    original = {"metadata": {"labels": {"a/b": "1"}}, "spec": {"ports": [80]}}
    current = {"metadata": {"labels": {"a/b": "2", "c~d": "3"}}, "spec": {"ports": [80, 443]}}
    assert create_patch(original, current) == [
        {"op": "replace", "path": "/metadata/labels/a~1b", "value": "2"},
        {"op": "add", "path": "/metadata/labels/c~0d", "value": "3"},
        {"op": "add", "path": "/spec/ports/1", "value": 443},
    ]


def test_true_is_not_one() -> None:
    assert create_patch({"x": 1}, {"x": True}) == [{"op": "replace", "path": "/x", "value": True}]
