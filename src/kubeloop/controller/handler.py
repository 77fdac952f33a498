"""Event handlers: which requests an event enqueues (controller-runtime's ``pkg/handler``).

- ``EnqueueRequestForObject``: the object itself (what ``For`` uses).
- ``EnqueueRequestForOwner``: the owner named in its ownerReferences, of the given kind —
  by default only the controller owner (``controller: true``), as ``Owns`` uses; on an update
  both the old and the new owners.
- ``EnqueueRequestsFromMapFunc``: whatever requests a function maps the object to; an ``async``
  function may read the cache (``await manager.client.list(Agent, field_selector=...)`` through
  an index), as controller-runtime's MapFuncs do — each event's requests are then added when it
  returns, by a task the handler owns until its source stops.
- ``Funcs``: a function per kind of event, called with the queue (an event without one is
  ignored) — for handlers that decide per event type.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.object import Obj
from kubeloop.client.interface import KindRef, gvk_of
from kubeloop.controller.reconcile import Request
from kubeloop.lifecycle import cancel_and_wait

log = logging.getLogger("kubeloop.controller.handler")


class RequestQueue(Protocol):
    """Where a handler puts requests: a controller's work queue (duplicates are merged)."""

    def add(self, item: Request) -> None:
        """Queue ``item`` for a reconcile."""
        ...


class EventHandler(Protocol):
    """What an event on a watched object enqueues (controller-runtime's ``handler.EventHandler``).
    Given to ``Builder.watches`` with the watched kind::

        Builder(manager).for_(App).watches(
            kinds.ConfigMap, handler.EnqueueRequestsFromMapFunc(app_of)
        ).complete(reconcile)
    """

    def create(self, obj: Obj, queue: RequestQueue) -> None:
        """``obj`` was created (or listed by an informer's first list)."""
        ...

    def update(self, old: Obj, new: Obj, queue: RequestQueue) -> None:
        """``old`` became ``new``."""
        ...

    def delete(self, obj: Obj, queue: RequestQueue) -> None:
        """``obj`` was deleted (its last known state)."""
        ...

    def generic(self, obj: Obj, queue: RequestQueue) -> None:
        """A generic event (from a channel source) about ``obj``."""
        ...


def reads_old_object(part: object) -> bool:
    """Whether a handler or predicate reads an update's old object (assumed, unless it says not):
    when none on a watch does, the informer never decodes it."""
    return bool(getattr(part, "reads_old_object", True))


def request_for(obj: Mapping[str, Any]) -> Request:
    """The request naming ``obj`` (its namespace and name)."""
    meta = obj.get("metadata") or {}
    return Request(_namespace_of(meta), str(meta.get("name") or ""))


def _namespace_of(meta: Mapping[str, Any]) -> str:
    """``meta``'s namespace, one string for all requests of a namespace: each event decodes a
    copy of it, and a queue waiting on thousands of objects would hold thousands of copies."""
    namespace = meta.get("namespace")
    return sys.intern(str(namespace)) if namespace else ""


class _MapHandler:
    """Enqueue the requests ``_requests`` maps an object to, for every kind of event."""

    #: An update enqueues what the old object maps to as well as the new.
    reads_old_object = True

    def _requests(self, obj: Obj) -> Iterable[Request]:
        raise NotImplementedError

    def create(self, obj: Obj, queue: RequestQueue) -> None:
        for request in self._requests(obj):
            queue.add(request)

    def update(self, old: Obj, new: Obj, queue: RequestQueue) -> None:
        for request in {*self._requests(old), *self._requests(new)}:
            queue.add(request)

    def delete(self, obj: Obj, queue: RequestQueue) -> None:
        for request in self._requests(obj):
            queue.add(request)

    def generic(self, obj: Obj, queue: RequestQueue) -> None:
        for request in self._requests(obj):
            queue.add(request)


class EnqueueRequestForObject(_MapHandler):
    """Enqueues the object itself (controller-runtime's ``handler.EnqueueRequestForObject``): what
    ``Builder.for_`` uses."""

    reads_old_object = False

    def _requests(self, obj: Obj) -> Iterable[Request]:
        return [request_for(obj)]

    def update(self, old: Obj, new: Obj, queue: RequestQueue) -> None:
        """Enqueue ``new`` (an update does not move an object: the old one names the same)."""
        queue.add(request_for(new))


