"""JSON Patch (RFC 6902): the RFC's examples, upstream's error mapping, and properties."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop import errors
from kubeloop.apiserver.patch.jsonpatch import MAX_OPERATIONS, apply_json_patch, parse_pointer
from kubeloop.apiserver.patch.mergepatch import copy_json, json_equal

# RFC 6902 appendix A (A.13 is about duplicate JSON members, a parser matter): (document, patch, result).
RFC6902_EXAMPLES: list[tuple[str, Any, list[dict[str, Any]], Any]] = [
    ("A.1 add object member", {"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}],
     {"baz": "qux", "foo": "bar"}),
    ("A.2 add array element", {"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}],
     {"foo": ["bar", "qux", "baz"]}),
    ("A.3 remove object member", {"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}],
     {"foo": "bar"}),
    ("A.4 remove array element", {"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}],
     {"foo": ["bar", "baz"]}),
    ("A.5 replace", {"baz": "qux", "foo": "bar"}, [{"op": "replace", "path": "/baz", "value": "boo"}],
     {"baz": "boo", "foo": "bar"}),
    ("A.6 move", {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
     [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
     {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}}),
    ("A.7 move array element", {"foo": ["all", "grass", "cows", "eat"]},
     [{"op": "move", "from": "/foo/1", "path": "/foo/3"}], {"foo": ["all", "cows", "eat", "grass"]}),
    ("A.8 test success", {"baz": "qux", "foo": ["a", 2, "c"]},
     [{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}],
     {"baz": "qux", "foo": ["a", 2, "c"]}),
    ("A.10 add nested object", {"foo": "bar"}, [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
     {"foo": "bar", "child": {"grandchild": {}}}),
    ("A.11 unknown members ignored", {"foo": "bar"},
     [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}], {"foo": "bar", "baz": "qux"}),
    ("A.14 escape ordering", {"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}],
     {"/": 9, "~1": 10}),
    ("A.16 add array value", {"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
     {"foo": ["bar", ["abc", "def"]]}),
]  # fmt: skip

# More successes, several from evanphx/json-patch's table.
MORE_SUCCESSES: list[tuple[str, Any, list[dict[str, Any]], Any]] = [
    ("move within array backwards", {"foo": ["all", "grass", "cows", "eat"]},
     [{"op": "move", "from": "/foo/1", "path": "/foo/2"}], {"foo": ["all", "cows", "grass", "eat"]}),
    ("add null member", {"foo": "bar"}, [{"op": "add", "path": "/baz", "value": None}],
     {"foo": "bar", "baz": None}),
    ("remove member whose value is null", {"foo": "bar", "qux": {"baz": 1, "bar": None}},
     [{"op": "remove", "path": "/qux/bar"}], {"foo": "bar", "qux": {"baz": 1}}),
    ("replace array element with null", {"bar": [1]}, [{"op": "replace", "path": "/bar/0", "value": None}],
     {"bar": [None]}),
    ("replace null with a value", {"bar": [{"baz": None}]},
     [{"op": "replace", "path": "/bar/0/baz", "value": 1}], {"bar": [{"baz": 1}]}),
    ("root array document", [{"foo": ["bar", "qux", "baz"]}],
     [{"op": "replace", "path": "/0/foo/0", "value": "bum"}], [{"foo": ["bum", "qux", "baz"]}]),
    ("copy into array", {"foo": ["bar", "qux", "baz"], "bar": ["qux", "baz"]},
     [{"op": "copy", "from": "/foo/0", "path": "/bar/0"}],
     {"foo": ["bar", "qux", "baz"], "bar": ["bar", "qux", "baz"]}),
    ("copy a list into itself", {"foo": ["bar"]}, [{"op": "copy", "path": "/foo/0", "from": "/foo"}],
     {"foo": [["bar"], "bar"]}),
    ("add at index == length appends", {"foo": ["a"]}, [{"op": "add", "path": "/foo/1", "value": "b"}],
     {"foo": ["a", "b"]}),
    ("add replaces an existing member", {"a": 1}, [{"op": "add", "path": "/a", "value": 2}], {"a": 2}),
    ("escaped tokens", {"a/b": {"c~d": 1}}, [{"op": "replace", "path": "/a~1b/c~0d", "value": 2}],
     {"a/b": {"c~d": 2}}),
    ("empty member name", {"": 1}, [{"op": "replace", "path": "/", "value": 2}], {"": 2}),
    ("replace the whole document", {"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}], {"b": 2}),
    ("add the whole document", {"a": 1}, [{"op": "add", "path": "", "value": [1]}], [1]),
    ("test the whole document", {"a": [1]}, [{"op": "test", "path": "", "value": {"a": [1.0]}}], {"a": [1]}),
    ("move onto itself", {"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a"}], {"a": {"b": 1}}),
    ("test int against float", {"n": 1}, [{"op": "test", "path": "/n", "value": 1.0}], {"n": 1}),
    ("test nested equal objects in another member order", {"o": {"a": 1, "b": [True, None]}},
     [{"op": "test", "path": "/o", "value": {"b": [True, None], "a": 1}}], {"o": {"a": 1, "b": [True, None]}}),
    ("test null value", {"n": None}, [{"op": "test", "path": "/n", "value": None}], {"n": None}),
    ("test then replace (optimistic concurrency)", {"metadata": {"resourceVersion": "5"}, "x": 1},
     [{"op": "test", "path": "/metadata/resourceVersion", "value": "5"},
      {"op": "replace", "path": "/x", "value": 2}],
     {"metadata": {"resourceVersion": "5"}, "x": 2}),
    ("operations see earlier ones", {}, [{"op": "add", "path": "/a", "value": {}},
                                         {"op": "add", "path": "/a/b", "value": []},
                                         {"op": "add", "path": "/a/b/-", "value": 1},
                                         {"op": "add", "path": "/a/b/0", "value": 0}],
     {"a": {"b": [0, 1]}}),
]  # fmt: skip


@pytest.mark.parametrize(("name", "document", "patch", "expected"), RFC6902_EXAMPLES + MORE_SUCCESSES)
def test_patch_applies(name: str, document: Any, patch: list[dict[str, Any]], expected: Any) -> None:
    before = copy_json([document, patch])
    result = apply_json_patch(document, patch)
    assert json_equal(result, expected), name
    assert [document, patch] == before, "inputs must not be mutated"


# Operations that are well-formed but do not apply: 422 Invalid, naming the operation and its path.
FAILURES: list[tuple[str, Any, list[dict[str, Any]], str]] = [
    ("A.9 test fails", {"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}], "/baz"),
    ("A.12 add to a missing parent", {"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}],
     "/baz/bat"),
    ("A.15 string is not number", {"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": "10"}], "/~01"),
    ("remove a missing member", {"a": {"b": {"d": 1}}}, [{"op": "remove", "path": "/a/b/c"}], "/a/b/c"),
    ("replace a missing member", {"a": {}}, [{"op": "replace", "path": "/a/b", "value": 1}], "/a/b"),
    ("move from a missing member", {"a": {"b": {"d": 1}}},
     [{"op": "move", "from": "/a/b/c", "path": "/a/b/e"}], "/a/b/e"),
    ("copy from a missing member", {"a": 1}, [{"op": "copy", "from": "/b", "path": "/c"}], "/c"),
    ("remove past the end", {"a": {"b": [1]}}, [{"op": "remove", "path": "/a/b/1"}], "/a/b/1"),
    ("replace past the end", {"foo": ["bar", "baz"]}, [{"op": "replace", "path": "/foo/2", "value": "x"}],
     "/foo/2"),
    ("add beyond length", {"foo": ["bar"]}, [{"op": "add", "path": "/foo/2", "value": "x"}], "/foo/2"),
    ("copy beyond length", {"foo": ["bar"]}, [{"op": "copy", "path": "/foo/2", "from": "/foo/0"}], "/foo/2"),
    ("move beyond length", {"foo": ["all", "grass", "cows", "eat"]},
     [{"op": "move", "from": "/foo/1", "path": "/foo/4"}], "/foo/4"),
    ("remove '-'", {"foo": []}, [{"op": "remove", "path": "/foo/-"}], "/foo/-"),
    ("negative index", {"foo": ["bar"]}, [{"op": "remove", "path": "/foo/-1"}], "/foo/-1"),
    ("leading zero index", {"foo": ["a", "b"]}, [{"op": "replace", "path": "/foo/01", "value": "c"}],
     "/foo/01"),
    ("non-numeric index", {"foo": ["a"]}, [{"op": "add", "path": "/foo/x", "value": "c"}], "/foo/x"),
    ("through a scalar", {"a": 1}, [{"op": "add", "path": "/a/b", "value": 2}], "/a/b"),
    ("test of a missing member", {"baz": "qux"}, [{"op": "test", "path": "/foo", "value": None}], "/foo"),
    ("test true against 1", {"n": True}, [{"op": "test", "path": "/n", "value": 1}], "/n"),
    ("test 0 against false", {"n": 0}, [{"op": "test", "path": "/n", "value": False}], "/n"),
    ("test null against {}", {"n": {}}, [{"op": "test", "path": "/n", "value": None}], "/n"),
    ("test arrays of another length", {"n": [1]}, [{"op": "test", "path": "/n", "value": [1, 1]}], "/n"),
    ("move into own child", {"a": {"b": {}}}, [{"op": "move", "from": "/a", "path": "/a/b/c"}], "/a/b/c"),
    ("remove the whole document", {"a": 1}, [{"op": "remove", "path": ""}], '""'),
    ("a later operation fails", {"a": 1},
     [{"op": "replace", "path": "/a", "value": 2}, {"op": "remove", "path": "/zzz"}], "/zzz"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "document", "patch", "path"), FAILURES)
def test_operation_that_does_not_apply_is_422(
    name: str, document: Any, patch: list[dict[str, Any]], path: str
) -> None:
    before = copy_json(document)
    with pytest.raises(errors.Invalid) as raised:
        apply_json_patch(document, patch)
    assert raised.value.code == 422
    status = raised.value.to_status()
    assert status["reason"] == "Invalid"
    failing = patch[-1]
    assert failing["op"] in status["message"], name
    assert path in status["message"], name
    assert document == before


def test_failed_test_names_operation_and_path() -> None:
    with pytest.raises(errors.Invalid) as raised:
        apply_json_patch(
            {"data": {"a": "1"}},
            [{"op": "add", "path": "/x", "value": 1}, {"op": "test", "path": "/data/a", "value": "2"}],
        )
    message = raised.value.message
    assert "test" in message and "/data/a" in message and "operation 1" in message


MALFORMED: list[tuple[str, Any]] = [
    ("not a list", {"op": "add", "path": "/a", "value": 1}),
    ("a string", "add /a"),
    ("operation not an object", ["add"]),
    ("op missing", [{"path": "/a", "value": 1}]),
    ("op unknown", [{"op": "jump", "path": "/a"}]),
    ("op null", [{"op": None, "path": ""}]),
    ("op not a string", [{"op": 1, "path": "/a"}]),
    ("path missing", [{"op": "add", "value": 1}]),
    ("path null", [{"op": "add", "path": None, "value": 1}]),
    ("path not a pointer", [{"op": "add", "path": "a", "value": 1}]),
    ("bad escape", [{"op": "add", "path": "/a~2", "value": 1}]),
    ("add without value", [{"op": "add", "path": "/a"}]),
    ("replace without value", [{"op": "replace", "path": "/a"}]),
    ("test without value", [{"op": "test", "path": "/a"}]),
    ("move without from", [{"op": "move", "path": "/a"}]),
    ("copy with null from", [{"op": "copy", "from": None, "path": "/a"}]),
    ("malformed after a failing op", [{"op": "remove", "path": "/missing"}, {"op": "nope", "path": "/a"}]),
]


@pytest.mark.parametrize(("name", "patch"), MALFORMED)
def test_malformed_patch_is_400(name: str, patch: Any) -> None:
    with pytest.raises(errors.BadRequest) as raised:
        apply_json_patch({"a": 1}, patch)
    assert raised.value.code == 400, name


def test_remove_and_replace_without_value_member_are_fine_for_remove_only() -> None:
    assert apply_json_patch({"a": 1, "b": 2}, [{"op": "remove", "path": "/a", "value": 9}]) == {"b": 2}


def test_too_many_operations_is_413() -> None:
    too_many = [{"op": "add", "path": "/a", "value": 1}] * (MAX_OPERATIONS + 1)
    with pytest.raises(errors.RequestEntityTooLarge) as raised:
        apply_json_patch({}, too_many)
    assert raised.value.code == 413
    assert "10000" in raised.value.message


def test_exactly_the_maximum_is_accepted() -> None:
    ops = [{"op": "add", "path": "/items/-", "value": 1}] * (MAX_OPERATIONS - 1)
    result = apply_json_patch({"items": []}, [{"op": "test", "path": "/items", "value": []}, *ops])
    assert len(result["items"]) == MAX_OPERATIONS - 1


def test_replace_of_missing_member_can_follow_upstream_library() -> None:
    patch = [{"op": "replace", "path": "/metadata/labels/new", "value": "x"}]
    document: dict[str, Any] = {"metadata": {"labels": {}}}
    with pytest.raises(errors.Invalid):
        apply_json_patch(document, patch)
    assert apply_json_patch(document, patch, allow_replace_missing=True) == {
        "metadata": {"labels": {"new": "x"}}
    }
    # Array indices are checked either way.
    with pytest.raises(errors.Invalid):
        apply_json_patch(
            {"a": []}, [{"op": "replace", "path": "/a/0", "value": 1}], allow_replace_missing=True
        )


def test_result_shares_nothing_with_inputs() -> None:
    value = {"deep": [1]}
    document = {"keep": {"x": [1]}}
    result = apply_json_patch(document, [{"op": "add", "path": "/v", "value": value},
                                         {"op": "copy", "from": "/v", "path": "/w"}])  # fmt: skip
    result["v"]["deep"].append(2)
    result["keep"]["x"].append(2)
    assert result["w"] == {"deep": [1]}
    assert value == {"deep": [1]}
    assert document == {"keep": {"x": [1]}}


def test_deep_documents_are_a_bad_request_not_a_crash() -> None:
    document: dict[str, Any] = {}
    node = document
    for _ in range(5000):
        node["a"] = {}
        node = node["a"]
    with pytest.raises(errors.BadRequest):
        apply_json_patch(document, [{"op": "add", "path": "/b", "value": 1}])


@pytest.mark.parametrize(
    ("pointer", "tokens"),
    [("", []), ("/", [""]), ("/a/b", ["a", "b"]), ("/a~1b", ["a/b"]), ("/m~0n", ["m~n"]), ("/~01", ["~1"])],
)
def test_parse_pointer(pointer: str, tokens: list[str]) -> None:
    assert parse_pointer(pointer) == tokens


@pytest.mark.parametrize("pointer", ["a", "a/b", "/a~", "/a~2"])
def test_parse_pointer_rejects(pointer: str) -> None:
    with pytest.raises(ValueError):
        parse_pointer(pointer)


# --- properties -------------------------------------------------------------------------------

# JSON has no NaN or infinity (request decoding refuses both).
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4)
NAMES = st.sampled_from(["a", "b", "", "~", "/", "x~1y", "-", "0"]) | st.text(max_size=3)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(NAMES, children, max_size=3),
    max_leaves=12,
)
OBJECTS = st.dictionaries(NAMES, VALUES, max_size=4)


def escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def absent_from(taken: set[str]) -> Callable[[str], bool]:
    return lambda name: name not in taken


@st.composite
def document_and_new_location(draw: st.DrawFn) -> tuple[Any, str]:
    """A document and a pointer where ``add`` creates something new (a missing member or an index)."""
    document = draw(OBJECTS)
    node: Any = document
    pointer = ""
    while True:
        if isinstance(node, dict):
            existing = sorted(key for key, value in node.items() if isinstance(value, dict | list))
            descend: bool = draw(st.booleans())
            if existing and descend:
                key = draw(st.sampled_from(existing))
                pointer += "/" + escape(key)
                node = node[key]
                continue
            new = draw(NAMES.filter(absent_from(set(node))))
            return document, pointer + "/" + escape(new)
        containers = [i for i, value in enumerate(node) if isinstance(value, dict | list)]
        descend = draw(st.booleans())
        if containers and descend:
            index = draw(st.sampled_from(containers))
            pointer += f"/{index}"
            node = node[index]
            continue
        return document, pointer + f"/{draw(st.integers(0, len(node)))}"


@settings(max_examples=200, deadline=None)
@given(document_and_new_location(), VALUES)
def test_add_then_remove_is_identity(located: tuple[Any, str], value: Any) -> None:
    document, pointer = located
    added = apply_json_patch(document, [{"op": "add", "path": pointer, "value": value}])
    assert apply_json_patch(added, [{"op": "test", "path": pointer, "value": value}]) == added
    restored = apply_json_patch(added, [{"op": "remove", "path": pointer}])
    assert json_equal(restored, document)


@settings(max_examples=100, deadline=None)
@given(OBJECTS, st.lists(st.fixed_dictionaries({"op": st.sampled_from(["add", "remove", "replace", "move",
                                                                       "copy", "test"]),
                                                "path": st.sampled_from(["", "/a", "/a/0", "/b", "/-", "/a/-"]),
                                                "from": st.sampled_from(["", "/a", "/b/0"]),
                                                "value": VALUES}), max_size=4))  # fmt: skip
def test_arbitrary_patches_raise_only_api_errors(document: Any, patch: list[dict[str, Any]]) -> None:
    before = copy_json(document)
    try:
        apply_json_patch(document, patch)
    except errors.APIError as exc:
        assert exc.code in (400, 422)
    assert document == before


def test_a_copy_of_an_integer_beyond_64_bits_is_measured_not_a_crash() -> None:
    patch = [{"op": "add", "path": "/a", "value": [-(2**63) - 1]}, {"op": "copy", "from": "/a", "path": "/b"}]
    assert apply_json_patch({}, patch) == {"a": [-(2**63) - 1], "b": [-(2**63) - 1]}


def test_copies_that_double_the_document_stop_at_the_accumulated_limit() -> None:
    document = {"a": ["x" * 1000]}
    doubling = [{"op": "copy", "from": "/a", "path": "/a/-"} for _ in range(30)]
    with pytest.raises(errors.Invalid, match="accumulated size increase of copy"):
        apply_json_patch(document, doubling)
    # A few ordinary copies are fine.
    assert apply_json_patch(document, doubling[:3])["a"][1:] != []
