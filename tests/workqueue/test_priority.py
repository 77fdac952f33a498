"""The priority queue: highest priority first, FIFO among equals, one merged entry per key
(max priority, earliest time), delays, no key handed out twice at once, shutdown."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.workqueue.priority import LOW_PRIORITY, PriorityQueue
from kubeloop.workqueue.queue import ShutDown


async def test_priority_then_fifo() -> None:
    queue: PriorityQueue[str] = PriorityQueue()
    queue.add("initial-1", priority=LOW_PRIORITY)
    queue.add("initial-2", priority=LOW_PRIORITY)
    queue.add("change-1")
    queue.add("change-2")
    queue.add("urgent", priority=10)
    assert [queue.get_nowait() for _ in range(5)] == [
        "urgent",
        "change-1",
        "change-2",
        "initial-1",
        "initial-2",
    ]


async def test_entries_merge_to_max_priority_and_earliest_time() -> None:
    queue: PriorityQueue[str] = PriorityQueue()
    queue.add("k", priority=LOW_PRIORITY)
    queue.add("other")
    queue.add("k", priority=5)  # raised: now ahead of "other"
    queue.add("k", priority=1)  # lower: ignored
    assert len(queue) == 2
    assert queue.get_nowait() == "k"

    queue.add("later", after=10)
    queue.add("later", after=0.05)  # earlier time wins
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert queue.get_nowait() == "other"
    assert await asyncio.wait_for(queue.get(), 2) == "later"
    assert loop.time() - started >= 0.04  # not before it was due (and not 10 s later: wait_for)


async def test_no_key_twice_and_readd_after_done() -> None:
    queue: PriorityQueue[str] = PriorityQueue()
    queue.add("k")
    key = queue.get_nowait()
    queue.add("k", priority=LOW_PRIORITY)
    queue.add("k", priority=7)  # merged while processing
    with pytest.raises(asyncio.QueueEmpty):
        queue.get_nowait()  # not handed out while a worker holds it
    queue.add("x", priority=3)
    queue.done(key)
    assert queue.get_nowait() == "k"  # came back with priority 7, ahead of x (3)
    assert queue.get_nowait() == "x"


async def test_shutdown_wakes_getters() -> None:
    queue: PriorityQueue[str] = PriorityQueue()
    waiting = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0.01)
    queue.add("after-never", after=5)
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
            queue.add(key, priority=priority)
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
