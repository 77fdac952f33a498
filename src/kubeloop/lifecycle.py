"""Owning background tasks: whoever starts a task cancels it and waits for it to end."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable


async def cancel_and_wait(tasks: Iterable[asyncio.Task[None]]) -> None:
    """Cancel ``tasks`` and wait until each has ended (its CancelledError is absorbed)."""
    pending = list(tasks)
    for task in pending:
        task.cancel()
    for task in pending:
        with contextlib.suppress(asyncio.CancelledError):
            await task
