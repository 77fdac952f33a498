"""Request bodies into JSON values: YAML as SafeLoader reads it (but JSON-shaped), depth and alias
limits, and no recursion — a body can neither crash the server nor make it expand a bomb."""

from __future__ import annotations

import math
import subprocess
import sys
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop import errors
from kubeloop.apiserver.decoding import request as decoding
from kubeloop.apiserver.decoding.request import MAX_DEPTH, check_depth, decode_json, decode_yaml

#: Text YAML can carry through a dump and a load (control characters such as NEL are line breaks).
yaml_text = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")))
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    yaml_text,
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(yaml_text, children, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_yaml_dumped_values_read_back_the_same(value: Any) -> None:
    for style in (False, True, None):
        text = yaml.safe_dump(value, default_flow_style=style, allow_unicode=True)
        assert decode_yaml(text.encode()) == value


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_yaml_reads_what_safe_loader_reads_for_json_shaped_documents(value: Any) -> None:
    text = yaml.safe_dump(value, default_flow_style=False)
    expected = yaml.safe_load(text)
    assert decode_yaml(text) == expected
    assert orjson.loads(orjson.dumps(decode_yaml(text))) == expected  # and JSON can hold it


def test_yaml_scalars_resolve_as_yaml_1_1_but_timestamps_stay_strings() -> None:
    document = decode_yaml(
        b"h: 0x10\ni: 1_000\nk: 1.5e+3\nl: ~\nm: 'quoted 1'\nn: !!str 5\no: 190:20:30\n"
        b"p: on\nd: 2024-01-01\nt: 2024-01-01T10:00:00Z\nb: !!binary aGVsbG8=\ns: !!set {x, y}\n"
        b"big: 123456789012345678901234567890\n"
    )
    assert document == {
        "h": 16,
        "i": 1000,
        "k": 1500.0,
        "l": None,
        "m": "quoted 1",
        "n": "5",
        "o": 685230,
        "p": True,
        "d": "2024-01-01",
        "t": "2024-01-01T10:00:00Z",
        "b": "aGVsbG8=",
        "s": {"x": None, "y": None},
        "big": 1.2345678901234568e29,  # as orjson reads the same number in JSON
    }


def test_yaml_keys_become_strings_and_merge_keys_work() -> None:
    assert decode_yaml(b"{1: a, 1.5: b, null: c, true: d}") == {
        "1": "a",
        "1.5": "b",
        "null": "c",
        "true": "d",
    }
    merged = decode_yaml(
        b"a: &a {x: 1, y: 2}\nb: &b {y: 3, z: 4}\nc: {<<: [*a, *b], z: 9}\nd: {<<: *a, x: 7}\n"
    )
    assert merged["c"] == {"x": 1, "y": 2, "z": 9} and merged["d"] == {"x": 7, "y": 2}
    assert merged == yaml.safe_load(
        "a: &a {x: 1, y: 2}\nb: &b {y: 3, z: 4}\nc: {<<: [*a, *b], z: 9}\nd: {<<: *a, x: 7}\n"
    )


@pytest.mark.parametrize(
    ("document", "needle"),
    [
        (b"a: .nan", "not a JSON number"),
        (b"a: -.inf", "not a JSON number"),
        (b"a: !Ref x", "no value can be made of the tag !Ref"),
        (b"a: 1\n---\nb: 2\n", "more than one YAML document"),
        (b"? [a]\n: b\n", "a mapping key must be a scalar"),
        (b"a: &a [*a]", "an alias refers to a node that contains it"),
        (b"a: *missing", "undefined alias"),
        (b"a: [unclosed", "could not be decoded as YAML"),
        (b"a: {<<: 5}", "merge key"),
    ],
)
def test_bad_yaml_is_a_400_naming_the_problem(document: bytes, needle: str) -> None:
    with pytest.raises(errors.BadRequest) as raised:
        decode_yaml(document)
    assert needle in raised.value.message


def test_nesting_beyond_the_limit_is_refused_in_json_and_yaml() -> None:
    at_limit = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    assert isinstance(decode_yaml(f"a: {at_limit}"), dict)
    assert isinstance(decode_json(f'{{"a": {at_limit}}}'.encode()), dict)
    over = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    for decode in (decode_yaml, decode_json):
        with pytest.raises(errors.BadRequest, match="nests more than 128 levels"):
            decode(f'{{"a": {over}}}'.encode())
    # Block style counts the same; an alias adds the depth of what it names.
    block = "a:\n" + "".join("  " * i + "- \n" for i in range(1, 10)) + "  " * 10 + "- x\n"
    assert decode_yaml(block)
    deep_anchor = "a: &d " + "[" * 100 + "]" * 100 + "\nb: " + "[" * 30 + "*d" + "]" * 30 + "\n"
    with pytest.raises(errors.BadRequest, match="nests more than"):
        decode_yaml(deep_anchor)
    check_depth(orjson.loads(over.encode()), "the object")  # exactly at the limit
    with pytest.raises(errors.BadRequest, match="the object: the object nests more than"):
        check_depth(orjson.loads(("[" + over + "]").encode()), "the object")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["object", "array"]), min_size=MAX_DEPTH - 2, max_size=MAX_DEPTH + 2),
    st.integers(0, 3),
)
def test_the_depth_check_counts_objects_and_arrays_alike(shape: list[str], siblings: int) -> None:
    """Objects and arrays nested in any order, the deepest path beside shallower siblings:
    refused exactly when it is more than MAX_DEPTH levels deep."""
    value: Any = 1
    for kind in reversed(shape):
        # Siblings: empty containers, as deep as the value beside them (a scalar at the bottom).
        many = siblings if isinstance(value, dict | list) else 0
        if kind == "object":
            value = {**{f"s{i}": [] for i in range(many)}, "k": value}
        else:
            value = [*([{}] * many), value]
    if len(shape) > MAX_DEPTH:
        with pytest.raises(errors.BadRequest, match="nests more than"):
            check_depth(value, "the object")
    else:
        check_depth(value, "the object")


