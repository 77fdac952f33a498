"""Pausing CPython's cyclic garbage collector while many acyclic objects are made at once.

Decoding a large body or thousands of objects allocates hundreds of thousands of dicts, lists and
strings that hold no reference cycles (plain JSON values are freed by reference counting). Each
generational pass the GC runs meanwhile walks every one made so far, holding the interpreter lock
and stopping every other thread (docs/design/performance.md). Work of that shape runs inside
:func:`gc_paused`.

The pause is counted: overlapping pauses from several threads end when the last one does. A
holder that waits (for the storage, say) does so with :func:`waited`: the pause is kept for a
short wait and given up (:func:`gc_resumed`) once the wait runs long, so the GC is never off for
long. Giving it up at once cost more than it saved: the first pass after it walked everything
the paused work still held (a 1 MB merge patch: a 100 ms pass holding every thread up,
``bench/stall.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import threading
from collections.abc import Awaitable, Iterator
from typing import TypeVar

T = TypeVar("T")

#: How long a holder keeps its pause while it waits (a durable write takes milliseconds).
WAIT_HELD_SECONDS = 0.5

_lock = threading.Lock()
_depth = 0
_was_enabled = False


#: Whether the running task (or thread) holds a pause: only a holder may give it up for a while.
_holding: contextvars.ContextVar[bool] = contextvars.ContextVar("kubeloop_gc_pause_held", default=False)


def _acquire() -> None:
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1


def _release() -> None:
    global _depth
    with _lock:
        _depth -= 1
        if _depth == 0 and _was_enabled:
            gc.enable()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic GC for the block (counted across threads; restores what was before)."""
    _acquire()
    token = _holding.set(True)
    try:
        yield
    finally:
        _holding.reset(token)
        _release()


@contextlib.contextmanager
def gc_resumed() -> Iterator[None]:
    """Inside :func:`gc_paused`, give up this task's pause for the block (while it waits for
    another thread, say), so that a pause never spans a wait; the GC runs again unless another
    holder keeps it paused. Outside a pause it does nothing."""
    if not _holding.get():
        yield
        return
    _release()
    token = _holding.set(False)
    try:
        yield
    finally:
        _holding.reset(token)
        _acquire()


async def waited(awaitable: Awaitable[T], *, held_for: float = WAIT_HELD_SECONDS) -> T:
    """Await ``awaitable`` inside a pause: the pause is kept for the first ``held_for`` seconds
    and given up for the rest of a longer wait (a stalled disk never keeps the GC off).
    Cancelling the caller cancels ``awaitable``. Outside a pause it is a plain await."""
    if not _holding.get():
        return await awaitable
    future = asyncio.ensure_future(awaitable)
    try:
        await asyncio.wait((future,), timeout=held_for)
        if not future.done():
            with gc_resumed():
                await asyncio.wait((future,))
    except BaseException:
        future.cancel()
        raise
    return future.result()


#: Allocations between passes over the youngest generation in a serving process (CPython's
#: default is 700). Each pass walks what outlived it (stored objects: ~1 µs per dict or list),
#: and every other one the middle generation too: at 20,000, young passes of ~9 ms and middle
#: ones of 27-64 ms while objects were being stored; at 5,000 a quarter of that each.
SERVING_YOUNG_THRESHOLD = 5_000
#: Young passes between passes over the middle generation (CPython's default is 10): it is
#: collected at every third pass, after two young ones.
SERVING_MIDDLE_THRESHOLD = 1
#: Middle passes before a full one is considered (CPython's default is 10; it still waits, as
#: CPython always does, until what reached the oldest generation since the last full pass is a
#: quarter of what it holds).
SERVING_OLDEST_THRESHOLD = 50


def start_up_without_gc() -> None:
    """For a server process about to import and start: the collector is off until
    :func:`tune_for_serving` (``collect_first=False``) freezes what start-up made.

    Importing and starting ``kubeloop apiserver`` makes ~70,000 long-lived objects; with the
    collector on, its passes over them took 40-100 ms of the start, and the full pass that used
    to precede the freeze another 60-90 ms, for ~1,900 objects of garbage (import-time cycles,
    ~0.3 MB), which the freeze now keeps instead.
    """
    gc.disable()


def tune_for_serving(*, collect_first: bool = True) -> None:
    """For a process that is about to serve for long (``kubeloop apiserver``, ``kubeloop run``):
    what it has loaded so far (modules, schemas, models) leaves the GC's sight for good
    (``gc.freeze``), the youngest generation is collected every
    :data:`SERVING_YOUNG_THRESHOLD` allocations instead of every 700, and the middle one at
    every third pass instead of every eleventh.

    A write allocates a few thousand short-lived, acyclic JSON values that reference counting
    frees anyway; with the default threshold the collector ran several times per request and
    took a sizeable share of the server's CPU (``bench/registry_writes.py``). What outlives a
    young pass (a stored object, a cache entry) waits in the middle generation, and a pass over
    it walks everything promoted since the last: after ten young passes of 20,000 allocations,
    100-180 ms during which no request is served (``bench/stall.py``: the worst wait of other
    requests 180 ms, 68 ms with a middle pass every third; writes/s unchanged in B4). Young
    passes every 5,000 allocations instead of 20,000 (four alternated runs each): the worst
    wait 91 → 63 ms (the watch from 0 of 20,000 objects 33-115 → 50-55 ms), B4's write p99
    49 → 34 ms, at 3 % more of the server's CPU per write.

    ``collect_first``: a full pass first, so that no garbage is frozen; a process that started
    with :func:`start_up_without_gc` skips it. The collector is on afterwards.
    """
    if collect_first:
        gc.collect()
    gc.freeze()
    gc.set_threshold(SERVING_YOUNG_THRESHOLD, SERVING_MIDDLE_THRESHOLD, SERVING_OLDEST_THRESHOLD)
    gc.enable()
