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
    store = Indexer()
    store.upsert(obj)
    kept = store.get_encoded("o")
    assert kept is not None
    text = store.json_of(kept)  # what the reader searches: the JSON, fragments put back
    if selector.matches(labels):
        assert all(any(n in text for n in alternatives) for alternatives in _needles(selector))


def test_what_every_object_shares_is_not_kept_with_each() -> None:
    """Objects of one kind in one namespace: each kept without the start of its JSON up to its
    kind, with its namespace member and the usual metadata fragments a byte each, and no set of
    the namespace's keys until a second namespace appears."""
    store = Indexer()
    things = [make("a", f"thing-{n}", ["red"], n) for n in range(3)]
    for thing in things:
        store.upsert(thing)
    head = b'{"apiVersion":"v1","kind":"Thing",'
    for thing in things:
        encoded = store.get_encoded(object_key(thing))
        assert encoded is not None and store.json_of(encoded) == orjson.dumps(thing)
        # '"metadata":{"name":"thing-0","resourceVersion":"0","namespace":"a"},"spec":{"teams":'
        # keeps the name, the version and the teams: three fragments are a byte each.
        written = orjson.dumps(thing)[len(head) :]
        assert len(encoded) == len(written) - (len(b'"metadata":{"name":"') - 1) - (
            len(b',"resourceVersion":"') - 1
        ) - (len(b'"namespace":"a"') - 1)
        assert b"thing-" in encoded and b"metadata" not in encoded and b"namespace" not in encoded
    # Kind first, as Go writes a built-in kind: the same start left out.
    kinds_first = Indexer()
    first = make("a", "first", [], 1, "kind first")
    kinds_first.upsert(first)
    kept = kinds_first.get_encoded("a/first")
    assert kept is not None and not kept.startswith((b"{", b'"kind"', b'"apiVersion"'))
    assert kinds_first.json_of(kept) == orjson.dumps(first)
    assert store._by_namespace is None
    assert store.keys_in_namespace("a") == sorted(object_key(thing) for thing in things)
    store.upsert(make("b", "other", [], 9))
    assert store._by_namespace is not None
    assert store.keys_in_namespace("a") == sorted(object_key(thing) for thing in things)
    assert store.keys_in_namespace("b") == ["b/other"]


#: Strings that look like what the store leaves out: its fragments, its tokens (control
#: characters, which JSON escapes), quotes and escapes.
TRICKY = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            '"metadata":{"name":"',
            '"namespace":"',
            "name",
            "\x01",
            "\x02\x1f",
            '","uid":"',
            '\\"',
            "{",
            "a",
        ]
    ),
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | TRICKY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TRICKY, inner, max_size=3),
    max_leaves=12,
)


@given(
    objects=st.lists(
        st.tuples(
            st.sampled_from(["", "a", "ns-\x01", '"q"']),
            st.sampled_from(["x", "y", "uid", '"metadata":{"name":"']),
            st.dictionaries(TRICKY, JSON, max_size=4),
            st.dictionaries(TRICKY, JSON, max_size=3),
            SHAPES,
        ),
        min_size=1,
        max_size=6,
    )
)
@settings(max_examples=300, deadline=None)
def test_every_object_reads_back_as_the_json_orjson_wrote(
    objects: list[tuple[str, str, dict[str, Any], dict[str, Any], str]],
) -> None:
    """Whatever an object holds (strings made of the left-out fragments, control characters,
    quotes, other namespaces and starts than the first object's), its kept form reads back as
    the exact JSON it was written as; and two objects are kept alike only when they are alike."""
    store = Indexer()
    written: dict[str, bytes] = {}
    for namespace, name, meta_extra, body, shape in objects:
        obj = make(namespace, name, [], 1, shape)
        obj["metadata"].update({k: v for k, v in meta_extra.items() if k not in ("name", "namespace")})
        obj["spec"] = body
        store.upsert(obj)
        written[object_key(obj)] = orjson.dumps(obj)
    kept = {}
    for key, json in written.items():
        encoded = store.get_encoded(key)
        assert encoded is not None and store.json_of(encoded) == json
        assert orjson.dumps(store.decode(encoded)) == json
        kept[key] = encoded
    for key, other in written.items():
        for key2, other2 in written.items():
            assert (kept[key] == kept[key2]) == (other == other2)
