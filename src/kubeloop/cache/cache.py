"""The cache: shared informers per kind and the reader over them (controller-runtime's
``cache.Cache``).

``informer_for(kind)`` creates a kind's informer on first use, scoped by ``CacheOptions``
(namespaces, selectors, transform; ``metadata_only`` informers are separate); informers created
after ``start()`` start at once. Reads wait until the kind's informer has synced (creating it
unless ``reader_fails_on_missing_informer``) and return fresh copies:

- ``get(kind, name, namespace=...)``: NotFound when absent, ``OutOfScope`` for a namespace the
  cache does not watch;
- ``list(kind, namespace=..., label_selector=…, match_labels=…, field_selector=…, index=…)``: the
  full label-selector grammar; field selectors must be exact matches (``field=value``) on
  ``metadata.name``, ``metadata.namespace`` or a field registered with ``add_index`` — as in
  controller-runtime, the cache cannot evaluate arbitrary fields.
"""

from __future__ import annotations

import asyncio
from typing import Unpack

import orjson

from kubeloop import errors
from kubeloop.api.fields import EQUALS, FieldSelector
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.labels import (
    DOUBLE_EQUALS,
    EXISTS,
    GREATER_THAN,
    IN,
    LESS_THAN,
    LabelSelector,
    combined_selector,
)
from kubeloop.api.labels import EQUALS as LABEL_EQUALS
from kubeloop.api.object import Obj
from kubeloop.cache.informer import Informer
from kubeloop.cache.options import CacheOptions, Scope, by_object_scopes
from kubeloop.cache.store import IndexFunc, namespace_of_key
from kubeloop.client.calloptions import ListOptions
from kubeloop.client.interface import KindRef, gvk_of
from kubeloop.client.rest import APIClient
from kubeloop.errors import InvalidSelector
from kubeloop.gcpause import gc_paused

_NAME_FIELD = "metadata.name"
_NAMESPACE_FIELD = "metadata.namespace"


class OutOfScope(LookupError):
    """A read of something the cache does not hold (a namespace outside its scope)."""


class NotCached(LookupError):
    """A read of a kind no informer exists for, with ``reader_fails_on_missing_informer``."""


