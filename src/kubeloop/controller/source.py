"""Sources: where a controller's events come from (controller-runtime's ``pkg/source``).

``Kind`` connects an informer to a controller's queue: each add/update/delete passes the
predicates, then the event handler turns it into requests. With a priority queue, adds from the
initial list and updates that change nothing (resyncs) go in with ``LOW_PRIORITY``, so that after
a restart real changes are reconciled first.
"""

from __future__ import annotations

from typing import Any

from kubeloop.cache import informer as informer_module
from kubeloop.cache.informer import Informer
from kubeloop.controller.handler import EventHandler, RequestQueue
from kubeloop.controller.predicate import Predicate
from kubeloop.controller.reconcile import Request
from kubeloop.workqueue.priority import LOW_PRIORITY, PriorityQueue

Obj = dict[str, Any]


class Kind:
    def __init__(self, informer: Informer, handler: EventHandler, *predicates: Predicate) -> None:
        self.informer = informer
        self.handler = handler
        self.predicates = predicates

    def start(self, queue: RequestQueue) -> None:
        """Deliver the informer's events to ``queue`` (objects already cached arrive as creates)."""
        handler = self.handler
        predicates = self.predicates
        informer = self.informer
        low: RequestQueue = _LowPriority(queue) if isinstance(queue, PriorityQueue) else queue

        def on_add(obj: Obj) -> None:
            if all(p.create(obj) for p in predicates):
                handler.create(obj, queue if informer.has_synced else low)

        def on_update(old: Obj, new: Obj) -> None:
            if all(p.update(old, new) for p in predicates):
                handler.update(old, new, low if _rv(old) == _rv(new) else queue)

        def on_delete(obj: Obj) -> None:
            if all(p.delete(obj) for p in predicates):
                handler.delete(obj, queue)

        informer.add_handler(
            informer_module.EventHandler(on_add=on_add, on_update=on_update, on_delete=on_delete)
        )


class _LowPriority:
    def __init__(self, queue: PriorityQueue[Request]) -> None:
        self.queue = queue

    def add(self, item: Request) -> None:
        self.queue.add(item, priority=LOW_PRIORITY)


def _rv(obj: Obj) -> object:
    return (obj.get("metadata") or {}).get("resourceVersion")
