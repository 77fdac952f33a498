"""``eventually``: wait in a test until a check passes (Gomega's ``Eventually``).

An operator acts asynchronously: after a test creates an object, what the reconciler makes of it
appears some time later. ``eventually`` calls the check until it passes and hands back what it
returned; when the time is up it raises the check's last error.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    check: Callable[[], Awaitable[T] | T], *, timeout: float = 10.0, interval: float = 0.02
) -> T:
    """Call ``check()`` (awaiting it if it is async) until it passes; return what it returned.

    A check passes when it returns without raising, and does not return ``False`` (so a plain
    condition works too: ``eventually(lambda: len(seen) == 2)``). ``timeout`` (seconds, default
    10) bounds the whole wait, ``interval`` the pause between tries. When the time is up, the
    check's last exception is raised (an ``AssertionError`` if it returned False).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            value = check()
            if inspect.isawaitable(value):
                value = await value
        except Exception:
            if loop.time() >= deadline:
                raise
        else:
            if value is not False:
                return value
            if loop.time() >= deadline:
                raise AssertionError(f"still false after {timeout} s: {check}")
        await asyncio.sleep(interval)
