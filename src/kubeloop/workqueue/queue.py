"""The deduplicating work queue (client-go's ``Type``).

Three sets of state decide what happens to a key: ``queue`` (waiting, in order), ``dirty``
(needs processing: waiting, or added again while being processed) and ``processing`` (handed to
a worker, not yet ``done``). Adding a key that is dirty does nothing; adding a key that is being
processed marks it dirty and it is queued again when the worker calls ``done`` — so a key is
never processed by two workers at once, and an add is never lost.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T", bound=Hashable)


class ShutDown(Exception):
    """The queue was shut down and holds nothing more to hand out."""


class WorkQueue(Generic[T]):
    __slots__ = ("_dirty", "_drained", "_processing", "_queue", "_shutting_down", "_waiters")

    def __init__(self) -> None:
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        self._drained: asyncio.Event | None = None

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def add(self, item: T) -> None:
        """Queue ``item`` unless it is already waiting; after ``done`` if it is being processed."""
        dirty = self._dirty
        if item in dirty or self._shutting_down:
            return
        dirty.add(item)
        if item in self._processing:
            return
        self._queue.append(item)
        self._wake_one()

    def get_nowait(self) -> T:
        """The next key, now; ``asyncio.QueueEmpty`` when none waits, ``ShutDown`` after shutdown."""
        if not self._queue:
            if self._shutting_down:
                raise ShutDown
            raise asyncio.QueueEmpty
        item = self._queue.popleft()
        self._processing.add(item)
        self._dirty.discard(item)
        return item

    async def get(self) -> T:
        """The next key, waiting for one; raises ``ShutDown`` once shut down and empty."""
        while not self._queue:
            if self._shutting_down:
                raise ShutDown
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # pass the wake-up on to another getter
                raise
        return self.get_nowait()

    def done(self, item: T) -> None:
        """The worker finished ``item``; it is queued again if it was added meanwhile."""
        self._processing.discard(item)
        if item in self._dirty:
            self._queue.append(item)
            self._wake_one()
        elif not self._processing and self._drained is not None:
            self._drained.set()

    def shut_down(self) -> None:
        """Accept no more keys; getters receive what is queued, then ``ShutDown``."""
        self._shutting_down = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    async def shut_down_with_drain(self) -> None:
        """Shut down, then wait until every key handed out is ``done``."""
        self.shut_down()
        if self._processing:
            self._drained = asyncio.Event()
            await self._drained.wait()

    def is_processing(self, item: T) -> bool:
        return item in self._processing

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