def test_extreme_nesting_neither_recurses_nor_crashes() -> None:
    # libyaml's own composer recurses in C: 100,000 levels crash the interpreter. Run in a child
    # process so that a crash shows as a failure rather than taking pytest down.
    code = (
        "from kubeloop.apiserver.decoding import decode_yaml, decode_json\n"
        "from kubeloop import errors\n"
        "for decode in (decode_yaml, decode_json):\n"
        "    for body in (b'a: ' + b'[' * 1_000_000, b'[' * 1_000_000 + b']' * 1_000_000):\n"
        "        try:\n"
        "            decode(body)\n"
        "        except errors.BadRequest:\n"
        "            pass\n"
        "print('survived')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "survived" in done.stdout, done.stderr[-2000:]


def test_an_alias_bomb_is_refused_before_it_expands() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 9):
        previous = f"*a{level - 1}"
        lines.append(f"a{level}: &a{level} [{', '.join([previous] * 10)}]")
    with pytest.raises(errors.BadRequest, match="expands to more than"):
        decode_yaml("\n".join(lines).encode())
    # Modest reuse is fine.
    assert decode_yaml(b"a: &a [1, 2]\nb: [*a, *a, *a]\n") == {"a": [1, 2], "b": [[1, 2]] * 3}


def test_json_numbers_and_errors() -> None:
    assert decode_json(b'{"a": 1.5, "b": [true, null]}') == {"a": 1.5, "b": [True, None]}
    with pytest.raises(errors.BadRequest, match="could not be decoded as JSON"):
        decode_json(b"{nope")
    value = decode_json(b'{"a": 123456789012345678901234567890}')
    assert isinstance(value["a"], float) and math.isfinite(value["a"])


def test_a_large_anchored_string_repeated_is_refused_by_its_expanded_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 1 MB named once and repeated 4,000 times would be 4 GB once expanded: few nodes, many bytes.
    document = b"args: [&a " + b"x" * 1_000_000 + b", " + b", ".join([b"*a"] * 4000) + b"]"
    aliases = 0
    alias = decoding._YAMLBuilder.alias

    def counted(builder: Any, event: Any) -> None:
        nonlocal aliases
        aliases += 1
        alias(builder, event)

    monkeypatch.setattr(decoding._YAMLBuilder, "alias", counted)
    with pytest.raises(errors.BadRequest, match="expands to more than"):
        decode_yaml(document)
    # Refused as soon as the expansion passed the limit, not after reading every alias.
    assert aliases <= decoding.MAX_YAML_EXPANDED // 1_000_000 + 1  # of 4,000
