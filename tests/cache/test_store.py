"""The indexed store against a model (a dict of objects, indexes computed by brute force):
upserts, deletes and indexes added late keep every lookup right; reads are fresh copies."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kubeloop.api.labels import LabelSelector, Requirement
from kubeloop.cache.cache import _needles
from kubeloop.cache.store import NAMESPACE_INDEX, Indexer, object_key

NAMESPACES = st.sampled_from(["", "a", "b"])
NAMES = st.sampled_from(["x", "y", "z", "w"])
TEAMS = st.lists(st.sampled_from(["red", "blue", "green"]), max_size=2, unique=True)


def by_teams(obj: dict[str, Any]) -> list[str]:
    return list((obj.get("spec") or {}).get("teams") or [])


def by_name_length(obj: dict[str, Any]) -> list[str]:
    return [str(len(obj["metadata"]["name"]))]


def make(namespace: str, name: str, teams: list[str], version: int) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": str(version)}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Thing", "metadata": meta, "spec": {"teams": teams}}


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = Indexer({"teams": by_teams})
        self.model: dict[str, dict[str, Any]] = {}
        self.funcs = {"teams": by_teams}
        self.version = 0

    @rule(namespace=NAMESPACES, name=NAMES, teams=TEAMS)
    def upsert(self, namespace: str, name: str, teams: list[str]) -> None:
        self.version += 1
        obj = make(namespace, name, teams, self.version)
        key = object_key(obj)
        old = self.store.upsert(obj)
        assert (old is None) == (key not in self.model)
        self.model[key] = obj

    @rule(namespace=NAMESPACES, name=NAMES)
    def delete(self, namespace: str, name: str) -> None:
        key = object_key(make(namespace, name, [], 0))
        old = self.store.delete_key(key)
        assert (old is None) == (key not in self.model)
        self.model.pop(key, None)

    @rule()
    def add_name_index(self) -> None:
        if "length" not in self.funcs:
            self.store.add_indexers({"length": by_name_length})
            self.funcs["length"] = by_name_length

    @invariant()
    def lookups_agree(self) -> None:
        store, model = self.store, self.model
        assert len(store) == len(model)
        assert sorted(store.list_keys()) == sorted(model)
        for key, obj in model.items():
            assert store.get(key) == obj
        for namespace in ("", "a", "b"):
            expected = sorted(k for k, o in model.items() if o["metadata"].get("namespace", "") == namespace)
            assert store.keys_in_namespace(namespace) == expected
            assert store.keys_by_index(NAMESPACE_INDEX, namespace) == expected
        for name, func in self.funcs.items():
            values = {value for obj in model.values() for value in func(obj)} | {"red", "1"}
            for value in values:
                expected = sorted(k for k, o in model.items() if value in func(o))
                assert store.keys_by_index(name, value) == expected
                assert [object_key(o) for o in store.by_index(name, value)] == expected
            for key, obj in model.items():
                assert store.index_values(name, key) == tuple(func(obj))


TestStoreMachine = StoreMachine.TestCase
TestStoreMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


def test_reads_are_fresh_copies_and_index_names_are_unique() -> None:
    store = Indexer()
    store.upsert(make("a", "x", ["red"], 1))
    got = store.get("a/x")
    assert got is not None
    got["spec"]["teams"].append("changed")
    assert store.get("a/x") == make("a", "x", ["red"], 1)
    assert store.objects()[0] is not store.objects()[0]
    with pytest.raises(ValueError):
        store.add_indexers({NAMESPACE_INDEX: by_teams})
    store.add_indexers({"teams": by_teams})
    with pytest.raises(ValueError):
        store.add_indexers({"teams": by_teams})
    with pytest.raises(KeyError):
        store.keys_by_index("missing", "x")


KEYS = st.sampled_from(["app", "tier", "app.kubernetes.io/name", "example.com/x-y_z", "n"])
VALUES = st.sampled_from(["", "web", "db", "1", "10", "a.b-c_d"])
OPERATORS = st.sampled_from(["in", "notin", "=", "==", "!=", "exists", "!", "gt", "lt"])


@st.composite
def requirements(draw: st.DrawFn) -> Requirement:
    operator = draw(OPERATORS)
    if operator in ("exists", "!"):
        values: list[str] = []
    elif operator in ("gt", "lt"):
        values = [draw(st.sampled_from(["1", "10", "5"]))]
    elif operator in ("=", "==", "!="):
        values = [draw(VALUES)]
    else:
        values = draw(st.lists(VALUES, min_size=1, max_size=3, unique=True))
    return Requirement.create(draw(KEYS), operator, values)


@given(
    labels=st.dictionaries(KEYS, VALUES, max_size=4),
    other=st.dictionaries(KEYS, VALUES, max_size=3),
    chosen=st.lists(requirements(), max_size=3),
)
@settings(max_examples=300, deadline=None)
def test_the_readers_byte_prefilter_never_drops_a_match(
    labels: dict[str, str], other: dict[str, str], chosen: list[Requirement]
) -> None:
    """The cache skips decoding objects whose bytes lack what a selector needs; it must never
    skip one that matches (whatever else the object holds, e.g. the same pairs elsewhere)."""
    selector = LabelSelector(chosen)
    obj = {"metadata": {"name": "o", "labels": labels, "annotations": other}, "spec": {"nodeSelector": other}}
    encoded = memoryview(orjson.dumps(obj)).tobytes()
    if selector.matches(labels):
        assert all(any(n in encoded for n in alternatives) for alternatives in _needles(selector))
