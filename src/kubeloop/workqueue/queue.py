"""The deduplicating work queue (client-go's ``Type``).

Three sets of state decide what happens to a key: ``queue`` (waiting, in order), ``dirty``
(needs processing: waiting, or added again while being processed) and ``processing`` (handed to
a worker, not yet ``done``). Adding a key that is dirty does nothing; adding a key that is being
processed marks it dirty and it is queued again when the worker calls ``done`` — so a key is
never processed by two workers at once, and an add is never lost.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

T = TypeVar("T", bound=Hashable)


class ShutDown(Exception):
    """The queue was shut down and holds nothing more to hand out."""


class QueueMetrics(Protocol):
    """What a queue reports (client-go's ``workqueue`` metrics provider); see ``NO_METRICS``."""

    def added(self) -> None:
        """A key was added (the depth is read from the queue when metrics are scraped)."""

    def handed_out(self, waited: float) -> None:
        """A key was handed to a worker after ``waited`` seconds in the queue."""

    def finished(self, worked: float) -> None:
        """A worker finished a key after ``worked`` seconds."""

    def retried(self) -> None:
        """A key was queued again for a retry (rate-limited)."""


class _NoMetrics:
    def added(self) -> None:
        return None

    def handed_out(self, waited: float) -> None:
        return None

    def finished(self, worked: float) -> None:
        return None

    def retried(self) -> None:
        return None


NO_METRICS: QueueMetrics = _NoMetrics()


class WorkQueue(Generic[T]):
    """The deduplicating work queue of this module's docstring::

        queue: WorkQueue[str] = WorkQueue()
        queue.add("ns/a"); queue.add("ns/a")  # one entry
        key = await queue.get()
        ...  # reconcile it
        queue.done(key)
    """

    __slots__ = (
        "_added_while_processing",
        "_dirty",
        "_drained",
        "_processing",
        "_queue",
        "_queued_at",
        "_shutting_down",
        "_started_at",
        "_waiters",
        "metrics",
    )

    def __init__(self, metrics: QueueMetrics = NO_METRICS) -> None:
        #: Given at construction: the queue times its keys only if it was given metrics.
        self.metrics = metrics
        self._started_at: dict[T, float] = {}
        self._queue: deque[T] = deque()
        #: With metrics, when each key in ``_queue`` was added, in step with it (a deque
        #: costs a fifth of what a dict by key does at a million keys); keys added while
        #: processed wait in ``_added_while_processing`` until ``done`` queues them.
        self._queued_at: deque[float] = deque()
        self._added_while_processing: dict[T, float] = {}
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        self._drained: asyncio.Event | None = None

    def __len__(self) -> int:
        return len(self._queue)

    def ready_count(self) -> int:
        """Keys waiting to be handed out now (a delaying queue's keys due later are not counted)."""
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        """Whether ``shut_down`` was called (adds are ignored from then on)."""
        return self._shutting_down

    def add(self, item: T) -> None:
        """Queue ``item`` unless it is already waiting; after ``done`` if it is being processed."""
        dirty = self._dirty
        if item in dirty or self._shutting_down:
            return
        dirty.add(item)
        if self.metrics is not NO_METRICS:
            self.metrics.added()
            if item in self._processing:
                self._added_while_processing[item] = time.perf_counter()
                return
            self._queued_at.append(time.perf_counter())
        elif item in self._processing:
            return
        self._queue.append(item)
        if self._waiters:
            self._wake_one()

    def get_nowait(self) -> T:
        """The next key, now; ``asyncio.QueueEmpty`` when none waits, ``ShutDown`` after shutdown."""
        if not self._queue:
            if self._shutting_down:
                raise ShutDown
            raise asyncio.QueueEmpty
        item = self._queue.popleft()
        self._processing.add(item)
        self._dirty.discard(item)
        if self.metrics is not NO_METRICS:
            now = time.perf_counter()
            self.metrics.handed_out(now - self._queued_at.popleft())
            self._started_at[item] = now
        return item

    async def get(self) -> T:
        """The next key, waiting for one; raises ``ShutDown`` once shut down and empty."""
        while not self._queue:
            if self._shutting_down:
                raise ShutDown
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # pass the wake-up on to another getter
                raise
        return self.get_nowait()

    def done(self, item: T) -> None:
        """The worker finished ``item``; it is queued again if it was added meanwhile. A key no
        worker holds (a second ``done``) is left as it is: client-go's queue would queue a waiting
        key twice, and two workers could then hold it."""
        try:
            self._processing.remove(item)
        except KeyError:
            return
        if self.metrics is not NO_METRICS:
            started = self._started_at.pop(item, None)
            if started is not None:
                self.metrics.finished(time.perf_counter() - started)
        if item in self._dirty:
            self._queue.append(item)
            if self.metrics is not NO_METRICS:
                self._queued_at.append(self._added_while_processing.pop(item))
            self._wake_one()
        elif not self._processing and self._drained is not None:
            self._drained.set()

    def shut_down(self) -> None:
        """Accept no more keys; getters receive what is queued, then ``ShutDown``."""
        self._shutting_down = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    async def shut_down_with_drain(self) -> None:
        """Shut down, then wait until every key handed out is ``done``."""
        self.shut_down()
        if self._processing:
            self._drained = asyncio.Event()
            await self._drained.wait()

    def is_processing(self, item: T) -> bool:
        """Whether a worker holds ``item`` (handed out, not yet ``done``)."""
        return item in self._processing

    def processing_since(self) -> list[float]:
        """When each key now being processed was handed out (``time.perf_counter``)."""
        return list(self._started_at.values())

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
