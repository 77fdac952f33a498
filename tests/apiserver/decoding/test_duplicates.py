"""Repeated fields in a request body: found in its text as upstream's strict decoder finds them, and
answering alike with the shortcut from orjson's reading."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.apiserver import decoding
from kubeloop.apiserver.decoding import duplicates
from tests.apiserver.registry.validation.objects import json_values


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"metadata":{"name":"a","name":"b"}}', ["metadata.name"]),
        (b'{"a":{"b":[{"c":1},{"c":1,"c":2}]}}', ["a.b[1].c"]),
        (b'{"metadata":{"labels":{"x":"1","x":"2","x":"3"}}}', ["metadata.labels.x"]),
        (b'{"kind":"A","kind":"B","spec":{"x":1,"x":2}}', ["kind", "spec.x"]),
        (b'{"a":{"n\\u0061me":1,"name":2}}', ["a.name"]),  # keys compared after unescaping
        (b'{"metadata":{"name":"a"}}', []),
        (b"not json", []),
        (b"[1, 2]", []),
    ],
)
def test_find_duplicate_fields(raw: bytes, expected: list[str]) -> None:
    assert decoding.find_duplicate_fields(raw) == expected


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64) | json_values.map(lambda v: json.dumps(v).encode()))
def test_find_duplicate_fields_never_raises(raw: bytes) -> None:
    assert isinstance(decoding.find_duplicate_fields(raw), list)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c.d", "é"]), json_values), max_size=6))
def test_find_duplicate_fields_reports_each_repeated_key_once(pairs: list[tuple[str, Any]]) -> None:
    raw = ("{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in pairs) + "}").encode()
    keys = [k for k, _ in pairs]
    expected = [k for k in dict.fromkeys(keys) if keys.count(k) > 1]
    assert decoding.find_duplicate_fields(raw) == expected


_KEYS = st.sampled_from(["a", "b", 'q":', "\\", "é", 'x\\":'])

_NESTED = st.recursive(
    st.none() | st.integers() | st.sampled_from(["", '":', 'a":"b', "\\"]),
    lambda inner: st.lists(inner, max_size=3) | st.lists(st.tuples(_KEYS, inner), max_size=4),
    max_leaves=12,
)


def _render(value: Any, spaced: bool) -> str:
    """JSON text of ``value``, where a list of (key, value) pairs is an object written with its
    repeated keys (and a space before colons when ``spaced``)."""
    if isinstance(value, list) and value and all(isinstance(v, tuple) for v in value):
        colon = " :" if spaced else ":"
        return "{" + ",".join(f"{json.dumps(k)}{colon}{_render(v, spaced)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_render(v, spaced) for v in value) + "]"
    return json.dumps(value)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_KEYS, _NESTED), max_size=5), st.booleans())
def test_find_duplicate_fields_answers_alike_with_the_decoded_body(
    pairs: list[tuple[str, Any]], spaced: bool
) -> None:
    """The shortcut from orjson's reading (a key count) finds what the full parse finds, with
    keys and values holding quotes, colons and backslashes, and with spaces before colons."""
    raw = _render(pairs, spaced).encode() if pairs else b"{}"
    assert decoding.find_duplicate_fields(raw, orjson.loads(raw)) == decoding.find_duplicate_fields(raw)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([b'"', b":", b" ", b"\n", b"a", b'":', b'" :', b"\t\t"]), max_size=40).map(b"".join),
    st.integers(min_value=1, max_value=8),
)
def test_a_large_body_is_searched_a_window_at_a_time_with_the_same_answers(raw: bytes, window: int) -> None:
    """The shortcut's look at a large body goes a window at a time (one search of 3 MiB held the
    GIL for 5-10 ms), and answers as one look at the whole: matches across windows included."""
    assert duplicates._has_spaced_colon(raw, window) == (duplicates._SPACED_COLON.search(raw) is not None)
    assert duplicates._count_key_ends(raw, window) == raw.count(b'":')


def test_a_body_too_deep_to_count_its_keys_is_checked_in_full() -> None:
    """Keys are counted recursively; a body deeper than the interpreter lets that go (orjson
    reads 1,024 levels) is answered by the full check, not an error."""
    raw = b'{"a":1,"a":2,"b":' + b'{"c":' * 1000 + b"1" + b"}" * 1000 + b"}"
    decoded = orjson.loads(raw)
    with pytest.raises(RecursionError):
        duplicates._count_keys(decoded)
    assert decoding.find_duplicate_fields(raw, decoded) == decoding.find_duplicate_fields(raw)


def _keys_held(value: Any) -> int:
    if isinstance(value, dict):
        return len(value) + sum(_keys_held(item) for item in value.values())
    if isinstance(value, list):
        return sum(_keys_held(item) for item in value)
    return 0


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_the_shortcut_counts_every_key_at_every_level(value: Any) -> None:
    """The shortcut's key count (a wrong one would send every body to the full parse, or let a
    repeated key through when it matched a body's ``":`` count by chance)."""
    assert duplicates._count_keys(json.loads(json.dumps(value))) == _keys_held(value)
