"""A queue of writes done one at a time by a task of its own, each under the write fence of the
code that queued it (a leader's reconcile: its lease; a runnable on every replica: none), so that
queuing never blocks and a fenced leader's late writes are refused as its own would be. The event
recorders write through one."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from kubeloop.client.fence import WriteFence, current_write_fence
from kubeloop.client.restclient import REQUEST_ERRORS
from kubeloop.lifecycle import cancel_and_wait

T = TypeVar("T")


class FencedQueue(Generic[T]):
    """Writes made in the background (events, their series) one at a time, each under the write
    fence of the code that queued it: a leader's write queued before it lost its lease is not
    sent after."""

    def __init__(
        self, name: str, write: Callable[[T], Awaitable[None]], failed: Callable[[T, BaseException], None]
    ) -> None:
        """``write`` does one item; ``failed`` hears of an item a request error stopped."""
        self.name = name
        self._write = write
        self._failed = failed
        self._queue: asyncio.Queue[tuple[T, WriteFence | None]] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._unwritten = 0

    @property
    def pending(self) -> int:
        """Items queued and not written yet (being written included)."""
        return self._unwritten

    @property
    def started(self) -> bool:
        """Whether its worker runs."""
        return self._worker is not None

    def put(self, item: T) -> None:
        """Queue ``item`` under the current write fence; never blocks."""
        self._queue.put_nowait((item, current_write_fence.get()))
        self._unwritten += 1
        if self._worker is None:
            self._worker = asyncio.create_task(self._work(), name=self.name)

    async def flush(self) -> None:
        """Wait until every item queued so far has been written (or failed to be)."""
        await self._queue.join()

    async def stop(self, timeout: float) -> bool:
        """Write what is queued (up to ``timeout`` seconds), then end the task; whether all was."""
        if self._worker is None:
            return True
        try:
            await asyncio.wait_for(self._queue.join(), timeout)
            done = True
        except TimeoutError:
            done = False
        worker, self._worker = self._worker, None
        await cancel_and_wait([worker])
        return done

    async def _work(self) -> None:
        while True:
            item, fence = await self._queue.get()
            token = current_write_fence.set(fence)
            try:
                await self._write(item)
            except REQUEST_ERRORS as exc:
                self._failed(item, exc)
            finally:
                current_write_fence.reset(token)
                self._unwritten -= 1
                self._queue.task_done()
