"""JSON Merge Patch (RFC 7386): the RFC's examples, the two-way diff, and properties."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop import errors
from kubeloop.apiserver.patch.mergepatch import apply_merge_patch, copy_json, create_merge_patch, json_equal

# RFC 7386 appendix A: (original, patch, result).
RFC7386_EXAMPLES: list[tuple[Any, Any, Any]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("original", "patch", "expected"), RFC7386_EXAMPLES)
def test_rfc7386_examples(original: Any, patch: Any, expected: Any) -> None:
    assert strict_equal(apply_merge_patch(original, patch), expected)


@pytest.mark.parametrize(
    ("original", "patch", "expected"),
    [
        # Lists are replaced, even lists of objects with names (that is what SMP is for).
        (
            {"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b"}]}},
            {"spec": {"containers": [{"name": "b", "image": "y"}]}},
            {"spec": {"containers": [{"name": "b", "image": "y"}]}},
        ),
        # Nulls inside a list are kept: the list is a value, not a patch.
        ({}, {"a": [None, {"b": None}]}, {"a": [None, {"b": None}]}),
        # Deleting a member the target does not have is fine.
        ({"a": 1}, {"b": None}, {"a": 1}),
        # Deep merge keeps siblings at every level.
        (
            {"metadata": {"labels": {"a": "1", "b": "2"}, "name": "n"}},
            {"metadata": {"labels": {"b": None, "c": "3"}}},
            {"metadata": {"labels": {"a": "1", "c": "3"}, "name": "n"}},
        ),
        # A scalar target is replaced by an object patch, nulls dropped.
        ({"a": 5}, {"a": {"x": 1, "y": None}}, {"a": {"x": 1}}),
        # Booleans stay booleans.
        ({"a": 1}, {"a": True}, {"a": True}),
    ],
)
def test_merge_semantics(original: Any, patch: Any, expected: Any) -> None:
    assert strict_equal(apply_merge_patch(original, patch), expected)


def test_inputs_are_not_mutated_and_output_shares_nothing() -> None:
    original = {"a": {"b": [1, {"c": 2}]}, "keep": {"deep": [1]}}
    patch = {"a": {"d": {"e": [3]}}, "f": [{"g": 1}]}
    before = copy_json([original, patch])
    result = apply_merge_patch(original, patch)
    assert [original, patch] == before
    result["keep"]["deep"].append(2)
    result["a"]["d"]["e"].append(4)
    result["f"][0]["g"] = 99
    assert [original, patch] == before


def test_deeply_nested_patch_is_a_bad_request() -> None:
    patch: dict[str, Any] = {}
    node = patch
    for _ in range(5000):
        node["a"] = {}
        node = node["a"]
    with pytest.raises(errors.BadRequest):
        apply_merge_patch({}, patch)


@pytest.mark.parametrize(
    ("original", "modified", "expected_patch"),
    [
        ({"a": 1}, {"a": 1}, {}),
        ({"a": 1}, {"a": 2}, {"a": 2}),
        ({"a": 1, "b": 2}, {"a": 1}, {"b": None}),
        ({"a": {"x": 1, "y": 2}}, {"a": {"x": 1, "y": 3}}, {"a": {"y": 3}}),
        ({"a": {"x": 1}}, {"a": {"x": 1}}, {}),
        ({"a": [1, 2]}, {"a": [1, 2, 3]}, {"a": [1, 2, 3]}),
        ({"a": 1}, {"a": 1.0}, {}),
        ({"a": 1}, {"a": True}, {"a": True}),
        ({"a": "x"}, {"a": {"b": 1}}, {"a": {"b": 1}}),
        ({"a": {"b": 1}}, {"a": "x"}, {"a": "x"}),
        ({}, {"n": {"m": {}}}, {"n": {"m": {}}}),
    ],
)
def test_create_merge_patch(original: Any, modified: Any, expected_patch: Any) -> None:
    patch = create_merge_patch(original, modified)
    assert strict_equal(patch, expected_patch)
    assert json_equal(apply_merge_patch(original, patch), modified)


def test_create_merge_patch_of_non_objects_is_the_new_value() -> None:
    assert create_merge_patch([1], [2]) == [2]
    assert create_merge_patch({"a": 1}, "x") == "x"
    assert apply_merge_patch([1], create_merge_patch([1], {"a": 1})) == {"a": 1}


@pytest.mark.parametrize(
    ("left", "right", "equal"),
    [
        (1, 1.0, True),
        (True, 1, False),
        (False, 0, False),
        (None, None, True),
        (None, {}, False),
        ({"a": [1, {"b": 2}]}, {"a": [1.0, {"b": 2}]}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ([1, 2], [2, 1], False),
        ("1", 1, False),
    ],
)
def test_json_equal(left: Any, right: Any, equal: bool) -> None:
    assert json_equal(left, right) is equal
    assert json_equal(right, left) is equal


# --- properties -------------------------------------------------------------------------------

# JSON has no NaN or infinity (request decoding refuses both).
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5)
NULL_FREE_SCALARS = st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5)
KEYS = st.sampled_from(["a", "b", "c", "spec", "x"]) | st.text(max_size=3)


def json_values(scalars: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars,
        lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=4),
        max_leaves=20,
    )


NULL_FREE = json_values(NULL_FREE_SCALARS)


def strict_equal(left: Any, right: Any) -> bool:
    """Equality that also tells booleans from numbers and ints from floats."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(strict_equal(v, right[k]) for k, v in left.items())
    if isinstance(left, list):
        return len(left) == len(right) and all(strict_equal(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right)


@settings(max_examples=200, deadline=None)
@given(NULL_FREE, NULL_FREE)
def test_diff_then_apply_gives_the_modified_document(original: Any, modified: Any) -> None:
    patch = create_merge_patch(original, modified)
    assert json_equal(apply_merge_patch(original, patch), modified)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(KEYS, NULL_FREE, max_size=5), st.dictionaries(KEYS, NULL_FREE, max_size=5))
def test_diff_of_objects_is_an_object_and_minimal(original: Any, modified: Any) -> None:
    patch = create_merge_patch(original, modified)
    assert isinstance(patch, dict)
    assert (patch == {}) == json_equal(original, modified)
    assert json_equal(apply_merge_patch(original, patch), modified)


@settings(max_examples=100, deadline=None)
@given(json_values(SCALARS), json_values(SCALARS))
def test_apply_is_idempotent_and_total(original: Any, patch: Any) -> None:
    once = apply_merge_patch(original, patch)
    assert json_equal(apply_merge_patch(once, patch), once)


def rfc7386_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386's MergePatch pseudo-code, building new objects: the target's members in their
    order, then the members the patch adds in its order."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = rfc7386_merge_patch(result.get(name), value)
    return result


def in_order(value: Any) -> Any:
    """``value`` with each object as a list of its members, so that equality sees their order."""
    if isinstance(value, dict):
        return [(key, in_order(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [in_order(item) for item in value]
    return value


@settings(max_examples=300, deadline=None)
@given(json_values(SCALARS), json_values(SCALARS))
def test_apply_is_the_rfc_pseudo_code_members_in_order(original: Any, patch: Any) -> None:
    result = apply_merge_patch(original, patch)
    expected = rfc7386_merge_patch(original, patch)
    assert strict_equal(result, expected)
    assert in_order(result) == in_order(expected)