class Cache:
    """The informer cache of a manager (controller-runtime's ``cache.Cache``): an informer per
    kind, created on first use in the kind's scope, and the reader a cached client asks::

        cache = Cache(client, CacheOptions(default_namespaces=["shop"]))
        cache.informer_for(kinds.ConfigMap)
        cache.start()
        await cache.wait_for_sync(30)
        settings = await cache.get(kinds.ConfigMap, "settings", namespace="shop")
    """

    def __init__(
        self, client: APIClient, options: CacheOptions | None = None, *, sync_timeout: float = 120.0
    ) -> None:
        self.client = client
        self.options = options or CacheOptions()
        self.sync_timeout = sync_timeout
        self._by_object = by_object_scopes(self.options)
        self._informers: dict[tuple[GroupVersionKind, bool], Informer] = {}
        self._started = False

    # ------------------------------------------------------------------ informers

    def informer_for(self, kind: KindRef, *, metadata_only: bool = False) -> Informer:
        """The shared informer of ``kind`` (created on first use, in the kind's scope)."""
        gvk = gvk_of(kind)
        informer = self._informers.get((gvk, metadata_only))
        if informer is None:
            scope = self.scope_of(gvk)
            informer = Informer(
                self.client,
                gvk,
                namespaces=scope.namespaces,
                label_selector=scope.label_selector,
                field_selector=scope.field_selector,
                transform=scope.transform,
                metadata_only=metadata_only,
                resync_period=scope.sync_period,
                namespace_selectors=scope.namespace_selectors,
                watch_error_handler=self.options.watch_error_handler,
            )
            self._informers[(gvk, metadata_only)] = informer
            if self._started:
                informer.start()
        return informer

    async def remove_informer(self, kind: KindRef, *, metadata_only: bool = False) -> None:
        """Stop ``kind``'s informer and forget it (controller-runtime's ``RemoveInformer``), e.g.
        once its CRD is gone; a later ``informer_for`` starts a new one."""
        informer = self._informers.pop((gvk_of(kind), metadata_only), None)
        if informer is not None:
            await informer.stop()

    def scope_of(self, kind: KindRef) -> Scope:
        """What ``kind``'s informer holds: the cache's defaults merged with its ``ByObject``."""
        gvk = gvk_of(kind)
        return Scope.of(self.options, self._by_object.get(gvk))

    @property
    def informers(self) -> dict[tuple[GroupVersionKind, bool], Informer]:
        """Every informer, by (kind, metadata only)."""
        return dict(self._informers)

    def add_index(self, kind: KindRef, field: str, index: IndexFunc, *, metadata_only: bool = False) -> None:
        """Index ``kind``'s cached objects by ``index(obj)`` under ``field`` (IndexField): then
        ``list(kind, field_selector=f"{field}=value")`` or ``index=(field, value)`` finds them."""
        self.informer_for(kind, metadata_only=metadata_only).store.add_indexers({field: index})

    # ------------------------------------------------------------------ lifecycle

    @property
    def started(self) -> bool:
        """Whether ``start`` was called (informers made later start at once)."""
        return self._started

    def start(self) -> None:
        """Start every informer (and those made from now on)."""
        self._started = True
        for informer in self._informers.values():
            informer.start()

    async def wait_for_sync(self, timeout: float | None = None) -> list[GroupVersionKind]:
        """Wait for every informer; the kinds that did not sync within ``timeout`` (empty: all did)."""
        informers = list(self._informers.items())
        synced = await asyncio.gather(*(informer.wait_for_sync(timeout) for _, informer in informers))
        return [gvk for ((gvk, _), informer), ok in zip(informers, synced, strict=True) if not ok]

    @property
    def has_synced(self) -> bool:
        """Whether every informer has listed its objects once."""
        return all(informer.has_synced for informer in self._informers.values())

    def unsynced(self) -> list[str]:
        """The kinds whose informers have not synced yet, as text."""
        return [str(gvk) for (gvk, _), informer in self._informers.items() if not informer.has_synced]

    async def stop(self) -> None:
        """Stop every informer, the newest first."""
        for informer in reversed(list(self._informers.values())):
            await informer.stop()
        self._started = False

    # ------------------------------------------------------------------ the reader

    async def get(
        self, kind: KindRef, name: str, *, namespace: str | None = None, metadata_only: bool = False
    ) -> Obj:
        """The cached object (a fresh copy). NotFound if absent; OutOfScope for an unwatched namespace."""
        informer = self._informers.get((kind, metadata_only)) if type(kind) is GroupVersionKind else None
        if informer is None or not informer.has_synced:
            informer = await self._synced_informer(kind, metadata_only)
        if informer.namespaced:
            if informer.namespaces is not None:
                self._check_namespace(informer, namespace, f"unable to get: {namespace}/{name}")
            key = f"{namespace}/{name}" if namespace else name
        else:
            key = name
        obj = informer.store.get(key)
        if obj is None:
            raise _not_found(informer.kind, name)
        return obj

    async def list(
        self,
        kind: KindRef,
        *,
        namespace: str | None = None,
        index: tuple[str, str] | None = None,
        metadata_only: bool = False,
        **options: Unpack[ListOptions],
    ) -> list[Obj]:
        """Cached objects of ``kind`` (fresh copies, ordered by key) that match every filter.

        Raises InvalidSelector for a selector that does not parse or asks what the cache cannot
        answer (a non-exact field match), KeyError for a field without an index, OutOfScope for
        an unwatched namespace.
        """
        labels = combined_selector(options.get("label_selector"), options.get("match_labels"))
        field_selector = options.get("field_selector")
        fields = FieldSelector.parse(field_selector) if isinstance(field_selector, str) else field_selector
        informer = await self._synced_informer(kind, metadata_only)
        store = informer.store
        namespaced = bool(informer.namespaced)
        names: set[str] | None = None
        lookups: list[tuple[str, str]] = [index] if index is not None else []
        for field, operator, value in fields.requirements if fields is not None else ():
            if operator != EQUALS:
                raise InvalidSelector(
                    f"field selectors on the cache need exact matches (field=value): {field}{operator}{value}"
                )
            if field == _NAMESPACE_FIELD:
                if namespace is not None and namespace != value:
                    return []
                namespace = value
            elif field == _NAME_FIELD:
                names = {value} if names is None or value in names else set()
            else:
                lookups.append((field, value))
        if not namespaced:
            namespace = None
        elif namespace is not None:
            self._check_namespace(informer, namespace, "unable to list")
        keys: list[str] | None = None
        for index_name, value in lookups:
            found = store.keys_by_index(index_name, value)
            if keys is None:
                keys = found
            else:
                wanted = set(found)
                keys = [key for key in keys if key in wanted]
        if keys is None:
            keys = store.keys_in_namespace(namespace) if namespace is not None else sorted(store.list_keys())
        elif namespace is not None:
            keys = [key for key in keys if namespace_of_key(key) == namespace]
        if names is not None:
            keys = [key for key in keys if key.rpartition("/")[2] in names]
        needles = _needles(labels) if labels is not None else []
        out: list[Obj] = []
        with gc_paused():
            for key in keys:
                encoded = store.get_encoded(key)
                if encoded is None:
                    continue
                text = store.json_of(encoded)
                if needles and not all(any(n in text for n in alternatives) for alternatives in needles):
                    continue  # cannot match: skip decoding it
                obj = orjson.loads(text)
                if labels is None or labels.matches((obj.get("metadata") or {}).get("labels") or {}):
                    out.append(obj)
        return out

    # ------------------------------------------------------------------ internals

    async def _synced_informer(self, kind: KindRef, metadata_only: bool) -> Informer:
        gvk = gvk_of(kind)
        informer = self._informers.get((gvk, metadata_only))
        if informer is None:
            if self.options.reader_fails_on_missing_informer:
                raise NotCached(f"no informer for {gvk}{' (metadata only)' if metadata_only else ''}")
            informer = self.informer_for(gvk, metadata_only=metadata_only)
        informer.start()  # a no-op when running; a first read before start() starts it
        # A read the server refuses (a kind it does not serve, a list RBAC forbids) fails at once
        # with its words, rather than waiting out the timeout in silence.
        if not informer.has_synced and not await informer.wait_for_sync(
            self.sync_timeout, fail_on_refusal=True
        ):
            raise TimeoutError(f"the cache of {gvk} did not sync within {self.sync_timeout}s")
        return informer

    @staticmethod
    def _check_namespace(informer: Informer, namespace: str | None, what: str) -> None:
        if informer.namespaces is not None and namespace not in informer.namespaces:
            raise OutOfScope(
                f"{what} because of unknown namespace for the cache: {namespace!r} "
                f"(the cache of {informer.kind} holds {', '.join(informer.namespaces)})"
            )


def _needles(selector: LabelSelector) -> list[list[bytes]]:
    """Byte strings a stored object must contain to match ``selector`` — one of each list.

    An object whose labels hold ``key: value`` contains ``"key":"value"`` in its compact JSON
    (label keys and values need no escaping), so requirements that need a label (``=``, ``==``,
    ``in``, exists) rule out most objects without decoding them. Necessary, not sufficient: the
    decoded labels are matched afterwards.
    """
    needles: list[list[bytes]] = []
    for requirement in selector.requirements:
        key = orjson.dumps(requirement.key)
        if requirement.operator in (IN, LABEL_EQUALS, DOUBLE_EQUALS):
            needles.append([key + b":" + orjson.dumps(value) for value in requirement.values])
        elif requirement.operator in (EXISTS, GREATER_THAN, LESS_THAN):
            needles.append([key + b":"])
    return needles


def _not_found(gvk: GroupVersionKind, name: str) -> errors.NotFound:
    message = f'{gvk.kind.lower()} "{name}" not found'
    return errors.NotFound(message, name=name, group=gvk.group, kind=gvk.kind.lower())
