"""Owning background tasks: whoever starts a task cancels it and waits for it to end."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any


async def start_or_stop(start: Callable[[], Awaitable[None]], stop: Callable[[], Awaitable[None]]) -> None:
    """``await start()``; if it fails (or is cancelled), ``await stop()`` before the error goes on,
    so that what was half started is not left running (``async with`` for servers and managers)."""
    try:
        await start()
    except BaseException:
        await stop()
        raise


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Cancel ``tasks`` and wait until every one has ended.

    A task's own cancellation is absorbed; an exception a task ended with is raised once all
    have ended. If the caller is cancelled while waiting, that cancellation propagates (the
    tasks have been told to stop either way).
    """
    pending = list(tasks)
    for task in pending:
        task.cancel()
    if not pending:
        return
    await asyncio.wait(pending)
    for task in pending:
        if not task.cancelled() and (failure := task.exception()) is not None:
            raise failure
