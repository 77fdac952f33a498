"""The priority queue (controller-runtime's ``priorityqueue``, its default since v0.23, and
kubeloop's controllers' default too).

One entry per key, merged: adding a waiting key again keeps the higher priority and the earlier
ready time. ``get`` hands out the highest-priority ready key, first added first among equals
(a key raised to a higher priority keeps its place in the order it was first added), and — as
in every queue here — never a key that a worker still holds: a key added while processing is
queued again on ``done``. Controllers give the initial list and unchanged resyncs
``LOW_PRIORITY`` so that real changes are reconciled first after a restart.

Ready keys wait in one FIFO per priority (there are few: 0 and ``LOW_PRIORITY``, mostly), so an
add and a get cost about what the plain work queue's do (B1); a raised key goes to a small heap
of its new level, ordered by when it was first added. Keys due later wait on a timer each.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from kubeloop.workqueue.queue import NO_METRICS, QueueMetrics, ShutDown
from kubeloop.workqueue.ratelimiter import RateLimiter, priority_queue_rate_limiter

T = TypeVar("T", bound=Hashable)

LOW_PRIORITY = -100


class _Level(Generic[T]):
    """The ready keys of one priority: keys new to the queue, in the order added (``fifo``),
    and keys raised to it or due only now (``raised``, a heap of (sequence, key) by first-added
    order). Stale entries are skipped: a FIFO's left behind by a raise are counted in the
    queue's ``_leftovers``, a heap's no longer match their key's sequence or priority."""

    __slots__ = ("fifo", "raised")

    def __init__(self) -> None:
        self.fifo: deque[T] = deque()
        self.raised: list[tuple[int, T]] = []


