"""The delaying queue: ``add_after(key, delay)`` adds the key once the delay has passed.

A key waits at most once: a later ``add_after`` of a waiting key only matters if it is due
sooner (client-go keeps the earliest time). Each waiting key holds one event-loop timer, which
``shut_down`` cancels, so no task outlives the queue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import TypeVar

from kubeloop.workqueue.queue import NO_METRICS, QueueMetrics, WorkQueue

T = TypeVar("T", bound=Hashable)


class DelayingQueue(WorkQueue[T]):
    """The work queue with ``add_after(key, seconds)`` (client-go's ``DelayingInterface``): a key is
    queued once its time comes; added again sooner, it keeps the earlier time.
    """

    __slots__ = ("_timers",)

    def __init__(self, metrics: QueueMetrics = NO_METRICS) -> None:
        super().__init__(metrics)
        self._timers: dict[T, asyncio.TimerHandle] = {}

    def add_after(self, item: T, delay: float) -> None:
        """Add ``item`` after ``delay`` seconds (at once when ``delay`` ≤ 0)."""
        if self.shutting_down:
            return
        if delay <= 0:
            self._cancel(item)
            self.add(item)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        timer = self._timers.get(item)
        if timer is not None:
            if timer.when() <= due:
                return  # already due sooner
            timer.cancel()
        self._timers[item] = loop.call_at(due, self._fire, item)

    def waiting(self) -> int:
        """Keys waiting for their delay to pass."""
        return len(self._timers)

    def _fire(self, item: T) -> None:
        self._timers.pop(item, None)
        self.add(item)

    def _cancel(self, item: T) -> None:
        timer = self._timers.pop(item, None)
        if timer is not None:
            timer.cancel()

    def shut_down(self) -> None:
        """Accept no more keys and drop the ones still waiting for their time."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        super().shut_down()
