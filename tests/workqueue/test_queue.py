"""The work queues: deduplication and no concurrent processing (a hypothesis state machine),
blocking get and shutdown, delays (earliest wins, timers cancelled), and the rate limiters."""

from __future__ import annotations

import asyncio
from collections import deque

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kubeloop.workqueue import queue as queue_module
from kubeloop.workqueue.delaying import DelayingQueue
from kubeloop.workqueue.queue import ShutDown, WorkQueue
from kubeloop.workqueue.ratelimiter import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)
from kubeloop.workqueue.ratelimiting import RateLimitingQueue
from tests.workqueue.recording import RecordingMetrics, fake_time

KEYS = st.sampled_from(["a", "b", "c", "d"])


class QueueMachine(RuleBasedStateMachine):
    """Random adds, gets and dones against a model of what client-go's queue promises, its
    metrics among it: a key waited from the add that made it dirty (one made while it was
    processed too) to its get, and worked from its get to its done."""

    def __init__(self) -> None:
        super().__init__()
        self.timing = fake_time(queue_module)
        self.clock = self.timing.__enter__()
        self.metrics = RecordingMetrics()
        self.queue: WorkQueue[str] = WorkQueue(self.metrics)
        self.model_queue: deque[str] = deque()
        self.dirty: set[str] = set()
        self.processing: set[str] = set()
        self.pending_after_done: set[str] = set()
        self.added_at: dict[str, float] = {}
        self.started_at: dict[str, float] = {}

    def teardown(self) -> None:
        self.timing.__exit__(None, None, None)

    @rule(seconds=st.sampled_from([0.5, 1.0, 7.0]))
    def time_passes(self, seconds: float) -> None:
        self.clock.now += seconds

    @rule(key=KEYS)
    def add(self, key: str) -> None:
        self.queue.add(key)
        if key in self.dirty:
            return
        self.dirty.add(key)
        self.added_at[key] = self.clock.now
        if key in self.processing:
            self.pending_after_done.add(key)
        else:
            self.model_queue.append(key)

    @precondition(lambda self: bool(self.model_queue))
    @rule()
    def get(self) -> None:
        key = self.queue.get_nowait()
        assert key == self.model_queue.popleft()  # FIFO
        assert key not in self.processing  # never two workers on one key
        self.processing.add(key)
        self.dirty.discard(key)
        assert self.metrics.waited[-1] == self.clock.now - self.added_at.pop(key)
        self.started_at[key] = self.clock.now

    @precondition(lambda self: not self.model_queue)
    @rule()
    def get_on_empty(self) -> None:
        with pytest.raises(asyncio.QueueEmpty):
            self.queue.get_nowait()

    @precondition(lambda self: bool(self.processing))
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.processing)))
        self.queue.done(key)
        self.processing.discard(key)
        assert self.metrics.worked[-1] == self.clock.now - self.started_at.pop(key)
        if key in self.pending_after_done:  # added while processing: queued again, not lost
            self.pending_after_done.discard(key)
            self.model_queue.append(key)

    @precondition(lambda self: bool(self.dirty - self.processing))
    @rule(data=st.data())
    def done_again(self, data: st.DataObject) -> None:
        """A caller's mistake: ``done`` for a key no worker holds, while it waits. Nothing
        changes: it is not queued twice (two workers could hold it), its times stay in step."""
        key = data.draw(st.sampled_from(sorted(self.dirty - self.processing)))
        self.queue.done(key)

    @invariant()
    def lengths_agree(self) -> None:
        assert len(self.queue) == len(self.model_queue)
        assert len(set(self.model_queue)) == len(self.model_queue)  # each key at most once
        for key in self.processing:
            assert self.queue.is_processing(key)
        assert self.metrics.adds == len(self.metrics.waited) + len(self.dirty)


QueueMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
test_queue_state_machine = QueueMachine.TestCase


async def test_get_waits_and_shutdown_hands_out_the_rest() -> None:
    queue: WorkQueue[str] = WorkQueue()
    getter = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0.01)
    assert not getter.done()
    queue.add("x")
    assert await asyncio.wait_for(getter, 1) == "x"

    queue.add("y")
    waiting = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    queue.shut_down()
    assert await waiting == "y"  # what was queued is still handed out
    queue.add("z")  # ignored after shutdown
    with pytest.raises(ShutDown):
        await queue.get()