class PriorityQueue(Generic[T]):
    """The priority queue of this module's docstring: ``add(key)`` at priority 0 now,
    ``add_with_options`` with a priority or a delay, ``get`` the highest ready key::

        queue = PriorityQueue()
        queue.add_with_options("ns/initial", priority=LOW_PRIORITY)
        queue.add("ns/changed")
        assert await queue.get() == "ns/changed"
    """

    __slots__ = (
        "_after_done",
        "_below",
        "_delayed",
        "_drained",
        "_heaped",
        "_leftovers",
        "_level_order",
        "_levels",
        "_processing",
        "_ready",
        "_ready_since",
        "_sequence",
        "_shutting_down",
        "_started_at",
        "_unusual",
        "_waiters",
        "_zero",
        "_zero_fifo",
        "metrics",
        "rate_limiter",
    )

    def __init__(self, rate_limiter: RateLimiter | None = None, metrics: QueueMetrics = NO_METRICS) -> None:
        self.rate_limiter = rate_limiter or priority_queue_rate_limiter()
        self.metrics = metrics
        #: Ready keys → their sequence (first-added order): at priority 0 or above in
        #: ``_ready``, below 0 (the initial list) in ``_below`` — so that an add at 0 of a key
        #: ready at 0 looks up one dict, as the plain queue's does. ``_unusual``: the priority of
        #: those not at 0. Together they tell a key's one valid entry in ``_levels`` from stale ones.
        self._ready: dict[T, int] = {}
        self._below: dict[T, int] = {}
        self._unusual: dict[T, int] = {}
        self._levels: dict[int, _Level[T]] = {}
        self._level_order: list[int] = []  # priorities with a level, highest first
        self._zero: _Level[T] = self._level(0)
        self._zero_fifo = self._zero.fifo
        #: Ready keys whose entry is in a heap, not a FIFO; FIFO entries a raise left behind.
        self._heaped: set[T] = set()
        self._leftovers: dict[tuple[int, T], int] = {}
        #: Keys due later → (priority, sequence, ready_at on the loop's clock, timer).
        self._delayed: dict[T, tuple[int, int, float, asyncio.TimerHandle]] = {}
        self._processing: set[T] = set()
        self._after_done: dict[T, tuple[int, float]] = {}  # added while processing: (priority, due)
        self._sequence = 0
        #: With metrics: when each ready key became ready, by its sequence (consecutive ints
        #: land in consecutive slots: a third of the cost of keying by key at a million keys).
        self._ready_since: dict[int, float] = {}
        self._started_at: dict[T, float] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        self._drained: asyncio.Event | None = None

    def __len__(self) -> int:
        return len(self._ready) + len(self._below) + len(self._delayed)

    def ready_count(self) -> int:
        """Keys waiting to be handed out now (not those due later: a requeue after, a back-off)."""
        return len(self._ready) + len(self._below)

    def waiting(self) -> int:
        """Keys due later (a requeue after, a back-off), as the delaying queue counts them."""
        return len(self._delayed)

    @property
    def shutting_down(self) -> bool:
        """Whether ``shut_down`` was called (adds are ignored from then on)."""
        return self._shutting_down

    def add(self, key: T) -> None:
        """Queue ``key`` now at priority 0 (controller-runtime's ``Add``): what every event of a
        running controller does, so it costs what the plain work queue's ``add`` does."""
        ready = self._ready
        if key in ready:  # ready at 0 or above already
            return
        if self._shutting_down:
            return
        if self._below and key in self._below:  # ready below 0: raised
            self._raise(key, 0)
            return
        if key not in self._delayed and key not in self._processing:
            # A key new to the queue, ready now, at the FIFO's end.
            sequence = self._sequence = self._sequence + 1
            ready[key] = sequence
            self._zero_fifo.append(key)
            if self.metrics is not NO_METRICS:
                self.metrics.added()
                self._ready_since[sequence] = time.perf_counter()
            if self._waiters:
                self._wake_one()
            return
        self._add_slowly(key, 0, 0.0)

    def add_with_options(self, key: T, *, priority: int = 0, after: float = 0.0) -> None:
        """Queue ``key`` at ``priority``, after ``after`` seconds (controller-runtime's
        ``AddWithOpts``); a waiting key keeps max priority, min ready time."""
        if key in self._ready or key in self._below:  # ready: only a higher priority changes anything
            if priority > self._unusual.get(key, 0):
                self._raise(key, priority)
            return
        if self._shutting_down:
            return
        if after <= 0 and key not in self._delayed and key not in self._processing:
            sequence = self._sequence = self._sequence + 1
            self._make_ready(key, priority, sequence, fresh=True)
            if self.metrics is not NO_METRICS:
                self.metrics.added()
            return
        self._add_slowly(key, priority, after)

    def _add_slowly(self, key: T, priority: int, after: float) -> None:
        """An add that is not a new key ready now: one being processed, due later, or waiting
        for a time that this add brings forward."""
        if key in self._processing:
            due = asyncio.get_running_loop().time() + after if after > 0 else 0.0
            previous = self._after_done.get(key)
            if previous is not None:
                priority, due = max(priority, previous[0]), min(due, previous[1])
            self._after_done[key] = (priority, due)
            return
        delayed = self._delayed.get(key)
        if after <= 0:
            assert delayed is not None  # the caller handled a key new to the queue
            delayed[3].cancel()
            del self._delayed[key]
            self._make_ready(key, max(priority, delayed[0]), delayed[1], fresh=False)
            return
        due = asyncio.get_running_loop().time() + after
        if delayed is None:
            sequence = self._sequence = self._sequence + 1
            if self.metrics is not NO_METRICS:
                self.metrics.added()
        else:
            if priority <= delayed[0] and due >= delayed[2]:
                return
            delayed[3].cancel()
            priority, sequence, due = max(priority, delayed[0]), delayed[1], min(due, delayed[2])
        timer = asyncio.get_running_loop().call_at(due, self._became_ready, key, sequence, due)
        self._delayed[key] = (priority, sequence, due, timer)

    def add_after(self, key: T, delay: float) -> None:
        """Queue ``key`` in ``delay`` seconds at priority 0 (a requeue after)."""
        self.add_with_options(key, after=delay)

    def add_rate_limited(self, key: T, *, priority: int = 0) -> None:
        """Queue ``key`` after the rate limiter's back-off for it (a failed reconcile's retry)."""
        self.metrics.retried()
        self.add_with_options(key, priority=priority, after=self.rate_limiter.when(key))

    def forget(self, key: T) -> None:
        """Reset ``key``'s back-off (its reconcile succeeded)."""
        self.rate_limiter.forget(key)

    def num_requeues(self, key: T) -> int:
        """How many times ``key`` was retried since it was last forgotten."""
        return self.rate_limiter.num_requeues(key)

    def get_nowait(self) -> T:
        """The highest-priority ready key, now; ``asyncio.QueueEmpty`` when none is ready,
        ``ShutDown`` after shutdown."""
        ready = self._ready
        if ready or self._below:
            if not self._unusual and not self._zero.raised and not self._leftovers:
                # Every ready key is at priority 0, in its FIFO, in order (the steady state).
                fifo = self._zero_fifo
                while fifo:
                    key = fifo.popleft()
                    sequence = ready.pop(key, None)
                    if sequence is not None:  # (``_hand_out``, inline: every reconcile's get)
                        self._processing.add(key)
                        if self.metrics is not NO_METRICS:
                            now = time.perf_counter()
                            waited = now - self._ready_since.pop(sequence, now)
                            self.metrics.handed_out(waited)
                            self._started_at[key] = now
                        return key
            for priority in self._level_order:
                key_found = self._first_of(self._levels[priority], priority)
                if key_found is not None:
                    return self._hand_out(key_found[0])
        if self._shutting_down:
            raise ShutDown
        raise asyncio.QueueEmpty

    def _first_of(self, level: _Level[T], priority: int) -> tuple[T] | None:
        """The first ready key of ``level`` (in a 1-tuple: a key may be falsy), taken out of it;
        None when it holds none. Stale entries met on the way are dropped."""
        ready = self._ready if priority >= 0 else self._below
        unusual, leftovers = self._unusual, self._leftovers
        fifo, raised = level.fifo, level.raised
        while fifo:
            key = fifo[0]
            if leftovers:
                left = leftovers.get((priority, key))
                if left is not None:
                    fifo.popleft()
                    if left > 1:
                        leftovers[(priority, key)] = left - 1
                    else:
                        del leftovers[(priority, key)]
                    continue
            if key in ready and unusual.get(key, 0) == priority:
                break
            fifo.popleft()
        while raised:
            sequence, key = raised[0]
            if ready.get(key) == sequence and unusual.get(key, 0) == priority and key in self._heaped:
                break
            heapq.heappop(raised)
        if raised and (not fifo or raised[0][0] < ready[fifo[0]]):
            key = heapq.heappop(raised)[1]
            self._heaped.discard(key)
        elif fifo:
            key = fifo.popleft()
        else:
            return None
        if priority:
            del unusual[key]
        return (key,)

    async def get(self) -> T:
        """The next key, waiting for one; raises ``ShutDown`` once shut down and nothing is ready."""
        while not self._ready and not self._below:
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

    def done(self, key: T) -> None:
        """The worker finished ``key``; it is queued again if it was added meanwhile."""
        self._processing.discard(key)
        if self.metrics is not NO_METRICS:
            started = self._started_at.pop(key, None)
            if started is not None:
                self.metrics.finished(time.perf_counter() - started)
        pending = self._after_done.pop(key, None) if self._after_done else None
        if pending is not None and not self._shutting_down:
            priority, due = pending
            after = due - asyncio.get_running_loop().time() if due else 0.0
            self.add_with_options(key, priority=priority, after=after)
        elif not self._processing and self._drained is not None:
            self._drained.set()

    def is_processing(self, key: T) -> bool:
        """Whether a worker holds ``key`` (handed out, not yet ``done``)."""
        return key in self._processing

    def processing_since(self) -> list[float]:
        """When each key now held by a worker was handed out (``time.perf_counter``)."""
        return list(self._started_at.values())

    async def shut_down_with_drain(self) -> None:
        """Shut down, then wait until every key handed out is ``done``."""
        self.shut_down()
        if self._processing:
            self._drained = asyncio.Event()
            await self._drained.wait()

    def shut_down(self) -> None:
        """Accept no more keys; getters receive what is ready, then ``ShutDown``."""
        self._shutting_down = True
        for delayed in self._delayed.values():
            delayed[3].cancel()
        self._delayed.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    # ------------------------------------------------------------------ internals

    def _hand_out(self, key: T) -> T:
        sequence = self._ready.pop(key, None)
        if sequence is None:
            sequence = self._below.pop(key)
        self._processing.add(key)
        if self.metrics is not NO_METRICS:
            now = time.perf_counter()
            self.metrics.handed_out(now - self._ready_since.pop(sequence, now))
            self._started_at[key] = now
        return key

    def depth_by_priority(self) -> dict[int, int]:
        """Waiting keys (ready or due later) by priority: ``workqueue_depth{priority=...}``."""
        depth: dict[int, int] = {}
        for store in (self._ready, self._below):
            for key in store:
                priority = self._unusual.get(key, 0)
                depth[priority] = depth.get(priority, 0) + 1
        for delayed in self._delayed.values():
            depth[delayed[0]] = depth.get(delayed[0], 0) + 1
        return depth

    def _level(self, priority: int) -> _Level[T]:
        level = self._levels.get(priority)
        if level is None:
            level = self._levels[priority] = _Level()
            self._level_order = sorted(self._levels, reverse=True)
        return level

    def _make_ready(self, key: T, priority: int, sequence: int, *, fresh: bool) -> None:
        """``key`` ready now; ``fresh``: its sequence is the newest, so it joins the FIFO's
        end (else, added earlier and due only now, it takes its place in the heap)."""
        (self._ready if priority >= 0 else self._below)[key] = sequence
        if priority:
            self._unusual[key] = priority
        level = self._level(priority)
        if fresh:
            level.fifo.append(key)
        else:
            heapq.heappush(level.raised, (sequence, key))
            self._heaped.add(key)
        if self.metrics is not NO_METRICS:
            self._ready_since[sequence] = time.perf_counter()
        self._wake_one()

    def _raise(self, key: T, priority: int) -> None:
        """``key``, ready, raised to ``priority``: to that level's heap, in first-added order."""
        current = self._unusual.get(key, 0)
        if key not in self._heaped:  # its FIFO entry stays behind, to be skipped
            left = (current, key)
            self._leftovers[left] = self._leftovers.get(left, 0) + 1
            self._heaped.add(key)
        if priority:
            self._unusual[key] = priority
        else:
            del self._unusual[key]
        if current < 0 <= priority:
            self._ready[key] = self._below.pop(key)
        sequence = self._ready[key] if priority >= 0 else self._below[key]
        heapq.heappush(self._level(priority).raised, (sequence, key))

    def _became_ready(self, key: T, sequence: int, due: float) -> None:
        delayed = self._delayed.get(key)
        if delayed is None or delayed[1] != sequence or delayed[2] != due:
            return
        del self._delayed[key]
        self._make_ready(key, delayed[0], sequence, fresh=False)

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
