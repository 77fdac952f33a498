"""Runnables: work a manager runs beside its controllers (controller-runtime's ``Runnable``).

A runnable is an async function taking a stop event: it runs until the event is set, then
returns. Runnables are grouped by when they start (``RunnableGroup``); a group's ``stop()`` sets
the event, gives them a grace period, then cancels and awaits what is left. A runnable that
raises is reported through ``on_error`` (the manager then stops, as upstream does).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from kubeloop.client.fence import WriteFence, current_write_fence
from kubeloop.lifecycle import cancel_and_wait

log = logging.getLogger("kubeloop.manager.runnable")

Runnable = Callable[[asyncio.Event], Awaitable[None]]


class RunnableGroup:
    """Runnables started and stopped together (controller-runtime's ``runnableGroup``): each runs
    in a task of its own until the group's stop event is set; a failure is reported to
    ``on_error``. Leader-only groups start each runnable once the lease is held."""

    def __init__(
        self, on_error: Callable[[str, BaseException], None], *, fence: WriteFence | None = None
    ) -> None:
        self._on_error = on_error
        #: Leader-only runnables start only while the lease is held, and their writes are fenced.
        self._fence = fence
        self._runnables: list[tuple[str, Runnable]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()
        self._started = False

    def __len__(self) -> int:
        return len(self._runnables)

    def add(self, name: str, runnable: Runnable) -> None:
        """Add ``runnable``; it starts at once when the group is already running."""
        self._runnables.append((name, runnable))
        if self._started:
            self._launch(name, runnable)

    def start(self) -> None:
        """Start every runnable (those added later start as they are added)."""
        if self._started:
            return
        self._started = True
        self._stop = asyncio.Event()
        for name, runnable in self._runnables:
            self._launch(name, runnable)

    async def stop(self, timeout: float) -> None:
        """Ask every runnable to return; cancel those still running after ``timeout`` seconds."""
        self._stop.set()
        tasks, self._tasks = self._tasks, []
        if tasks:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout)
        await cancel_and_wait(tasks)
        self._started = False

    def _launch(self, name: str, runnable: Runnable) -> None:
        self._tasks.append(asyncio.create_task(self._guard(name, runnable), name=f"runnable {name}"))

    async def _guard(self, name: str, runnable: Runnable) -> None:
        fence = self._fence
        current_write_fence.set(fence)
        if fence is not None and not await fence.wait_until_allowed():
            return
        try:
            await runnable(self._stop)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("runnable %s failed", name)
            self._on_error(name, exc)