async def test_shutdown_wakes_blocked_getters() -> None:
    queue: WorkQueue[str] = WorkQueue()
    getters = [asyncio.ensure_future(queue.get()) for _ in range(3)]
    await asyncio.sleep(0.01)
    queue.shut_down()
    results = await asyncio.gather(*getters, return_exceptions=True)
    assert all(isinstance(r, ShutDown) for r in results)


async def test_cancelled_getter_passes_its_wake_up_on() -> None:
    queue: WorkQueue[str] = WorkQueue()
    first = asyncio.ensure_future(queue.get())
    second = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0.01)
    queue.add("k")
    first.cancel()  # woken, then cancelled before it ran
    await asyncio.sleep(0)
    assert await asyncio.wait_for(second, 1) == "k"


async def test_shut_down_with_drain_waits_for_workers() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("slow")
    key = await queue.get()
    drained = asyncio.ensure_future(queue.shut_down_with_drain())
    await asyncio.sleep(0.05)
    assert not drained.done()  # the in-flight key is not finished
    queue.done(key)
    await asyncio.wait_for(drained, 1)


async def test_delaying_queue_keeps_the_earliest_time() -> None:
    queue: DelayingQueue[str] = DelayingQueue()
    loop = asyncio.get_running_loop()
    started = loop.time()
    queue.add_after("k", 30.0)
    queue.add_after("k", 0.05)  # sooner: replaces
    queue.add_after("k", 60.0)  # later: ignored
    assert queue.waiting() == 1 and len(queue) == 0
    assert await asyncio.wait_for(queue.get(), 20) == "k"  # the 30 s timer was replaced
    assert loop.time() - started >= 0.05  # not before it was due
    queue.done("k")
    assert queue.waiting() == 0 and len(queue) == 0  # the replaced timers are gone

    queue.add_after("now", 0)
    assert queue.get_nowait() == "now"
    queue.add_after("never", 10)
    queue.shut_down()
    assert queue.waiting() == 0  # timers cancelled: nothing outlives the queue


async def test_rate_limiting_queue_backs_off_per_key() -> None:
    queue: RateLimitingQueue[str] = RateLimitingQueue(ItemExponentialFailureRateLimiter(0.02, 1.0))
    loop = asyncio.get_running_loop()
    delays = []
    for _ in range(3):
        started = loop.time()
        queue.add_rate_limited("k")
        key = await asyncio.wait_for(queue.get(), 2)
        delays.append(loop.time() - started)
        queue.done(key)
    assert queue.num_requeues("k") == 3
    assert delays[0] >= 0.015 and delays[1] >= 0.035 and delays[2] >= 0.075  # 20, 40, 80 ms
    queue.forget("k")
    assert queue.num_requeues("k") == 0


def test_exponential_limiter() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    assert [limiter.when("k") for _ in range(4)] == [0.005, 0.01, 0.02, 0.04]
    assert limiter.when("other") == 0.005
    for _ in range(100):
        last = limiter.when("k")
    assert last == 1000.0
    limiter.forget("k")
    assert limiter.when("k") == 0.005


def test_bucket_limiter_reserves_tokens() -> None:
    now = [0.0]
    bucket = BucketRateLimiter(qps=10, burst=2, clock=lambda: now[0])
    assert [bucket.when(i) for i in range(4)] == [0.0, 0.0, pytest.approx(0.1), pytest.approx(0.2)]
    now[0] = 1.0  # 10 tokens' worth later, capped at the burst
    assert bucket.when("x") == 0.0


def test_max_of_limiters_and_the_controller_default() -> None:
    now = [0.0]
    limiter = MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.5, 10), BucketRateLimiter(1, 1, clock=lambda: now[0])
    )
    assert limiter.when("a") == 0.5
    assert limiter.when("b") == pytest.approx(1.0)  # the bucket is empty: it dominates
    assert limiter.num_requeues("a") == 1
    default = default_controller_rate_limiter()
    assert default.when("k") == 0.005
