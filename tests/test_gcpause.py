"""The counted GC pause: overlapping holders, and a holder giving its pause up while it waits."""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest

from kubeloop.gcpause import gc_paused, gc_resumed, waited
from kubeloop.testing import eventually
from tests.gcstate import gc_back_on, wait_gc_back_on


def test_pauses_are_counted_across_threads_and_restore_the_gc() -> None:
    wait_gc_back_on()
    inside = threading.Event()
    release = threading.Event()

    def other_holder() -> None:
        with gc_paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other_holder)
    with gc_paused():
        assert not gc.isenabled()
        thread.start()
        inside.wait(10)
    assert not gc.isenabled()  # the other thread still holds its pause
    release.set()
    thread.join(10)
    wait_gc_back_on()


def test_a_holder_resumes_the_gc_while_it_waits() -> None:
    with gc_paused():
        assert not gc.isenabled()
        with gc_resumed():
            wait_gc_back_on()
        assert not gc.isenabled()
    wait_gc_back_on()
    with gc_resumed():  # outside a pause: nothing to give up
        wait_gc_back_on()
    wait_gc_back_on()


def test_a_serving_process_hides_what_it_loaded_and_collects_less_often() -> None:
    """What it loaded is frozen; young passes come every 5,000 allocations, and the middle
    generation (what outlived a young pass) is walked at every third pass, so that no pass walks
    more than two young passes' survivors; the oldest is not walked meanwhile."""
    import subprocess
    import sys

    code = (
        "import gc\n"
        "from kubeloop.gcpause import SERVING_YOUNG_THRESHOLD, tune_for_serving\n"
        "tune_for_serving()\n"
        "assert gc.get_threshold()[0] == SERVING_YOUNG_THRESHOLD, gc.get_threshold()\n"
        "assert gc.get_freeze_count() > 1_000, gc.get_freeze_count()\n"
        "passes = []\n"
        "gc.callbacks.append(lambda phase, info: phase == 'start' and passes.append(info['generation']))\n"
        "kept = [[] for _ in range(SERVING_YOUNG_THRESHOLD * 12)]  # every one outlives its pass\n"
        "gc.callbacks.clear()\n"
        "assert passes[:9] == [0, 0, 1] * 3 and 2 not in passes, passes\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_server_starts_up_with_no_gc_pass_and_then_collects_as_it_serves() -> None:
    """``kubeloop apiserver``'s start: the collector stays off while the server is imported (its
    passes over the ~70,000 objects took 40-100 ms), everything is frozen without a full pass
    first (another 60-90 ms), and the collector is on again afterwards."""
    import subprocess
    import sys

    code = (
        "import gc\n"
        "from kubeloop.gcpause import start_up_without_gc, tune_for_serving\n"
        "passes = []\n"
        "gc.callbacks.append(lambda phase, info: phase == 'start' and passes.append(info['generation']))\n"
        "start_up_without_gc()\n"
        "import kubeloop.apiserver.server, kubeloop.controllermanager.controllermanager\n"
        "assert passes == [] and not gc.isenabled(), passes\n"
        "tune_for_serving(collect_first=False)\n"
        "assert passes == [] and gc.isenabled()\n"
        "assert gc.get_freeze_count() > 50_000, gc.get_freeze_count()\n"
        "kept = [[] for _ in range(20_000)]\n"
        "assert passes, 'the collector runs again'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_a_short_wait_keeps_the_pause_and_a_long_one_gives_it_up() -> None:
    """Inside a pause, a wait that ends at once keeps the GC off throughout (resuming it let the
    first pass walk everything the paused work held: a 100 ms stall of every thread); a wait
    longer than ``held_for`` gives the pause up until it ends (a stalled disk never keeps the GC
    off), and the pause holds again after."""
    loop = asyncio.get_running_loop()
    with gc_paused():
        seen: list[bool] = []

        async def at_once() -> int:
            seen.append(gc.isenabled())
            return 1

        assert await waited(at_once()) == 1
        assert seen == [False]
        long: asyncio.Future[int] = loop.create_future()

        async def end_it_once_the_gc_runs() -> None:
            await eventually(gc.isenabled)  # waited gives the pause up
            long.set_result(2)

        ender = asyncio.create_task(end_it_once_the_gc_runs())
        assert await waited(long, held_for=0.05) == 2
        await ender
        assert not gc.isenabled()
    await gc_back_on()


async def test_cancelling_a_waiter_cancels_what_it_waits_for() -> None:
    loop = asyncio.get_running_loop()
    with gc_paused():
        never: asyncio.Future[None] = loop.create_future()
        waiter = asyncio.create_task(waited(never))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert never.cancelled() and not gc.isenabled()
    await gc_back_on()
