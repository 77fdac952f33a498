"""The watch cache's key index (``storage.sortedkeys``) against a plain sorted list: any
sequence of additions and removals, then every range and count the cache asks for."""

from __future__ import annotations

import bisect
import sys
from types import FrameType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kubeloop.apiserver.storage import sortedkeys
from kubeloop.apiserver.storage.sortedkeys import SortedKeys

# Short keys over a small alphabet: collisions, shared prefixes and keys equal to bounds are common.
# Numbered keys besides: enough distinct ones for several chunks at once.
KEYS = st.one_of(st.text(alphabet="abc/\U0010ffff", max_size=4), st.integers(0, 300).map("{:03d}".format))
BOUNDS = st.one_of(st.none(), KEYS)


def expected_between(model: list[str], low: str, high: str | None) -> list[str]:
    return [key for key in model if key >= low and (high is None or key < high)]


class AgainstASortedList(RuleBasedStateMachine):
    """Loads of 1–12 keys: chunks split past twice the load, and (from a load of 8) merge with a
    neighbour when they fall below a quarter of it."""

    @initialize(load=st.integers(1, 12), keys=st.lists(KEYS, max_size=80))
    def start(self, load: int, keys: list[str]) -> None:
        self.index = SortedKeys(keys, load=load)
        self.model = sorted(set(keys))
        self.load = load

    @rule(key=KEYS)
    def add(self, key: str) -> None:
        self.index.add(key)
        if key not in self.model:
            bisect.insort(self.model, key)

    @rule(key=KEYS)
    def discard(self, key: str) -> None:
        self.index.discard(key)
        if key in self.model:
            self.model.remove(key)

    @rule(data=st.data())
    def discard_a_present_key(self, data: st.DataObject) -> None:
        if self.model:
            key = data.draw(st.sampled_from(self.model))
            self.index.discard(key)
            self.model.remove(key)

    @rule(data=st.data())
    def discard_a_run_of_keys(self, data: st.DataObject) -> None:
        """Many neighbours at once: what empties a chunk or makes it small enough to merge."""
        if self.model:
            first = data.draw(st.integers(0, len(self.model) - 1))
            run = self.model[first : first + data.draw(st.integers(1, 12))]
            for key in run:
                self.index.discard(key)
                self.model.remove(key)

    @rule(low=KEYS, high=BOUNDS)
    def a_range(self, low: str, high: str | None) -> None:
        expected = expected_between(self.model, low, high)
        assert list(self.index.between(low, high)) == expected
        assert [key for part in self.index.slices_between(low, high) for key in part] == expected
        assert self.index.count_between(low, high) == len(expected)

    @rule(key=KEYS)
    def membership(self, key: str) -> None:
        assert (key in self.index) == (key in self.model)

    @invariant()
    def the_same_keys_in_chunks_of_bounded_size(self) -> None:
        assert list(self.index) == self.model
        assert len(self.index) == len(self.model)
        chunks, lasts = self.index._state
        assert all(chunks) and all(len(chunk) <= 2 * self.load for chunk in chunks)
        assert lasts == [chunk[-1] for chunk in chunks]


AgainstASortedList.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestAgainstASortedList = AgainstASortedList.TestCase


@settings(max_examples=100, deadline=None)
@given(keys=st.lists(KEYS, max_size=60), low=KEYS, high=BOUNDS)
def test_ranges_of_keys_built_at_once(keys: list[str], low: str, high: str | None) -> None:
    index = SortedKeys(keys, load=2)
    model = sorted(set(keys))
    assert list(index.between(low, high)) == expected_between(model, low, high)
    assert index.count_between(low, high) == len(expected_between(model, low, high))


def test_an_insertion_moves_one_chunk_not_every_key_after_it() -> None:
    """The point of the chunks: a key sorting before 100,000 others lands in the first chunk,
    and the chunks after it are the same list objects, untouched."""
    index = SortedKeys((f"/registry/configmaps/ns/{n:06d}" for n in range(100_000)), load=1000)
    untouched = index._state[0][1:]
    index.add("/registry/apps/deployments/ns/a")
    assert index._state[0][1:] == untouched and all(
        after is before for after, before in zip(index._state[0][1:], untouched, strict=True)
    )
    assert next(iter(index)) == "/registry/apps/deployments/ns/a"
    assert len(index) == 100_001


def test_a_small_chunk_merges_with_its_neighbour() -> None:
    index = SortedKeys((f"{n:03d}" for n in range(40)), load=8)
    assert [len(chunk) for chunk in index._state[0]] == [8, 8, 8, 8, 8]
    for n in range(8, 15):  # the second chunk down to one key: below a quarter of the load
        index.discard(f"{n:03d}")
    assert [len(chunk) for chunk in index._state[0]] == [9, 8, 8, 8]
    assert index._state[1] == ["015", "023", "031", "039"]
    assert list(index.between("007", "017")) == ["007", "015", "016"]


def test_a_load_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="load"):
        SortedKeys(load=0)


def test_a_read_between_any_two_steps_of_a_change_sees_every_key_that_stays() -> None:
    """What a large write's admission relies on, reading the cache from the worker loop's thread
    while the serving loop adds and removes keys: wherever the interpreter switches threads, a
    read never misses a key that stays, never shows a key twice or out of order, and never
    fails. Emulated without threads, for every place a switch could happen: a read runs before
    each bytecode of every change (splits and merges all along, at a load of 4)."""
    staying = [f"{n:04d}" for n in range(0, 400, 2)]
    index = SortedKeys(staying, load=4)
    changing = {"add", "discard", "_split", "_merge"}
    failures: list[str] = []
    reads = 0

    def read() -> None:
        nonlocal reads
        reads += 1
        try:
            keys = list(index.between("", None))
            parts = [key for part in index.slices_between("0100", "0300") for key in part]
            count = index.count_between("0100", "0300")
        except Exception as error:  # the failure is the finding
            failures.append(f"a read failed: {error!r}")
            return
        if keys != sorted(set(keys)) or not set(staying) <= set(keys):
            failures.append("a read missed a staying key, or showed one twice or out of order")
        within = [key for key in staying if "0100" <= key < "0300"]
        if parts != sorted(set(parts)) or not set(within) <= set(parts) or count < len(within):
            failures.append("a range or count missed a staying key")

    def each_step(frame: FrameType, event: str, arg: object) -> Any:
        if event == "opcode":
            read()
        return each_step

    def calls(frame: FrameType, event: str, arg: object) -> Any:
        if frame.f_code.co_filename == sortedkeys.__file__ and frame.f_code.co_name in changing:
            frame.f_trace_opcodes = True
            return each_step
        return None

    sys.settrace(calls)
    try:
        for n in range(1, 400, 2):
            index.add(f"{n:04d}")
        for n in range(1, 400, 2):
            index.discard(f"{n:04d}")
    finally:
        sys.settrace(None)
    assert reads > 10_000
    assert not failures, failures[0]
    assert list(index) == staying
