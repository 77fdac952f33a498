"""The worker loop runs large requests' work in its own thread; while any such work runs, the
interpreter hands its lock over every 0.5 ms instead of every 5 ms, and the interval from before
comes back once the last work ends (two worker loops, overlapping: a server per test thread)."""

from __future__ import annotations

import asyncio
import sys
import threading

from kubeloop.apiserver.http.workerloop import BUSY_SWITCH_INTERVAL, WorkerLoop


async def test_work_runs_in_the_workers_thread_with_a_shorter_switch_interval() -> None:
    before = sys.getswitchinterval()
    assert before > BUSY_SWITCH_INTERVAL
    first, second = WorkerLoop("first"), WorkerLoop("second")
    first.start()
    second.start()
    try:
        first_started, second_started = threading.Event(), threading.Event()
        release_first, release_second = threading.Event(), threading.Event()

        def holding(started: threading.Event, release: threading.Event) -> tuple[str, float]:
            started.set()
            release.wait()
            return threading.current_thread().name, sys.getswitchinterval()

        async def in_first() -> tuple[str, float]:
            return await asyncio.to_thread(holding, first_started, release_first)

        async def in_second() -> tuple[str, float]:
            return await asyncio.to_thread(holding, second_started, release_second)

        async def worker_thread() -> str:
            return threading.current_thread().name

        assert await first.run(worker_thread) == "first"
        assert sys.getswitchinterval() == before
        one = asyncio.ensure_future(first.run(in_first))
        await asyncio.to_thread(first_started.wait)
        assert sys.getswitchinterval() == BUSY_SWITCH_INTERVAL
        two = asyncio.ensure_future(second.run(in_second))
        await asyncio.to_thread(second_started.wait)
        release_first.set()
        assert (await one)[1] == BUSY_SWITCH_INTERVAL
        assert sys.getswitchinterval() == BUSY_SWITCH_INTERVAL  # the second still works
        release_second.set()
        assert (await two)[1] == BUSY_SWITCH_INTERVAL
        assert sys.getswitchinterval() == before
    finally:
        release_first.set()
        release_second.set()
        await first.stop()
        await second.stop()


async def test_work_that_fails_gives_the_interval_back() -> None:
    before = sys.getswitchinterval()
    worker = WorkerLoop()
    worker.start()
    try:

        async def failing() -> None:
            assert sys.getswitchinterval() == BUSY_SWITCH_INTERVAL
            raise ValueError("the body is not an object")

        try:
            await worker.run(failing)
        except ValueError as error:
            assert str(error) == "the body is not an object"
        else:
            raise AssertionError("the work's error was not raised")
        assert sys.getswitchinterval() == before
    finally:
        await worker.stop()
