"""An indexed object store (client-go's ``cache.Indexer``), keyed ``namespace/name``.

Index functions map an object to the values it is found under (``by_namespace`` is built in; a
field index is an index whose function reads a field). Lookups return the stored dicts: callers
must not change them (the informer hands out the same objects to every reader).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

Obj = dict[str, Any]
IndexFunc = Callable[[Obj], Iterable[str]]

NAMESPACE_INDEX = "namespace"


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` (``name`` for cluster-scoped objects), client-go's MetaNamespaceKeyFunc."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = meta.get("name", "")
    return f"{namespace}/{name}" if namespace else str(name)


def by_namespace(obj: Obj) -> list[str]:
    return [str((obj.get("metadata") or {}).get("namespace") or "")]


class Indexer:
    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._items: dict[str, Obj] = {}
        self._index_funcs: dict[str, IndexFunc] = {NAMESPACE_INDEX: by_namespace, **(indexers or {})}
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._index_funcs}

    def __len__(self) -> int:
        return len(self._items)

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        for name, func in indexers.items():
            if name in self._index_funcs:
                raise ValueError(f"index {name!r} already exists")
            self._index_funcs[name] = func
            self._indices[name] = {}
            for key, obj in self._items.items():
                self._index_one(name, func, key, obj)

    def upsert(self, obj: Obj) -> Obj | None:
        """Store ``obj``; returns the object it replaced, if any."""
        key = object_key(obj)
        old = self._items.get(key)
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        for name, func in self._index_funcs.items():
            self._index_one(name, func, key, obj)
        return old

    def delete(self, obj: Mapping[str, Any]) -> Obj | None:
        key = object_key(obj)
        old = self._items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def get(self, key: str) -> Obj | None:
        return self._items.get(key)

    def list_keys(self) -> list[str]:
        return list(self._items)

    def objects(self) -> list[Obj]:
        return list(self._items.values())

    def by_index(self, index: str, value: str) -> list[Obj]:
        if index not in self._indices:
            raise KeyError(f"no index named {index!r}")
        return [self._items[key] for key in sorted(self._indices[index].get(value, ()))]

    def _index_one(self, name: str, func: IndexFunc, key: str, obj: Obj) -> None:
        index = self._indices[name]
        for value in func(obj):
            index.setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: Obj) -> None:
        for name, func in self._index_funcs.items():
            index = self._indices[name]
            for value in func(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
