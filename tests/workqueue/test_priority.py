"""The priority queue: highest priority first, FIFO among equals, one merged entry per key
(max priority, earliest time), delays, no key handed out twice at once, shutdown."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kubeloop.workqueue import priority as priority_module
from kubeloop.workqueue.priority import LOW_PRIORITY, PriorityQueue
from kubeloop.workqueue.queue import ShutDown
from tests.workqueue.recording import RecordingMetrics, fake_time


async def test_priority_then_fifo() -> None:
    queue: PriorityQueue[str] = PriorityQueue()
    queue.add_with_options("initial-1", priority=LOW_PRIORITY)
    queue.add_with_options("initial-2", priority=LOW_PRIORITY)
    queue.add("change-1")
    queue.add("change-2")
    queue.add_with_options("urgent", priority=10)
    assert [queue.get_nowait() for _ in range(5)] == [
        "urgent",
        "change-1",
        "change-2",
        "initial-1",
        "initial-2",
    ]


async def test_entries_merge_to_max_priority_and_earliest_time() -> None:
    queue: PriorityQueue[str] = PriorityQueue()
    queue.add_with_options("k", priority=LOW_PRIORITY)
    queue.add("other")
    queue.add_with_options("k", priority=5)  # raised: now ahead of "other"
    queue.add_with_options("k", priority=1)  # lower: ignored
    assert len(queue) == 2
    assert queue.get_nowait() == "k"

    queue.add_with_options("later", after=10)
    queue.add_with_options("later", after=0.05)  # earlier time wins
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert queue.get_nowait() == "other"
    assert await asyncio.wait_for(queue.get(), 2) == "later"
    assert loop.time() - started >= 0.04  # not before it was due (and not 10 s later: wait_for)


async def test_no_key_twice_and_readd_after_done() -> None:
    queue: PriorityQueue[str] = PriorityQueue()
    queue.add("k")
    key = queue.get_nowait()
    queue.add_with_options("k", priority=LOW_PRIORITY)
    queue.add_with_options("k", priority=7)  # merged while processing
    with pytest.raises(asyncio.QueueEmpty):
        queue.get_nowait()  # not handed out while a worker holds it
    queue.add_with_options("x", priority=3)
    queue.done(key)
    assert queue.get_nowait() == "k"  # came back with priority 7, ahead of x (3)
    assert queue.get_nowait() == "x"


async def test_shutdown_wakes_getters() -> None:
    queue: PriorityQueue[str] = PriorityQueue()
    waiting = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0.01)
    queue.add_with_options("after-never", after=5)
    queue.shut_down()
    with pytest.raises(ShutDown):
        await asyncio.wait_for(waiting, 1)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(-2, 2)), max_size=30))
def test_order_matches_a_model(adds: list[tuple[str, int]]) -> None:
    async def run() -> None:
        queue: PriorityQueue[str] = PriorityQueue()
        best: dict[str, int] = {}
        first_seen: dict[str, int] = {}
        for index, (key, priority) in enumerate(adds):
            queue.add_with_options(key, priority=priority)
            best[key] = max(priority, best.get(key, priority))
            first_seen.setdefault(key, index)
        expected = sorted(best, key=lambda k: (-best[k], first_seen[k]))
        got = []
        while True:
            try:
                got.append(queue.get_nowait())
            except asyncio.QueueEmpty:
                break
        assert got == expected

    asyncio.run(run())


# One step of a controller's life: an add at a priority, or a worker taking the next key (and
# finishing it at once, or holding it while more adds come).
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from("abcde"), st.sampled_from([LOW_PRIORITY, -1, 0, 0, 3])),
        st.tuples(st.just("get"), st.booleans(), st.just(0)),
        st.tuples(st.just("done"), st.just(""), st.just(0)),
    ),
    max_size=60,
)


L = LOW_PRIORITY


@settings(max_examples=300, deadline=None)
@given(_steps)
# A raise leaves a FIFO entry behind; the key, handed out and added again, must not take it.
@example(
    [("add", "k", L), ("add", "j", L), ("add", "k", 0), ("get", False, 0), ("add", "k", L), ("get", False, 0)]
)
# A key raised twice leaves a heap entry behind; raised again later, it keeps its new place.
@example(
    [
        *[("add", "k", L), ("add", "k", 0), ("add", "k", 3), ("get", False, 0)],
        *[("add", "j", 0), ("add", "k", L), ("add", "k", 0), ("get", False, 0), ("get", False, 0)],
    ]
)
def test_raises_hand_outs_and_re_adds_match_a_model(steps: list[tuple[str, Any, int]]) -> None:
    """Against a plain model (a dict of key → (priority, first-added), scanned on every get):
    the FIFOs, the heaps of raised keys and the leftovers they skip hand out the same keys; and
    the metrics say each waited from when it became ready (a raise keeps that time; a key added
    while processed becomes ready at its ``done``) and worked from its get to its done."""

    async def run() -> None:
        metrics = RecordingMetrics()
        queue: PriorityQueue[str] = PriorityQueue(metrics=metrics)
        waiting: dict[str, tuple[int, int]] = {}
        ready_since: dict[str, float] = {}
        started_at: dict[str, float] = {}
        processing: set[str] = set()
        again: dict[str, int] = {}  # added while processing: max priority
        held: list[str] = []
        counter = 0

        def model_add(key: str, priority: int) -> None:
            nonlocal counter
            if key in processing:
                again[key] = max(priority, again.get(key, priority))
            elif key in waiting:
                waiting[key] = (max(priority, waiting[key][0]), waiting[key][1])
            else:
                counter += 1
                waiting[key] = (priority, counter)
                ready_since[key] = clock.now

        def model_done(key: str) -> None:
            queue.done(key)
            assert metrics.worked[-1] == clock.now - started_at.pop(key)
            processing.discard(key)
            if key in again:
                model_add(key, again.pop(key))

        for kind, arg, priority in steps:
            clock.now += 1
            if kind == "add":
                if priority == 0:
                    queue.add(arg)
                else:
                    queue.add_with_options(arg, priority=priority)
                model_add(arg, priority)
            elif kind == "get":
                expected = min(waiting, key=lambda k: (-waiting[k][0], waiting[k][1])) if waiting else None
                if expected is None:
                    with pytest.raises(asyncio.QueueEmpty):
                        queue.get_nowait()
                    continue
                assert queue.get_nowait() == expected
                assert metrics.waited[-1] == clock.now - ready_since.pop(expected)
                started_at[expected] = clock.now
                del waiting[expected]
                processing.add(expected)
                if arg:  # held by the worker for now
                    held.append(expected)
                else:
                    clock.now += 0.5
                    model_done(expected)
            elif held:
                model_done(held.pop(0))
            assert len(queue) == len(waiting)
            assert queue.depth_by_priority() == dict(Counter(p for p, _ in waiting.values()))
            assert metrics.adds == len(metrics.waited) + len(waiting)

    with fake_time(priority_module) as clock:
        asyncio.run(run())


async def test_a_key_due_later_takes_its_first_added_place_when_due() -> None:
    queue: PriorityQueue[str] = PriorityQueue()
    queue.add_with_options("early", after=0.02)
    queue.add("later")
    waiting = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(0.05, waiting.set_result, None)
    await waiting
    assert queue.ready_count() == 2
    assert [queue.get_nowait(), queue.get_nowait()] == ["early", "later"]
