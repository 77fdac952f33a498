"""Event handlers: which requests an event enqueues (controller-runtime's ``pkg/handler``).

- ``EnqueueRequestForObject``: the object itself (what ``For`` uses).
- ``EnqueueRequestForOwner``: the owner named in its ownerReferences, of the given kind —
  by default only the controller owner (``controller: true``), as ``Owns`` uses; on an update
  both the old and the new owners.
- ``EnqueueRequestsFromMapFunc``: whatever requests a function maps the object to.
- ``Funcs``: a function per kind of event, called with the queue (an event without one is
  ignored) — for handlers that decide per event type.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.object import Obj
from kubeloop.client.interface import KindRef, gvk_of
from kubeloop.controller.reconcile import Request


class RequestQueue(Protocol):
    def add(self, item: Request) -> None: ...


class EventHandler(Protocol):
    def create(self, obj: Obj, queue: RequestQueue) -> None: ...

    def update(self, old: Obj, new: Obj, queue: RequestQueue) -> None: ...

    def delete(self, obj: Obj, queue: RequestQueue) -> None: ...

    def generic(self, obj: Obj, queue: RequestQueue) -> None: ...


def reads_old_object(part: object) -> bool:
    """Whether a handler or predicate reads an update's old object (assumed, unless it says not):
    when none on a watch does, the informer never decodes it."""
    return bool(getattr(part, "reads_old_object", True))


def request_for(obj: Mapping[str, Any]) -> Request:
    meta = obj.get("metadata") or {}
    return Request(str(meta.get("namespace") or ""), str(meta.get("name") or ""))


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
    reads_old_object = False

    def _requests(self, obj: Obj) -> Iterable[Request]:
        return [request_for(obj)]

    def update(self, old: Obj, new: Obj, queue: RequestQueue) -> None:
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
        namespace = str(meta.get("namespace") or "") if namespaced else ""
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


class EnqueueRequestsFromMapFunc(_MapHandler):
    def __init__(self, map_func: Callable[[Obj], Iterable[Request]]) -> None:
        self.map_func = map_func

    def _requests(self, obj: Obj) -> Iterable[Request]:
        return list(self.map_func(obj))


@dataclass
class Funcs:
    """controller-runtime's ``handler.Funcs``: the functions given are called, other events ignored."""

    on_create: Callable[[Obj, RequestQueue], None] | None = None
    on_update: Callable[[Obj, Obj, RequestQueue], None] | None = None
    on_delete: Callable[[Obj, RequestQueue], None] | None = None
    on_generic: Callable[[Obj, RequestQueue], None] | None = None

    def create(self, obj: Obj, queue: RequestQueue) -> None:
        if self.on_create is not None:
            self.on_create(obj, queue)

    def update(self, old: Obj, new: Obj, queue: RequestQueue) -> None:
        if self.on_update is not None:
            self.on_update(old, new, queue)

    def delete(self, obj: Obj, queue: RequestQueue) -> None:
        if self.on_delete is not None:
            self.on_delete(obj, queue)

    def generic(self, obj: Obj, queue: RequestQueue) -> None:
        if self.on_generic is not None:
            self.on_generic(obj, queue)
