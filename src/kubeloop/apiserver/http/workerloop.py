"""A second event loop in its own thread, for the CPU-heavy part of large write requests.

Decoding, validating and recording the managed fields of a megabyte-sized object takes the server
a long stretch of pure Python; done on the serving loop, every other client would wait that long. The HTTP layer
runs such requests' registry work here instead, so the serving loop only shares the interpreter
with it (the GIL is handed over every few milliseconds) and keeps answering. The object store
itself stays on the serving loop: its writes are forwarded there (see ``ObjectStore.write``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kubeloop.gcpause import gc_paused
from kubeloop.lifecycle import cancel_and_wait

T = TypeVar("T")


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
            with gc_paused():
                try:
                    return await work()
                except BaseException as error:
                    # Its traceback holds the frames that decoded the body: free them here, not
                    # on the serving loop that receives the error.
                    error.__traceback__ = error.__context__ = error.__cause__ = None
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
