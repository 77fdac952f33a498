"""Untracking JSON values from the cyclic GC: every container of a value leaves the GC's sight,
the value is unchanged, and what CPython does when an untracked dict later takes a container."""

from __future__ import annotations

import gc
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from kubeloop.gcuntrack import untrack, untrack_json

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=30,
)


def containers(value: Any) -> list[Any]:
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict | list):
            found.append(item)
            stack.extend(item.values() if isinstance(item, dict) else item)
    return found


@given(json_values)
def test_every_container_of_a_json_value_is_untracked_and_the_value_unchanged(value: Any) -> None:
    decoded = orjson.loads(orjson.dumps(value))  # as the store gets it: fresh from a decoder
    before = orjson.dumps(decoded)
    untrack_json(decoded)
    assert not any(gc.is_tracked(container) for container in containers(decoded))
    assert orjson.dumps(decoded) == before


def test_a_container_shared_with_a_value_untracked_before_is_not_walked_again() -> None:
    spec = {"items": [{"a": []} for _ in range(3)]}
    untrack_json({"spec": spec})
    inner = spec["items"][0]["a"]
    assert not gc.is_tracked(inner)
    updated = {"spec": spec, "status": {"conditions": [{"type": "Ready"}]}}  # copy-on-write update
    untrack_json(updated)
    assert not any(gc.is_tracked(container) for container in containers(updated))


def test_an_untracked_dict_is_tracked_again_when_it_takes_a_container() -> None:
    # What makes a mutated dict safe: the GC sees it again, and with it any cycle through it.
    value = orjson.loads(b'{"metadata": {"labels": []}}')
    untrack_json(value)
    assert not gc.is_tracked(value)
    value["cycle"] = [value]
    assert gc.is_tracked(value)


def test_untrack_leaves_objects_the_gc_never_tracked_alone() -> None:
    for plain in ("text", 1, None, b"bytes", {"only": "strings"}):
        untrack(plain)  # no header to read: must not touch them
    holder = [object()]
    untrack(holder)
    assert not gc.is_tracked(holder)