class EnqueueRequestForOwner(_MapHandler):
    """Enqueues the owner named in an object's ownerReferences (controller-runtime's
    ``handler.EnqueueRequestForOwner``): what ``Builder.owns`` uses.

    ``owner`` is the owners' kind (a GroupVersionKind, a ``kinds`` constant or a model class);
    with ``only_controller`` (the default) only the controller reference counts. A namespaced
    owner shares its dependents' namespace; a cluster-scoped one (a Namespace owning a
    ResourceQuota) is enqueued without one. ``owner_namespaced`` says which, or is a function
    asked at each event (the builder passes the owner informer's resolved scope).
    """

    def __init__(
        self,
        owner: KindRef,
        *,
        only_controller: bool = True,
        owner_namespaced: bool | Callable[[], bool | None] = True,
    ) -> None:
        self.owner: GroupVersionKind = gvk_of(owner)
        self.only_controller = only_controller
        self.owner_namespaced = owner_namespaced

    def _requests(self, obj: Obj) -> Iterable[Request]:
        meta = obj.get("metadata") or {}
        scope = self.owner_namespaced
        namespaced = scope if isinstance(scope, bool) else scope() is not False
        namespace = _namespace_of(meta) if namespaced else ""
        out = []
        for ref in meta.get("ownerReferences") or ():
            if not isinstance(ref, Mapping):
                continue
            # Owners match by group and kind, any version (controller-runtime does the same).
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            if group != self.owner.group or ref.get("kind") != self.owner.kind:
                continue
            if self.only_controller and not ref.get("controller"):
                continue
            out.append(Request(namespace, str(ref.get("name", ""))))
        return out


MapFunc = Callable[[Obj], Iterable[Request]] | Callable[[Obj], Awaitable[Iterable[Request]]]


class EnqueueRequestsFromMapFunc(_MapHandler):
    """The requests ``map_func`` maps each event's object to (an update: the old object's too).

    ``map_func`` may be a plain function or an ``async`` one; an async one runs in a task per
    event (so it may await cached reads), which :meth:`stop` — called when the watch's source
    stops — cancels and awaits::

        def app_of(config_map: Obj) -> list[Request]:
            app = (config_map["metadata"].get("labels") or {}).get("app")
            return [Request(config_map["metadata"]["namespace"], app)] if app else []

        handler.EnqueueRequestsFromMapFunc(app_of)
    """

    def __init__(self, map_func: MapFunc) -> None:
        self.map_func = map_func
        #: Whether ``map_func`` is async (its requests come from a task per event).
        self.is_async = inspect.iscoroutinefunction(map_func)
        self._tasks: set[asyncio.Task[None]] = set()

    def _requests(self, obj: Obj) -> Iterable[Request]:
        return list(self.map_func(obj))  # type: ignore[arg-type]

    def _map_later(self, objects: tuple[Obj, ...], queue: RequestQueue) -> None:
        task = asyncio.get_running_loop().create_task(self._map(objects, queue), name="map func")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _map(self, objects: tuple[Obj, ...], queue: RequestQueue) -> None:
        requests: set[Request] = set()
        try:
            for obj in objects:
                requests.update(await self.map_func(obj))  # type: ignore[misc]
        except Exception:
            log.exception("a map function failed; its event enqueues nothing")
            return
        for request in requests:
            queue.add(request)

    def create(self, obj: Obj, queue: RequestQueue) -> None:
        """Enqueue what the map function gives for the create event's object."""
        if self.is_async:
            self._map_later((obj,), queue)
        else:
            super().create(obj, queue)

    def update(self, old: Obj, new: Obj, queue: RequestQueue) -> None:
        """Enqueue what the map function gives for the update event's objects."""
        if self.is_async:
            self._map_later((old, new), queue)
        else:
            super().update(old, new, queue)

    def delete(self, obj: Obj, queue: RequestQueue) -> None:
        """Enqueue what the map function gives for the delete event's object."""
        if self.is_async:
            self._map_later((obj,), queue)
        else:
            super().delete(obj, queue)

    def generic(self, obj: Obj, queue: RequestQueue) -> None:
        """Enqueue what the map function gives for the generic event's object."""
        if self.is_async:
            self._map_later((obj,), queue)
        else:
            super().generic(obj, queue)

    @property
    def pending(self) -> int:
        """Events whose requests an async map function is still working out."""
        return len(self._tasks)

    async def stop(self) -> None:
        """Cancel and await the map functions still running."""
        await cancel_and_wait(list(self._tasks))


@dataclass
class Funcs:
    """controller-runtime's ``handler.Funcs``: the functions given are called, other events ignored.

    Example::

        handler.Funcs(on_delete=lambda obj, queue: queue.add(Request("", "cleanup")))
    """

    on_create: Callable[[Obj, RequestQueue], None] | None = None
    on_update: Callable[[Obj, Obj, RequestQueue], None] | None = None
    on_delete: Callable[[Obj, RequestQueue], None] | None = None
    on_generic: Callable[[Obj, RequestQueue], None] | None = None

    def create(self, obj: Obj, queue: RequestQueue) -> None:
        """Call ``on_create(obj, queue)``, if given."""
        if self.on_create is not None:
            self.on_create(obj, queue)

    def update(self, old: Obj, new: Obj, queue: RequestQueue) -> None:
        """Call ``on_update(old, new, queue)``, if given."""
        if self.on_update is not None:
            self.on_update(old, new, queue)

    def delete(self, obj: Obj, queue: RequestQueue) -> None:
        """Call ``on_delete(obj, queue)``, if given."""
        if self.on_delete is not None:
            self.on_delete(obj, queue)

    def generic(self, obj: Obj, queue: RequestQueue) -> None:
        """Call ``on_generic(obj, queue)``, if given."""
        if self.on_generic is not None:
            self.on_generic(obj, queue)
