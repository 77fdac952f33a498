"""cancel_and_wait: every task has ended when it returns, failures surface, and the caller's own
cancellation is not swallowed."""

from __future__ import annotations

import asyncio

import pytest

from kubeloop.lifecycle import cancel_and_wait, start_or_stop


async def test_every_task_has_ended_including_one_that_cleans_up_first() -> None:
    cleaned: list[str] = []

    async def slow_cleanup() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(0.05)  # an owner must wait for this, too
            cleaned.append("slow")

    tasks = [asyncio.create_task(asyncio.sleep(3600)), asyncio.create_task(slow_cleanup())]
    await asyncio.sleep(0)
    await cancel_and_wait(tasks)
    assert all(task.done() for task in tasks) and cleaned == ["slow"]
    await cancel_and_wait([])


async def test_a_task_that_failed_is_raised_after_all_have_ended() -> None:
    async def fail() -> None:
        raise RuntimeError("broke")

    failing = asyncio.create_task(fail())
    sleeper = asyncio.create_task(asyncio.sleep(3600))
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="broke"):
        await cancel_and_wait([failing, sleeper])
    assert sleeper.cancelled()


async def test_the_callers_cancellation_propagates() -> None:
    released = asyncio.Event()

    async def stubborn() -> None:
        while not released.is_set():
            try:
                await released.wait()
            except asyncio.CancelledError:
                continue  # keeps going when told to stop, until released

    child = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    owner = asyncio.create_task(cancel_and_wait([child]))
    await asyncio.sleep(0.01)
    owner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await owner
    assert owner.cancelled() and not child.done()
    released.set()
    await child


async def test_start_or_stop_stops_what_failed_to_start() -> None:
    calls: list[str] = []

    async def start() -> None:
        calls.append("start")
        raise OSError("port in use")

    async def stop() -> None:
        calls.append("stop")

    with pytest.raises(OSError, match="port in use"):
        await start_or_stop(start, stop)
    assert calls == ["start", "stop"]
    calls.clear()

    async def fine() -> None:
        calls.append("start")

    await start_or_stop(fine, stop)
    assert calls == ["start"]
