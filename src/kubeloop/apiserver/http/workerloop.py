"""A second event loop in its own thread, for the CPU-heavy part of large write requests.

Decoding, validating and recording the managed fields of a megabyte-sized object takes the server
a long stretch of pure Python; done on the serving loop, every other client would wait that long. The HTTP layer
runs such requests' registry work here instead, so the serving loop only shares the interpreter
with it and keeps answering. The object store itself stays on the serving loop: its writes are
forwarded there (see ``ObjectStore.write``).

While such work runs, the interpreter hands its lock (the GIL) over more often than CPython's
5 ms: the serving loop gives the lock up at every read and write of a TLS socket and, with the
worker busy, waited up to a full interval to get it back, several times per request
(``bench/stall.py``, medians of four alternated runs, other requests' worst wait: a 1 MB YAML
body 25 → 12 ms, a 1 MB server-side apply 30 → 17 ms; 2.9 MB bodies unchanged; the heavy
requests themselves no slower).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

from kubeloop.freeing import free_in_steps, take_traceback
from kubeloop.gcpause import gc_paused
from kubeloop.lifecycle import cancel_and_wait

T = TypeVar("T")

#: The interpreter's switch interval while a worker loop works (CPython's default: 5 ms).
BUSY_SWITCH_INTERVAL = 0.0005

_switch_lock = threading.Lock()
_busy = 0
_idle_switch_interval = 0.0


@contextlib.contextmanager
def shorter_switch_interval() -> Iterator[None]:
    """:data:`BUSY_SWITCH_INTERVAL` for the block (counted across worker loops and threads; the
    interval from before comes back when the last block ends)."""
    global _busy, _idle_switch_interval
    with _switch_lock:
        if _busy == 0:
            _idle_switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(BUSY_SWITCH_INTERVAL, _idle_switch_interval))
        _busy += 1
    try:
        yield
    finally:
        with _switch_lock:
            _busy -= 1
            if _busy == 0:
                sys.setswitchinterval(_idle_switch_interval)


class WorkerLoop:
    """Owns one daemon thread running an event loop; ``start`` and ``stop`` are the server's."""

    def __init__(self, name: str = "kubeloop-apiserver-worker") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
        self._thread.start()

    async def run(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work()`` on the worker loop; cancelling the caller cancels it there too."""
        if self._loop is None:
            return await work()

        async def call() -> T:
            # A large body is hundreds of thousands of acyclic objects: without the pause, GC
            # passes over them hold the interpreter lock for 100+ ms at a time.
            with gc_paused(), shorter_switch_interval():
                try:
                    return await work()
                except BaseException as error:
                    # Its traceback holds the frames that decoded the body: free them here, not
                    # on the serving loop that receives the error, and a member at a time (one
                    # cascade held the GIL for 35-50 ms).
                    free_in_steps(take_traceback(error))
                    raise

        future = asyncio.run_coroutine_threadsafe(call(), self._loop)
        return await asyncio.wrap_future(future)

    async def stop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return

        async def cancel_all() -> None:
            # What is left is requests' work: their failures are their callers' (through their
            # futures), not the shutdown's. Every task has ended when cancel_and_wait returns or raises.
            with contextlib.suppress(Exception):
                await cancel_and_wait(t for t in asyncio.all_tasks() if t is not asyncio.current_task())

        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(cancel_all(), loop))
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join)
        loop.close()
