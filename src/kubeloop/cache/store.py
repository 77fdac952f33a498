"""An indexed object store (client-go's ``cache.Indexer``), keyed ``namespace/name``.

Objects are kept as compact JSON (orjson bytes), not as decoded dicts, which cost several times
their JSON size (benchmark B3, docs/design/performance.md); every read decodes a fresh copy —
which controller-runtime pays anyway as a DeepCopy, and which keeps readers from changing the
cache. A relist tells changed objects from unchanged ones by comparing the kept forms, without
decoding. What every object of a store usually shares is not kept with each: the start of its
JSON through its apiVersion and kind, in either order (``{"kind":"ConfigMap","apiVersion":"v1",``,
put back when it is read; an object that starts otherwise is kept whole); the JSON fragments
most objects repeat (``"metadata":{"name":"``, ``"uid":"``, ``"ownerReferences":[{"apiVersion":"``,
the namespace of the store's first object with its name…), each kept as one control byte,
which compact JSON never holds raw, and put back by the byte; and, while the store holds one
namespace only, a set of the keys in it. 20,000 small objects: 543 → 445 bytes each with the
start and the set, a widget 250 → 131 bytes and a ConfigMap with an owner 384 → 190 with the
fragments too.

Index functions map an object to the values it is found under (``NAMESPACE_INDEX`` is built in
and costs nothing: the namespace is the key's prefix; a field index is an index function that
reads a field). Index values are computed when an object is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import orjson

from kubeloop.api.object import Obj
from kubeloop.gcpause import gc_paused

IndexFunc = Callable[[Obj], Iterable[str]]

NAMESPACE_INDEX = "namespace"

_decode = orjson.loads
_OPEN_BRACE = ord("{")

#: JSON fragments that most objects a controller caches repeat, longest first where one holds
#: another (``"name":"`` is in several). Each is kept as a control byte (below): compact JSON
#: writes none raw, so putting each fragment back for its byte gives the exact JSON again.
_FRAGMENTS = (
    b'"metadata":{"name":"',
    b'"ownerReferences":[{"apiVersion":"',
    b'","blockOwnerDeletion":true,"controller":true,"kind":"',
    b',"creationTimestamp":"',
    b',"resourceVersion":"',
    b',"generation":',
    b'"annotations":{"',
    b'"labels":{"',
    b'"namespace":"',
    b',"uid":"',
    b'","name":"',
    b'"apiVersion":"',
    b'"},"spec":{"',
    b'},"status":{"',
)
#: The bytes that stand for fragments: control characters other than JSON's whitespace.
_TOKENS = tuple(bytes([code]) for code in range(1, 32) if code not in (9, 10, 13))


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` (``name`` for cluster-scoped objects), client-go's MetaNamespaceKeyFunc."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = meta.get("name", "")
    return f"{namespace}/{name}" if namespace else str(name)


def namespace_of_key(key: str) -> str:
    """The namespace part of a store key ("" for a cluster-scoped object)."""
    namespace, slash, _ = key.partition("/")
    return namespace if slash else ""


class Indexer:
    """The store of this module's docstring: objects by ``namespace/name``, kept encoded,
    and the indices its index functions compute::

        store = Indexer({"by-app": lambda obj: [obj["metadata"]["labels"]["app"]]})
        store.upsert(configmap)
        store.by_index("by-app", "web")
    """

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._items: dict[str, bytes] = {}
        #: The objects of each namespace, counted; their keys as sets once a second one appears.
        self._in_namespace: dict[str, int] = {}
        self._by_namespace: dict[str, set[str]] | None = None
        #: The shared start of the objects' JSON (their apiVersion and kind), taken from the
        #: first object stored; an object starting with it is kept without it.
        self._head: bytes | None = None
        #: (fragment, token) in the order fragments are replaced (each token stands for its
        #: fragment alone, so they are put back in any order); the first object's namespace
        #: member (``"namespace":"ns"``) leads them.
        self._fragments: tuple[tuple[bytes, bytes], ...] = ()
        self._index_funcs: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, set[str]]] = {}
        # Per key, the values it is indexed under in each custom index (to unindex without decoding).
        self._indexed: dict[str, tuple[tuple[str, ...], ...]] = {}
        if indexers:
            self.add_indexers(indexers)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    @property
    def index_names(self) -> list[str]:
        """The names of the indices (the namespace one included)."""
        return [NAMESPACE_INDEX, *self._index_funcs]

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add indexes; objects already stored are decoded once and indexed."""
        for name in indexers:
            if name == NAMESPACE_INDEX or name in self._index_funcs:
                raise ValueError(f"index {name!r} already exists")
        for name, func in indexers.items():
            self._index_funcs[name] = func
            self._indices[name] = {}
        for key, encoded in self._items.items():
            obj = self.decode(encoded)
            values = self._indexed.get(key, ())
            added = tuple(tuple(func(obj)) for func in indexers.values())
            self._indexed[key] = values + added
            for name, index_values in zip(indexers, added, strict=True):
                index = self._indices[name]
                for value in index_values:
                    index.setdefault(value, set()).add(key)

    # ------------------------------------------------------------------ writes

    def upsert(self, obj: Obj) -> bytes | None:
        """Store ``obj``; returns the object it replaced as kept (:meth:`decode` reads it), if
        any (compare it with ``get_encoded(key)`` to tell whether anything changed)."""
        key = object_key(obj)
        encoded = self._compact(obj)
        old = self._items.get(key)
        if old is None:
            self._count_in(key)
        elif self._index_funcs:
            self._unindex(key)
        self._items[key] = encoded
        if self._index_funcs:
            values = tuple(tuple(func(obj)) for func in self._index_funcs.values())
            self._indexed[key] = values
            for index, index_values in zip(self._indices.values(), values, strict=True):
                for value in index_values:
                    index.setdefault(value, set()).add(key)
        return old

    def delete(self, obj: Mapping[str, Any]) -> bytes | None:
        """Remove ``obj``; returns it as kept (:meth:`decode` reads it), if it was stored."""
        return self.delete_key(object_key(obj))

    def delete_key(self, key: str) -> bytes | None:
        """Remove ``key``; returns its object as kept (:meth:`decode` reads it), if it was stored."""
        old = self._items.pop(key, None)
        if old is None:
            return None
        namespace = namespace_of_key(key)
        left = self._in_namespace[namespace] - 1
        if left:
            self._in_namespace[namespace] = left
        else:
            del self._in_namespace[namespace]
        if self._by_namespace is not None:
            keys = self._by_namespace[namespace]
            keys.discard(key)
            if not keys:
                del self._by_namespace[namespace]
        if self._index_funcs:
            self._unindex(key)
            del self._indexed[key]
        return old

    # ------------------------------------------------------------------ reads (fresh copies)

    def get(self, key: str) -> Obj | None:
        """The object at ``key`` (a fresh copy), or None."""
        encoded = self._items.get(key)
        return self.decode(encoded) if encoded is not None else None

    def get_encoded(self, key: str) -> bytes | None:
        """The object at ``key`` as stored (compact bytes: :meth:`decode` reads them), or None."""
        return self._items.get(key)

    def decode(self, encoded: bytes) -> Obj:
        """An object as :meth:`get_encoded` gives it, decoded (a fresh copy)."""
        obj: Obj = _decode(self.json_of(encoded))
        return obj

    def json_of(self, encoded: bytes) -> bytes:
        """The compact JSON of an object as :meth:`get_encoded` gives it (what orjson wrote)."""
        for fragment, token in self._fragments:
            encoded = encoded.replace(token, fragment)
        # Kept whole (a "{" first), or without the head (a member's name first).
        return encoded if encoded[0] == _OPEN_BRACE else (self._head or b"") + encoded

    def list_keys(self) -> list[str]:
        """Every key stored."""
        return list(self._items)

    def keys_in_namespace(self, namespace: str) -> list[str]:
        """The keys of ``namespace``'s objects, sorted."""
        if self._by_namespace is not None:
            return sorted(self._by_namespace.get(namespace, ()))
        return sorted(self._items) if namespace in self._in_namespace else []

    def keys_by_index(self, index: str, value: str) -> list[str]:
        """The keys ``index`` finds under ``value``, sorted (KeyError for an unknown index)."""
        if index == NAMESPACE_INDEX:
            return self.keys_in_namespace(value)
        if index not in self._indices:
            raise KeyError(f"no index named {index!r}")
        return sorted(self._indices[index].get(value, ()))

    def index_values(self, index: str, key: str) -> tuple[str, ...]:
        """The values ``key`` is indexed under in ``index``."""
        if index == NAMESPACE_INDEX:
            return (namespace_of_key(key),)
        if index not in self._indices:
            raise KeyError(f"no index named {index!r}")
        position = list(self._index_funcs).index(index)
        indexed = self._indexed.get(key)
        return indexed[position] if indexed is not None else ()

    def objects(self) -> list[Obj]:
        """Every object stored (fresh copies)."""
        decode = self.decode
        with gc_paused():
            return [decode(encoded) for encoded in self._items.values()]

    def each_object(self) -> Iterator[Obj]:
        """Every object stored, each decoded as it is reached (a fresh copy), so that only one is
        held decoded at a time: :meth:`objects` holds them all, several times their encoded size
        (10,000 widgets: ~15 MiB). The objects are those stored when the iteration starts."""
        for encoded in list(self._items.values()):
            yield self.decode(encoded)

    def by_index(self, index: str, value: str) -> list[Obj]:
        """The objects ``index`` finds under ``value`` (fresh copies)."""
        keys = self.keys_by_index(index, value)
        decode = self.decode
        with gc_paused():
            return [decode(self._items[key]) for key in keys]

    # ------------------------------------------------------------------ internals

    def _compact(self, obj: Obj) -> bytes:
        """``obj`` as kept: its JSON, without the shared head when it starts with it, with its
        fragments a byte each. A copy of orjson's bytes the size it needs, as they sit in a
        larger allocation (4 KiB for a 1.4 KB Pod): what makes the store cost ~1.0x the JSON
        size instead of ~2.9x."""
        written = orjson.dumps(obj)
        head = self._head
        if head is None:
            head = self._head = _head_of(obj, written)
            self._fragments = _fragments_of(obj)
        kept = written[len(head) :] if head and written.startswith(head) else written
        for fragment, token in self._fragments:
            kept = kept.replace(fragment, token)
        # A copy the size it needs (orjson's bytes sit in a larger allocation), unless slicing
        # or replacing made one already.
        return memoryview(kept).tobytes() if kept is written else kept

    def _count_in(self, key: str) -> None:
        """A new key: counted in its namespace, and in its namespace's set once there are two."""
        namespace = namespace_of_key(key)
        self._in_namespace[namespace] = self._in_namespace.get(namespace, 0) + 1
        by_namespace = self._by_namespace
        if by_namespace is None:
            if len(self._in_namespace) == 1:
                return
            by_namespace = self._by_namespace = {}
            for stored in self._items:  # the keys stored so far, all of one namespace
                by_namespace.setdefault(namespace_of_key(stored), set()).add(stored)
        by_namespace.setdefault(namespace, set()).add(key)

    def _unindex(self, key: str) -> None:
        for index, index_values in zip(self._indices.values(), self._indexed.get(key, ()), strict=False):
            for value in index_values:
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]


def _fragments_of(obj: Obj) -> tuple[tuple[bytes, bytes], ...]:
    """The fragments a store keeps as tokens, with theirs: the namespace member of ``obj`` (the
    first object stored), when it has one, then :data:`_FRAGMENTS`."""
    meta = obj.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    first = (b'"namespace":' + orjson.dumps(namespace),) if isinstance(namespace, str) and namespace else ()
    return tuple(zip((*first, *_FRAGMENTS), _TOKENS, strict=False))


def _head_of(obj: Obj, encoded: bytes) -> bytes:
    """The start of ``encoded`` through its apiVersion and kind, in either order (Go writes a
    built-in kind's ``kind`` first, a custom resource's members sorted), or b"" when the object
    does not start with both (nothing is then left out of any object)."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return b""
    version_member = b'"apiVersion":' + orjson.dumps(api_version)
    kind_member = b'"kind":' + orjson.dumps(kind)
    for first, second in ((version_member, kind_member), (kind_member, version_member)):
        head = b"{" + first + b"," + second + b","
        if encoded.startswith(head):
            return head
    return b""
