"""``eventually``: wait in a test until a check passes (Gomega's ``Eventually``).

An operator acts asynchronously: after a test creates an object, what the reconciler makes of it
appears some time later. ``eventually`` calls the check until it passes and hands back what it
returned; when the time is up it raises the check's last error.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")


@overload
async def eventually(check: Callable[[], Awaitable[T]], *, timeout: float = 10.0, interval: float = 0.02) -> T: ...


@overload
async def eventually(check: Callable[[], T], *, timeout: float = 10.0, interval: float = 0.02) -> T: ...


async def eventually(check: Callable[[], Any], *, timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Call ``check()`` (awaiting it if it is async) until it passes; return what it returned.

    The rule: **a check passes when it returns without raising a value that is truthy or None.**
    None is what a check that asserts returns once its asserts hold (``def``, ``async def``, or a
    lambda calling one); a falsy value is a condition not met yet: ``False``, ``0``, ``""``, an
    empty list. So ``eventually(lambda: len(seen) == 2)`` and ``eventually(lambda: len(queue))``
    wait until there is something, and to wait for a call to merely succeed whatever it returns,
    return True after it (``async def listed(): await client.list(...); return True``). What a
    check raises is retried: any ``Exception`` (``AssertionError`` among them) and pytest's
    failures (``pytest.fail``, a ``pytest.raises`` block that raised nothing), which are not
    ``Exception`` s.

    ``timeout`` (seconds, default 10) bounds the whole wait, ``interval`` the pause between tries.
    When the time is up, the check's last exception is raised (an ``AssertionError`` naming the
    value if it returned a falsy one).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    retried = _retried_exceptions()
    while True:
        try:
            value = check()
            if inspect.isawaitable(value):
                value = await value
        except retried:
            if loop.time() >= deadline:
                raise
        else:
            if value is None or value:
                return value
            if loop.time() >= deadline:
                raise AssertionError(f"still {value!r} after {timeout} s: {check}")
        await asyncio.sleep(interval)


def _retried_exceptions() -> tuple[type[BaseException], ...]:
    """``Exception``, and pytest's ``Failed`` when pytest is loaded (an ``OutcomeException``,
    which derives from ``BaseException`` so that ``except Exception`` does not swallow it)."""
    outcomes = sys.modules.get("_pytest.outcomes")
    failed = getattr(outcomes, "Failed", None)
    return (Exception, failed) if isinstance(failed, type) else (Exception,)
