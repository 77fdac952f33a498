"""A large JSON body decoded a slice at a time: always orjson's value (or orjson's refusal), and no
call into C looks at much more than a slice of the body."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kubeloop import errors
from kubeloop.apiserver import decoding
from kubeloop.apiserver.decoding import slices

#: Text that is hard to cut: quotes, escapes, commas, colons and brackets inside strings.
_tricky_text = st.text(alphabet=st.sampled_from(list('ab",:{}[]\\ \n\té€😀')), max_size=10)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _tricky_text,
    lambda children: st.lists(children, max_size=6) | st.dictionaries(_tricky_text, children, max_size=6),
    max_leaves=16,
)
_layouts = st.sampled_from(
    [
        {"separators": (",", ":")},
        {"separators": (", ", ": ")},
        {"indent": 1},
        {"indent": "\t", "ensure_ascii": False},
        {"separators": (" ,\r\n", " :\t")},
    ]
)


def outcome(decode: Any, raw: bytes) -> tuple[str, str]:
    """What a decoder makes of ``raw``: its value as JSON text (keys in order), or its refusal."""
    try:
        return ("value", json.dumps(decode(raw)))
    except orjson.JSONDecodeError as exc:
        return ("refused", str(exc))


def assert_as_orjson(raw: bytes, slice_bytes: int) -> None:
    assert outcome(lambda body: slices.loads_in_slices(body, slice_bytes), raw) == outcome(orjson.loads, raw)


@settings(max_examples=60, deadline=None)
@given(value=st.lists(_json_values, max_size=5) | st.dictionaries(_tricky_text, _json_values, max_size=6),
       layout=_layouts, slice_bytes=st.integers(min_value=1, max_value=64))
def test_any_json_decodes_as_orjson_decodes_it(value: Any, layout: dict[str, Any], slice_bytes: int) -> None:
    raw = json.dumps(value, **layout).encode()
    # In slices, never by falling back to one decode of the whole body (which would hold the GIL).
    assert outcome(lambda body: slices._decode(body, slice_bytes), raw) == outcome(orjson.loads, raw)


@settings(max_examples=80, deadline=None)
@given(
    value=st.dictionaries(_tricky_text, _json_values, min_size=1, max_size=6),
    layout=_layouts,
    slice_bytes=st.integers(min_value=1, max_value=48),
    edits=st.lists(
        st.tuples(st.floats(min_value=0, max_value=1), st.sampled_from([b"", b",", b":", b"{", b"}", b"[", b"]", b'"', b"\\", b" ", b"\x0c", b"1", b"\xff"]), st.booleans()),
        min_size=1,
        max_size=3,
    ),
)
@example(value={"a": 1}, layout={"separators": (",", ":")}, slice_bytes=2, edits=[(0.85, b",", False)])  # {"a":1,}
def test_broken_json_is_refused_as_orjson_refuses_it(
    value: Any, layout: dict[str, Any], slice_bytes: int, edits: list[tuple[float, bytes, bool]]
) -> None:
    raw = json.dumps(value, **layout).encode()
    for where, text, replace in edits:
        at = int(where * len(raw))
        raw = raw[:at] + text + raw[at + (1 if replace else 0) :]
    assert_as_orjson(raw, slice_bytes)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a":1,"a":2,"b":{"a":[1,2,3],"a":{"x":1}},"a":3}',  # a repeated key: its first place, its last value
        b'{"a":{"b":{"c":{"d":{"e":{"f":{"g":[[[[[[1]]]]]]}}}}}}}',
        b'[{"a":1},{"b":2},[],{},""]',
        b'  {"k":"' + b"x" * 500 + b'","n":1}  ',  # one string longer than the slice
        b"{}",
        b"[]",
        b'{"a":1,}',
        b'{"a":1 "b":{"c":[1,2]}}',
        b'{"a":{"b":1},,"c":2}',
        b'{"a":{"b":1}}x',
        b'{"a":[1,2}',
        b'{"a":[1,2}]',  # closed by the other bracket
        b'[{"a":1]}',
        b'[1 {"a":[1,2]}]',  # a member with no comma before a container walked into
        b'[1,2 [3,4]]',
        b'{"a":{"b":[1,2]},}',  # a trailing comma after a container walked into
        b'[[1,2],]',
        b'{"a\\u0062":{"c":1}}',
        b'{"a\x0c":{"c":1}}',
    ],
)
def test_cases_at_every_slice_size(raw: bytes) -> None:
    for slice_bytes in range(1, len(raw) + 2):
        assert_as_orjson(raw, slice_bytes)


class Recording:
    """A compiled pattern whose matches record how many bytes each looked at."""

    def __init__(self, pattern: re.Pattern[bytes], spans: list[int]) -> None:
        self.pattern, self.spans = pattern, spans

    def match(self, raw: bytes, pos: int, endpos: int) -> re.Match[bytes] | None:
        self.spans.append(endpos - pos)
        return self.pattern.match(raw, pos, endpos)


def configmap(keys: int) -> bytes:
    data = {f"key{i:06d}": f"value-{i:012d}" for i in range(keys)}
    return orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": data})


def custom_resource(items: int) -> bytes:
    spec = {"rules": [{"name": f"rule-{i}", "ports": [{"port": i, "protocol": "TCP"}]} for i in range(items)]}
    return orjson.dumps({"apiVersion": "example.com/v1", "kind": "Big", "metadata": {"name": "big"}, "spec": spec})


@pytest.mark.parametrize("body", [configmap(87_000), custom_resource(30_000)], ids=["configmap", "array-of-objects"])
def test_no_call_looks_at_more_than_a_slice(body: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """The 2.9 MB ConfigMap of ``bench/stall.py`` held the GIL for 40-70 ms in one orjson call."""
    scanned: list[int] = []
    decoded: list[int] = []
    patterns = slices._patterns()
    monkeypatch.setattr(patterns, "members", Recording(patterns.members, scanned))
    monkeypatch.setattr(patterns, "items", Recording(patterns.items, scanned))
    real_loads = orjson.loads

    def loads(raw: bytes) -> Any:
        decoded.append(len(raw))
        return real_loads(raw)

    monkeypatch.setattr(slices.orjson, "loads", loads)
    assert slices.loads_in_slices(body) == real_loads(body)
    assert len(body) > 25 * slices.SLICE_BYTES
    assert max(scanned) <= slices.SLICE_BYTES
    assert max(decoded) <= slices.SLICE_BYTES + 2  # a run of members and its brackets
    assert sum(decoded) < 1.1 * len(body)  # each byte decoded once


def test_large_request_bodies_are_decoded_in_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = slices.loads_in_slices

    def recording(raw: bytes, slice_bytes: int = slices.SLICE_BYTES) -> Any:
        calls.append(len(raw))
        return real(raw, slice_bytes)

    monkeypatch.setattr(slices, "loads_in_slices", recording)
    small, large = configmap(10), configmap(20_000)
    assert decoding.decode_json(small) == orjson.loads(small)
    assert decoding.decode_json(large) == orjson.loads(large)
    assert calls == [len(large)]
    # A refusal is worded as it was: orjson's, from the whole body.
    broken = large[:-2] + b",}}"
    with pytest.raises(errors.BadRequest) as refused:
        decoding.decode_json(broken)
    with pytest.raises(orjson.JSONDecodeError) as by_orjson:
        orjson.loads(broken)
    assert str(by_orjson.value) in refused.value.message
