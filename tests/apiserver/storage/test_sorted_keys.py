"""The watch cache's key index (``storage.sortedkeys``) against a plain sorted list: any
sequence of additions and removals, then every range and count the cache asks for."""

from __future__ import annotations

import bisect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

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
        chunks = self.index._chunks
        assert all(chunks) and all(len(chunk) <= 2 * self.load for chunk in chunks)
        assert self.index._lasts == [chunk[-1] for chunk in chunks]


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
    untouched = index._chunks[1:]
    index.add("/registry/apps/deployments/ns/a")
    assert index._chunks[1:] == untouched and all(
        after is before for after, before in zip(index._chunks[1:], untouched, strict=True)
    )
    assert next(iter(index)) == "/registry/apps/deployments/ns/a"
    assert len(index) == 100_001


def test_a_small_chunk_merges_with_its_neighbour() -> None:
    index = SortedKeys((f"{n:03d}" for n in range(40)), load=8)
    assert [len(chunk) for chunk in index._chunks] == [8, 8, 8, 8, 8]
    for n in range(8, 15):  # the second chunk down to one key: below a quarter of the load
        index.discard(f"{n:03d}")
    assert [len(chunk) for chunk in index._chunks] == [9, 8, 8, 8]
    assert index._lasts == ["015", "023", "031", "039"]
    assert list(index.between("007", "017")) == ["007", "015", "016"]


def test_a_load_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="load"):
        SortedKeys(load=0)
