"""The counted GC pause: overlapping holders, and a holder giving its pause up while it waits."""

from __future__ import annotations

import gc
import threading

from kubeloop.gcpause import gc_paused, gc_resumed


def test_pauses_are_counted_across_threads_and_restore_the_gc() -> None:
    assert gc.isenabled()
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
    assert gc.isenabled()


def test_a_holder_resumes_the_gc_while_it_waits() -> None:
    with gc_paused():
        assert not gc.isenabled()
        with gc_resumed():
            assert gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with gc_resumed():  # outside a pause: nothing to give up
        assert gc.isenabled()
    assert gc.isenabled()


def test_a_serving_process_hides_what_it_loaded_and_collects_less_often() -> None:
    import subprocess
    import sys

    code = (
        "import gc\n"
        "from kubeloop.gcpause import SERVING_YOUNG_THRESHOLD, tune_for_serving\n"
        "before = gc.get_threshold()\n"
        "tune_for_serving()\n"
        "after = gc.get_threshold()\n"
        "assert after == (SERVING_YOUNG_THRESHOLD, before[1], before[2]), after\n"
        "assert gc.get_freeze_count() > 1_000, gc.get_freeze_count()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
