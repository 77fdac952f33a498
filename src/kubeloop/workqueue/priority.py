"""The priority queue (controller-runtime's ``priorityqueue``, its default since v0.23).

One entry per key, merged: adding a waiting key again keeps the higher priority and the earlier
ready time. ``get`` hands out the highest-priority ready key, first-added first among equals, and
— as in every queue here — never a key that a worker still holds: a key added while processing
is queued again on ``done``. Controllers give the initial list and unchanged resyncs
``LOW_PRIORITY`` so that real changes are reconciled first after a restart.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from kubeloop.workqueue.queue import NO_METRICS, QueueMetrics, ShutDown
from kubeloop.workqueue.ratelimiter import RateLimiter, default_controller_rate_limiter

T = TypeVar("T", bound=Hashable)

LOW_PRIORITY = -100


@dataclass
class _Entry(Generic[T]):
    key: T
    priority: int
    ready_at: float
    sequence: int  # add order: ties go to the first added
    version: int = 0  # heap entries of older versions are stale


class PriorityQueue(Generic[T]):
    def __init__(self, rate_limiter: RateLimiter | None = None, metrics: QueueMetrics = NO_METRICS) -> None:
        self.rate_limiter = rate_limiter or default_controller_rate_limiter()
        self.metrics = metrics
        self._started_at: dict[T, float] = {}
        self._drained: asyncio.Event | None = None
        self._entries: dict[T, _Entry[T]] = {}  # waiting or ready, not being processed
        self._ready: list[tuple[int, int, int, T]] = []  # (-priority, sequence, version, key)
        self._timers: dict[T, asyncio.TimerHandle] = {}
        self._processing: set[T] = set()
        self._after_done: dict[T, tuple[int, float]] = {}  # added while processing
        self._sequence = itertools.count()
        self._waiters: list[asyncio.Future[None]] = []
        self._shutting_down = False

    def __len__(self) -> int:
        return len(self._entries)

    def ready_count(self) -> int:
        """Keys waiting to be handed out now (not those due later: a requeue after, a back-off)."""
        now = asyncio.get_running_loop().time()
        return sum(1 for entry in self._entries.values() if entry.ready_at <= now)

    def waiting(self) -> int:
        """Keys due later (a requeue after, a back-off), as the delaying queue counts them."""
        return len(self) - self.ready_count()

    def add(self, key: T, *, priority: int = 0, after: float = 0.0) -> None:
        """Queue ``key`` (after ``after`` seconds); a waiting key keeps max priority, min ready time."""
        if self._shutting_down:
            return
        ready_at = asyncio.get_running_loop().time() + max(0.0, after)
        if key in self._processing:
            previous = self._after_done.get(key)
            if previous is not None:
                priority, ready_at = max(priority, previous[0]), min(ready_at, previous[1])
            self._after_done[key] = (priority, ready_at)
            return
        entry = self._entries.get(key)
        if entry is None:
            entry = _Entry(key, priority, ready_at, next(self._sequence))
            self._entries[key] = entry
            self.metrics.added(len(self._entries))
        else:
            if priority <= entry.priority and ready_at >= entry.ready_at:
                return
            entry.priority = max(priority, entry.priority)
            entry.ready_at = min(ready_at, entry.ready_at)
            entry.version += 1
        self._schedule(entry)

    def add_after(self, key: T, delay: float) -> None:
        self.add(key, after=delay)

    def add_rate_limited(self, key: T, *, priority: int = 0) -> None:
        self.metrics.retried()
        self.add(key, priority=priority, after=self.rate_limiter.when(key))

    def forget(self, key: T) -> None:
        self.rate_limiter.forget(key)

    def num_requeues(self, key: T) -> int:
        return self.rate_limiter.num_requeues(key)

    def get_nowait(self) -> T:
        while self._ready:
            _, _, version, key = heapq.heappop(self._ready)
            entry = self._entries.get(key)
            if entry is None or entry.version != version:
                continue  # stale: re-prioritised or already handed out
            del self._entries[key]
            self._processing.add(key)
            now = asyncio.get_running_loop().time()
            self.metrics.handed_out(max(0.0, now - entry.ready_at), len(self._entries))
            self._started_at[key] = time.perf_counter()
            return key
        if self._shutting_down:
            raise ShutDown
        raise asyncio.QueueEmpty

    async def get(self) -> T:
        while True:
            try:
                return self.get_nowait()
            except asyncio.QueueEmpty:
                waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                await waiter

    def done(self, key: T) -> None:
        self._processing.discard(key)
        started = self._started_at.pop(key, None)
        if started is not None:
            self.metrics.finished(time.perf_counter() - started)
        if not self._processing and self._drained is not None:
            self._drained.set()
        pending = self._after_done.pop(key, None)
        if pending is not None and not self._shutting_down:
            priority, ready_at = pending
            self.add(key, priority=priority, after=ready_at - asyncio.get_running_loop().time())

    def processing_since(self) -> list[float]:
        return list(self._started_at.values())

    async def shut_down_with_drain(self) -> None:
        self.shut_down()
        if self._processing:
            self._drained = asyncio.Event()
            await self._drained.wait()

    def shut_down(self) -> None:
        self._shutting_down = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._wake_all()

    def _schedule(self, entry: _Entry[T]) -> None:
        loop = asyncio.get_running_loop()
        timer = self._timers.pop(entry.key, None)
        if timer is not None:
            timer.cancel()
        if entry.ready_at <= loop.time():
            heapq.heappush(self._ready, (-entry.priority, entry.sequence, entry.version, entry.key))
            self._wake_all()
        else:
            self._timers[entry.key] = loop.call_at(
                entry.ready_at, self._became_ready, entry.key, entry.version
            )

    def _became_ready(self, key: T, version: int) -> None:
        self._timers.pop(key, None)
        entry = self._entries.get(key)
        if entry is not None and entry.version == version:
            heapq.heappush(self._ready, (-entry.priority, entry.sequence, entry.version, key))
            self._wake_all()

    def _wake_all(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
