"""The informer: one kind's objects kept in an indexed store, and handlers told what changed.

``Informer.start()`` runs its reflectors in a task the informer owns (``stop()`` cancels and
awaits it). A list replaces the store, page by page — new objects are reported added, changed
ones updated, unchanged ones not at all, and once the last page is in, objects no longer listed
are reported deleted with their last known state — and watch events then apply one by one, so
after any interruption (restart, 410) handlers converge on the final state. Handlers are called in order
on the event loop and must not block (a controller's only enqueue keys). With ``resync_period``,
every object is re-reported as an update to itself on that period (level-triggered retries).
By default ``metadata.managedFields`` is dropped before storing (``transform``), as
controller-runtime does: it is most of an object's size and controllers never read it.

Scoping: ``namespaces`` (None: all) runs one reflector per namespace into the one store (a
relist of one namespace replaces only that namespace's objects; cluster-scoped kinds ignore it),
``label_selector``/``field_selector`` filter on the server. ``metadata_only`` lists and watches
``PartialObjectMetadata`` (the store holds ``apiVersion``, ``kind`` — of the watched kind — and
``metadata``), controller-runtime's metadata informers: a fraction of the memory for kinds whose
spec a controller never reads.

An informer that cannot sync because the server refuses it — a kind it does not serve, a list
RBAC forbids, credentials it rejects — keeps retrying (RBAC may be granted, a CRD installed) and
says why in ``refusal``; ``wait_for_sync(..., fail_on_refusal=True)`` raises it at once, so a
read from the cache of a kind the operator may not list fails with the server's words instead
of hanging.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace

from kubeloop import errors
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.object import Obj
from kubeloop.cache.reflector import ListWatchOptions, Reflector
from kubeloop.cache.store import Indexer, IndexFunc, object_key
from kubeloop.client.interface import KindRef, gvk_of
from kubeloop.client.rest import APIClient
from kubeloop.client.restclient import REQUEST_ERRORS
from kubeloop.client.restmapper import NoKindMatch
from kubeloop.client.watch import WatchEvent
from kubeloop.jitter import uniform
from kubeloop.lifecycle import cancel_and_wait

log = logging.getLogger("kubeloop.cache.informer")

#: Failures that retrying does not cure by itself (someone must grant, install or fix something).
REFUSALS: tuple[type[BaseException], ...] = (
    errors.Forbidden,
    errors.Unauthorized,
    errors.NotFound,
    NoKindMatch,
)

Transform = Callable[[Obj], Obj]


def strip_managed_fields(obj: Obj) -> Obj:
    """``obj`` without ``metadata.managedFields`` (most of an object's size; controllers never
    read it): the cache's default transform, as controller-runtime's.
    """
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        meta = dict(meta)
        del meta["managedFields"]
        return {**obj, "metadata": meta}
    return obj


@dataclass
class EventHandler:
    """What to call on an add, an update and a delete (the last known state).

    An update goes to ``on_update(old, new)``, or — for a handler that never reads the replaced
    object — to ``on_update_new(new, changed)`` (``changed`` is False for a resync), which spares
    decoding the old object: most of an update's cost when no one reads it.
    """

    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj], None] | None = None
    on_update_new: Callable[[Obj, bool], None] | None = None


class Informer:
    """A shared informer (client-go's ``SharedIndexInformer``): a reflector per namespace in scope
    lists and watches ``kind`` into one indexed store, and every handler added hears of each add,
    update and delete (objects already stored arrive as adds).
    """

    def __init__(
        self,
        client: APIClient,
        kind: KindRef,
        *,
        namespaces: Collection[str] | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
        indexers: Mapping[str, IndexFunc] | None = None,
        transform: Transform | None = strip_managed_fields,
        resync_period: float | None = None,
        inactivity_timeout: float = 90.0,
        namespace_selectors: Mapping[str, tuple[str | None, str | None]] | None = None,
        watch_error_handler: Callable[[GroupVersionKind, BaseException], None] | None = None,
    ) -> None:
        self.client = client
        #: A namespace's own (label, field) selectors, where it has them (else the informer's).
        self.namespace_selectors = dict(namespace_selectors or {})
        #: Told of each failed list or watch (client-go's ``WatchErrorHandler``).
        self.watch_error_handler = watch_error_handler
        self.kind: GroupVersionKind = gvk_of(kind)
        self.namespaces: tuple[str, ...] | None = tuple(sorted(set(namespaces))) if namespaces else None
        self.metadata_only = metadata_only
        self.store = Indexer(indexers)
        self.transform = transform
        self.resync_period = resync_period
        self.options = ListWatchOptions(
            label_selector=label_selector,
            field_selector=field_selector,
            inactivity_timeout=inactivity_timeout,
            metadata_only=metadata_only,
        )
        #: Known once started: whether the kind is namespaced (None until the mapping resolved).
        self.namespaced: bool | None = None
        self.reflectors: list[Reflector] = []
        self._handlers: list[EventHandler] = []
        #: Whether any handler takes updates, and whether any reads the replaced object (only then
        #: is it decoded).
        self._wants_updates = False
        self._wants_old = False
        self._listed: set[str | None] = set()
        self._seen: dict[str | None, set[str]] = {}
        self._synced = asyncio.Event()
        self._has_synced = False
        #: Why the informer cannot sync, while the server refuses it (None otherwise).
        self.refusal: BaseException | None = None
        self._refused = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start listing and watching (once; a second call does nothing)."""
        if self._tasks:
            return
        self._tasks.append(asyncio.create_task(self._run(), name=f"informer {self.kind}"))
        if self.resync_period:
            self._tasks.append(asyncio.create_task(self._resync_loop(), name=f"resync {self.kind}"))

    async def stop(self) -> None:
        """Stop its reflectors and wait until they have."""
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)

    async def _run(self) -> None:
        """Resolve the kind's scope (retrying), then run a reflector per namespace in scope."""
        failures = 0
        while self.namespaced is None:
            try:
                self.namespaced = (await self.client.mapping(self.kind)).namespaced
            except NoKindMatch as missing:
                # As controller-runtime's Kind source: keep trying (a CRD may be installed later);
                # whoever waits for the sync gives up at its timeout, or at once if it asked to.
                delay = min(10.0, 0.5 * 2**failures) * uniform(0.5, 1.0)
                failures += 1
                log.warning(
                    "%s: %s (if it is a CRD, install it); retrying in %.1fs", self.kind, missing, delay
                )
                self._failed(missing)
                await asyncio.sleep(delay)
            except REQUEST_ERRORS as exc:
                delay = min(30.0, 0.5 * 2**failures) * uniform(0.5, 1.0)
                failures += 1
                log.warning("%s: cannot resolve the kind (%s); retrying in %.1fs", self.kind, exc, delay)
                await asyncio.sleep(delay)
        scopes: tuple[str | None, ...] = self.namespaces if self.namespaced and self.namespaces else (None,)
        self.reflectors = [
            Reflector(self.client, self.kind, self, self._list_watch_options(scope)) for scope in scopes
        ]
        for reflector in self.reflectors:
            reflector.on_failure = self._watch_failed
        tasks = [
            asyncio.create_task(
                reflector.run(), name=f"reflector {self.kind} {reflector.options.namespace or ''}"
            )
            for reflector in self.reflectors
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            await cancel_and_wait(tasks)

    @property
    def has_synced(self) -> bool:
        """Whether the first list of every namespace in scope is in the store."""
        return self._has_synced

    async def wait_for_sync(self, timeout: float | None = None, *, fail_on_refusal: bool = False) -> bool:
        """True once the first list is in the store; False if ``timeout`` passes first. With
        ``fail_on_refusal``, the server's refusal (``refusal``) is raised as soon as there is one."""
        if not fail_on_refusal:
            try:
                await asyncio.wait_for(self._synced.wait(), timeout)
            except TimeoutError:
                return False
            return True
        waits = [asyncio.ensure_future(self._synced.wait()), asyncio.ensure_future(self._refused.wait())]
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(waits)
        if self._has_synced:
            return True
        if self.refusal is not None:
            raise copy.copy(self.refusal).with_traceback(None)  # each reader's own
        return False

    def _list_watch_options(self, namespace: str | None) -> ListWatchOptions:
        """What the reflector of ``namespace`` lists and watches: the namespace's own selectors
        where it has them."""
        own = self.namespace_selectors.get(namespace) if namespace is not None else None
        if own is None:
            return replace(self.options, namespace=namespace)
        return replace(self.options, namespace=namespace, label_selector=own[0], field_selector=own[1])

    def _watch_failed(self, error: BaseException) -> None:
        self._failed(error)
        if self.watch_error_handler is not None:
            try:
                self.watch_error_handler(self.kind, error)
            except Exception:
                log.exception("%s: the watch error handler failed", self.kind)

    def _failed(self, error: BaseException) -> None:
        """A list, watch or kind lookup failed: a refusal is kept until the informer syncs."""
        if not self._has_synced and isinstance(error, REFUSALS):
            self.refusal = error
            self._refused.set()

    def add_handler(self, handler: EventHandler) -> None:
        """Register ``handler``; objects already in the store are reported to it as adds."""
        self._handlers.append(handler)
        self._wants_old = self._wants_old or handler.on_update is not None
        self._wants_updates = self._wants_old or self._wants_updates or handler.on_update_new is not None
        if handler.on_add is not None:
            for obj in self.store.each_object():
                handler.on_add(obj)

    # ------------------------------------------------------------------ the reflector's sink

    def list_page(self, items: list[Obj], namespace: str | None) -> None:
        """One page of a (re)list of ``namespace`` (None: everything this informer holds).

        Pages are applied as they come, so a list never holds all objects decoded at once.
        """
        seen = self._seen.setdefault(namespace, set())
        store = self.store
        for raw in items:
            obj = self._transform(raw)
            key = object_key(obj)
            seen.add(key)
            old = store.upsert(obj)
            if old is None:
                self._notify_add(obj)
            elif self._wants_updates and old != store.get_encoded(key):  # unchanged objects are not news
                self._notify_update(old, obj, True)

    def list_done(self, resource_version: str, namespace: str | None) -> None:
        """The (re)list of ``namespace`` is complete: what it did not contain is gone."""
        seen = self._seen.pop(namespace, set())
        store = self.store
        present = store.list_keys() if namespace is None else store.keys_in_namespace(namespace)
        for key in present:
            if key not in seen:
                gone = store.delete_key(key)
                if gone is not None:
                    self._notify_delete(self.store.decode(gone))
        self._listed.add(namespace)
        if len(self._listed) >= len(self.reflectors):
            self._has_synced = True
            self._synced.set()
            self.refusal = None
            self._refused.clear()

    def event(self, event: WatchEvent) -> None:
        """A watch event from a reflector: into the store, then to the handlers."""
        obj = self._transform(event.object)
        if event.type == "DELETED":
            self.store.delete(obj)
            self._notify_delete(obj)
            return
        old = self.store.upsert(obj)
        if old is None:
            self._notify_add(obj)
        elif self._wants_updates:
            self._notify_update(old, obj, True)

    # ------------------------------------------------------------------ internals

    def _transform(self, obj: Obj) -> Obj:
        if self.metadata_only:
            # The server says PartialObjectMetadata (meta.k8s.io/v1); readers want the kind.
            obj = {
                "apiVersion": self.kind.api_version,
                "kind": self.kind.kind,
                "metadata": obj.get("metadata") or {},
            }
        return self.transform(obj) if self.transform is not None else obj

    async def _resync_loop(self) -> None:
        assert self.resync_period is not None
        while True:
            # controller-runtime jitters the sync period by [0.9, 1.1).
            await asyncio.sleep(self.resync_period * uniform(0.9, 1.1))
            if self.has_synced:
                for obj in self.store.each_object():
                    self._notify_update(obj, obj, False)

    def _notify_add(self, obj: Obj) -> None:
        for handler in self._handlers:
            if handler.on_add is not None:
                self._call(handler.on_add, obj)

    def _notify_update(self, old: Obj | bytes, new: Obj, changed: bool) -> None:
        """``old``: the replaced object, or its encoding (decoded once, if a handler reads it)."""
        if isinstance(old, bytes) and self._wants_old:
            old = self.store.decode(old)
        for handler in self._handlers:
            if handler.on_update is not None:
                assert not isinstance(old, bytes)
                self._call(handler.on_update, old, new)
            elif handler.on_update_new is not None:
                self._call(handler.on_update_new, new, changed)

    def _notify_delete(self, obj: Obj) -> None:
        for handler in self._handlers:
            if handler.on_delete is not None:
                self._call(handler.on_delete, obj)

    @staticmethod
    def _call(func: Callable[..., None], *args: Obj | bool) -> None:
        try:
            func(*args)
        except Exception:
            log.exception("event handler %r failed", func)
