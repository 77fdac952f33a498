"""Sources: where a controller's events come from (controller-runtime's ``pkg/source``).

A source is started with the controller's queue and stopped (awaited) when the controller stops.

``Kind`` connects an informer to a controller's queue: each add/update/delete passes the
predicates, then the event handler turns it into requests. With a priority queue, adds from the
initial list and updates that change nothing (resyncs) go in with ``LOW_PRIORITY``, so that after
a restart real changes are reconciled first.

``Channel`` brings events from outside the cluster (a webhook, a timer, another system): every
object read from an ``asyncio.Queue`` or an async iterable is a generic event — it passes the
predicates' ``generic`` and the handler's ``generic`` (``EnqueueRequestForObject`` enqueues the
object's own namespace/name). The source owns the task that reads it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, AsyncIterator

from kubeloop.api.object import Obj
from kubeloop.cache import informer as informer_module
from kubeloop.cache.informer import Informer
from kubeloop.controller.handler import EventHandler, RequestQueue, reads_old_object
from kubeloop.controller.predicate import Predicate
from kubeloop.controller.reconcile import Request
from kubeloop.lifecycle import cancel_and_wait
from kubeloop.workqueue.priority import LOW_PRIORITY, PriorityQueue

log = logging.getLogger("kubeloop.controller.source")


class Kind:
    """The events of an informer's kind, through predicates, to a handler (controller-runtime's
    ``source.Kind``): what ``Builder.for_``, ``owns`` and ``watches`` make. Objects the informer
    already holds arrive as creates at low priority (the initial list waits behind live changes)::

        informer = manager.cache.informer_for(kinds.ConfigMap)
        controller.watch(source.Kind(informer, handler.EnqueueRequestForObject()))
    """

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
        # The objects the informer already holds are replayed as adds when the handler is
        # registered (a manager starts its controllers once its caches have synced, a new
        # leader its own then): they are the initial list, as upstream's ``isInInitialList``.
        replaying = True

        def on_add(obj: Obj) -> None:
            if all(p.create(obj) for p in predicates):
                handler.create(obj, low if replaying or not informer.has_synced else queue)

        def on_update(old: Obj, new: Obj) -> None:
            if all(p.update(old, new) for p in predicates):
                handler.update(old, new, low if _rv(old) == _rv(new) else queue)

        def on_update_new(new: Obj, changed: bool) -> None:
            # Neither the handler nor a predicate reads the old object: it is never decoded.
            if all(p.update(new, new) for p in predicates):
                handler.update(new, new, queue if changed else low)

        def on_delete(obj: Obj) -> None:
            if all(p.delete(obj) for p in predicates):
                handler.delete(obj, queue)

        if reads_old_object(handler) or any(reads_old_object(p) for p in predicates):
            events = informer_module.EventHandler(on_add=on_add, on_update=on_update, on_delete=on_delete)
        else:
            events = informer_module.EventHandler(
                on_add=on_add, on_update_new=on_update_new, on_delete=on_delete
            )
        informer.add_handler(events)
        replaying = False

    @property
    def pending(self) -> int:
        """Events delivered whose requests are not queued yet (an async map function's)."""
        return int(getattr(self.handler, "pending", 0))

    async def stop(self) -> None:
        """The informer belongs to the cache, which stops it; the handler's own tasks (an async
        map function's) end here."""
        await _stop_handler(self.handler)


class Channel:
    """Generic events from outside the cluster (controller-runtime's ``source.Channel``): each
    object put on an ``asyncio.Queue`` (or yielded by an async iterable) goes, through predicates,
    to the handler's ``generic``::

        alerts: asyncio.Queue[Obj] = asyncio.Queue()
        Builder(manager).for_(Agent).watches_raw_source(
            source.Channel(alerts, handler.EnqueueRequestForObject())
        ).complete(reconcile)
        await alerts.put({"metadata": {"namespace": "shop", "name": "triage"}})
    """

    def __init__(
        self, events: asyncio.Queue[Obj] | AsyncIterable[Obj], handler: EventHandler, *predicates: Predicate
    ) -> None:
        self.events = events
        self.handler = handler
        self.predicates = predicates
        self._task: asyncio.Task[None] | None = None

    def start(self, queue: RequestQueue) -> None:
        """Deliver the channel's objects to ``queue`` from a task of its own."""
        if self._task is None:
            self._task = asyncio.create_task(self._deliver(queue), name="channel source")

    @property
    def pending(self) -> int:
        """Events sent and not yet handled: those still in a queue channel, and those whose
        requests an async map function is still working out."""
        waiting = self.events.qsize() if isinstance(self.events, asyncio.Queue) else 0
        return waiting + int(getattr(self.handler, "pending", 0))

    async def stop(self) -> None:
        """Stop delivering (cancel and await the task) and end the handler's own tasks."""
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait([task])
        await _stop_handler(self.handler)

    async def _deliver(self, queue: RequestQueue) -> None:
        async for obj in self._objects():
            try:
                if all(p.generic(obj) for p in self.predicates):
                    self.handler.generic(obj, queue)
            except Exception:
                log.exception("channel source: a generic event could not be handled")

    async def _objects(self) -> AsyncIterator[Obj]:
        if isinstance(self.events, asyncio.Queue):
            while True:
                yield await self.events.get()
        else:
            async for obj in self.events:
                yield obj


class _LowPriority:
    def __init__(self, queue: PriorityQueue[Request]) -> None:
        self.queue = queue

    def add(self, item: Request) -> None:
        self.queue.add_with_options(item, priority=LOW_PRIORITY)


async def _stop_handler(handler: EventHandler) -> None:
    stop = getattr(handler, "stop", None)
    if stop is not None:
        await stop()


def _rv(obj: Obj) -> object:
    return (obj.get("metadata") or {}).get("resourceVersion")
