"""``decoding.jsoncopy.copy_json``: a deep copy equal to its value and sharing nothing mutable
with it, by orjson or, for what orjson cannot encode, rebuilt in Python."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.apiserver.decoding.jsoncopy import copy_json

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
# What orjson refuses: integers past 64 bits and strings with a lone surrogate.
AWKWARD = st.one_of(st.integers(min_value=2**64, max_value=2**70), st.just("x\ud800y"))
JSON = st.recursive(
    st.one_of(SCALARS, AWKWARD),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=30,
)


def containers(value: Any) -> list[Any]:
    found: list[Any] = []
    if isinstance(value, dict):
        found.append(value)
        for item in value.values():
            found.extend(containers(item))
    elif isinstance(value, list):
        found.append(value)
        for item in value:
            found.extend(containers(item))
    return found


def same_types(left: Any, right: Any) -> bool:
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(same_types(left[key], right[key]) for key in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(same_types(a, b) for a, b in zip(left, right, strict=True))
    return True


@settings(max_examples=300, deadline=None)
@given(value=JSON)
def test_a_copy_is_equal_of_the_same_types_and_shares_no_container(value: Any) -> None:
    copied = copy_json(value)
    assert copied == value
    assert same_types(copied, value)  # 1.0 stays a float, True a bool, key order kept
    originals = {id(container) for container in containers(value)}
    assert not originals & {id(container) for container in containers(copied)}


def test_a_tuple_is_copied_as_a_list() -> None:
    inner = {"a": [1]}
    copied = copy_json((inner, [2]))
    assert copied == [{"a": [1]}, [2]] and copied[0] is not inner
