"""The informer: one kind's objects kept in an indexed store, and handlers told what changed.

``Informer.start()`` runs its reflector in a task the informer owns (``stop()`` cancels and
awaits it). A list replaces the store — objects no longer listed are reported deleted with their
last known state, changed ones updated — and watch events then apply one by one, so after any
interruption (restart, 410) handlers converge on the final state. Handlers are called in order
on the event loop and must not block (a controller's only enqueue keys). With ``resync_period``,
every object is re-reported as an update to itself on that period (level-triggered retries).
By default ``metadata.managedFields`` is dropped before storing (``transform``), as
controller-runtime does: it is most of an object's size and controllers never read it.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeloop.cache.reflector import ListWatchOptions, Reflector
from kubeloop.cache.store import Indexer, IndexFunc, object_key
from kubeloop.client.rest import Client, KindRef
from kubeloop.client.watch import WatchEvent
from kubeloop.lifecycle import cancel_and_wait

log = logging.getLogger("kubeloop.cache.informer")

Obj = dict[str, Any]
Transform = Callable[[Obj], Obj]


def strip_managed_fields(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        meta = dict(meta)
        del meta["managedFields"]
        return {**obj, "metadata": meta}
    return obj


@dataclass
class EventHandler:
    """What to call on an add, an update (old, new) and a delete (the last known state)."""

    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj], None] | None = None


class Informer:
    def __init__(
        self,
        client: Client,
        kind: KindRef,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        transform: Transform | None = strip_managed_fields,
        resync_period: float | None = None,
        inactivity_timeout: float = 90.0,
    ) -> None:
        self.store = Indexer(indexers)
        self.transform = transform
        self.resync_period = resync_period
        self.reflector = Reflector(
            client,
            kind,
            self,
            ListWatchOptions(
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                inactivity_timeout=inactivity_timeout,
            ),
        )
        self._handlers: list[EventHandler] = []
        self._synced = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._tasks:
            return
        self._tasks.append(asyncio.create_task(self.reflector.run(), name=f"reflector {self.reflector.kind}"))
        if self.resync_period:
            self._tasks.append(asyncio.create_task(self._resync_loop(), name=f"resync {self.reflector.kind}"))

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """True once the first list is in the store; False if ``timeout`` passes first."""
        try:
            await asyncio.wait_for(self._synced.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def add_handler(self, handler: EventHandler) -> None:
        """Register ``handler``; objects already in the store are reported to it as adds."""
        self._handlers.append(handler)
        if handler.on_add is not None:
            for obj in self.store.objects():
                handler.on_add(obj)

    # ------------------------------------------------------------------ the reflector's sink

    def replace(self, items: list[Obj], resource_version: str) -> None:
        fresh = {object_key(obj): obj for obj in map(self._transform, items)}
        for key in self.store.list_keys():
            if key not in fresh:
                gone = self.store.get(key)
                if gone is not None:
                    self.store.delete(gone)
                    self._notify_delete(gone)
        for obj in fresh.values():
            old = self.store.upsert(obj)
            if old is None:
                self._notify_add(obj)
            elif _rv(old) != _rv(obj):
                self._notify_update(old, obj)
        self._synced.set()

    def event(self, event: WatchEvent) -> None:
        obj = self._transform(event.object)
        if event.type == "DELETED":
            old = self.store.delete(obj)
            self._notify_delete(old if old is not None else obj)
            return
        old = self.store.upsert(obj)
        if old is None:
            self._notify_add(obj)
        else:
            self._notify_update(old, obj)

    # ------------------------------------------------------------------ internals

    def _transform(self, obj: Obj) -> Obj:
        return self.transform(obj) if self.transform is not None else obj

    async def _resync_loop(self) -> None:
        assert self.resync_period is not None
        while True:
            # controller-runtime jitters the sync period by [0.9, 1.1).
            await asyncio.sleep(self.resync_period * (0.9 + random.random() * 0.2))
            if self.has_synced:
                for obj in self.store.objects():
                    self._notify_update(obj, obj)

    def _notify_add(self, obj: Obj) -> None:
        for handler in self._handlers:
            if handler.on_add is not None:
                self._call(handler.on_add, obj)

    def _notify_update(self, old: Obj, new: Obj) -> None:
        for handler in self._handlers:
            if handler.on_update is not None:
                self._call(handler.on_update, old, new)

    def _notify_delete(self, obj: Obj) -> None:
        for handler in self._handlers:
            if handler.on_delete is not None:
                self._call(handler.on_delete, obj)

    @staticmethod
    def _call(func: Callable[..., None], *args: Obj) -> None:
        try:
            func(*args)
        except Exception:
            log.exception("event handler %r failed", func)


def _rv(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
