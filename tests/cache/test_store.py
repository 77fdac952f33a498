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


#: How an object starts: as the server writes every object (apiVersion, then kind), another
#: kind or version (the store keeps the first one's start only), kind first, or no apiVersion.
SHAPES = st.sampled_from(["usual", "usual", "other kind", "other version", "kind first", "no apiVersion"])


def make(namespace: str, name: str, teams: list[str], version: int, shape: str = "usual") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": str(version)}
    if namespace:
        meta["namespace"] = namespace
    body = {"metadata": meta, "spec": {"teams": teams}}
    if shape == "kind first":
        return {"kind": "Thing", "apiVersion": "v1", **body}
    if shape == "no apiVersion":
        return {"kind": "Thing", **body}
    api_version, kind = {"other kind": ("v1", "Other"), "other version": ("x/v2", "Thing")}.get(shape, ("v1", "Thing"))
    return {"apiVersion": api_version, "kind": kind, **body}


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = Indexer({"teams": by_teams})
        self.model: dict[str, dict[str, Any]] = {}
        self.funcs = {"teams": by_teams}
        self.version = 0

    @rule(namespace=NAMESPACES, name=NAMES, teams=TEAMS, shape=SHAPES)
    def upsert(self, namespace: str, name: str, teams: list[str], shape: str) -> None:
        self.version += 1
        obj = make(namespace, name, teams, self.version, shape)
        key = object_key(obj)
        old = self.store.upsert(obj)
        assert (old is None) == (key not in self.model)
        if old is not None:
            assert self.store.decode(old) == self.model[key]
        self.model[key] = obj

    @rule(namespace=NAMESPACES, name=NAMES)
    def upsert_the_same_again(self, namespace: str, name: str) -> None:
        """What a relist compares: the kept form of an unchanged object is the same bytes."""
        key = object_key(make(namespace, name, [], 0))
        if key in self.model:
            before = self.store.get_encoded(key)
            assert self.store.upsert(self.model[key]) == before == self.store.get_encoded(key)

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
            # The same JSON, members in the same order, however the object starts.
            assert orjson.dumps(store.get(key)) == orjson.dumps(obj)
            encoded = store.get_encoded(key)
            assert encoded is not None and store.decode(encoded) == obj
        assert sorted(map(orjson.dumps, store.objects())) == sorted(map(orjson.dumps, model.values()))
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


def test_what_every_object_shares_is_not_kept_with_each() -> None:
    """Objects of one kind in one namespace: each kept without the start of its JSON up to its
    kind, and no set of the namespace's keys until a second namespace appears."""
    store = Indexer()
    things = [make("a", f"thing-{n}", ["red"], n) for n in range(3)]
    for thing in things:
        store.upsert(thing)
    head = b'{"apiVersion":"v1","kind":"Thing",'
    for thing in things:
        encoded = store.get_encoded(object_key(thing))
        assert encoded == orjson.dumps(thing)[len(head) :]
    # Kind first, as Go writes a built-in kind: the same.
    kinds_first = Indexer()
    first = make("a", "first", [], 1, "kind first")
    kinds_first.upsert(first)
    assert kinds_first.get_encoded("a/first") == orjson.dumps(first)[len(b'{"kind":"Thing","apiVersion":"v1",') :]
    assert store._by_namespace is None
    assert store.keys_in_namespace("a") == sorted(object_key(thing) for thing in things)
    store.upsert(make("b", "other", [], 9))
    assert store._by_namespace is not None
    assert store.keys_in_namespace("a") == sorted(object_key(thing) for thing in things)
    assert store.keys_in_namespace("b") == ["b/other"]
