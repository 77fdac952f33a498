"""A named-work loop for the server's own controllers: names queued from any thread, handled one
at a time by one owned task, and queued again after ``retry_interval`` until handling says done."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kubeloop import errors
from kubeloop.lifecycle import cancel_and_wait


class RetryLoop:
    """``work(name)`` returns True when nothing is left to do for ``name``; False, an API error or
    any other failure (logged) queues it again after ``retry_interval`` seconds."""

    def __init__(
        self,
        work: Callable[[str], Awaitable[bool]],
        *,
        what: str,
        log: logging.Logger,
        retry_interval: float = 0.5,
    ) -> None:
        self._work = work
        self._what = what
        self._log = log
        self._retry = retry_interval
        self._pending: asyncio.Queue[str] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def queue(self, name: str) -> None:
        """Queue ``name`` (callable from any thread; before ``start`` it waits for the start)."""
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if self._loop is not None and self._loop is not running:
            self._loop.call_soon_threadsafe(self._pending.put_nowait, name)
        else:
            self._pending.put_nowait(name)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name=f"kubeloop-{self._what}")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None

    async def _run(self) -> None:
        while True:
            name = await self._pending.get()
            try:
                done = await self._work(name)
            except errors.APIError as error:
                self._log.warning("%s %s: %s", self._what, name, error.message)
                done = False
            except Exception:
                self._log.exception("%s %s: failed", self._what, name)
                done = False
            if not done:
                asyncio.get_running_loop().call_later(self._retry, self._pending.put_nowait, name)
