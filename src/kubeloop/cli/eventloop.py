"""The event loop the commands run on: uvloop's where it is installed (a dependency on Linux and
macOS), whose transports are C — TLS above all, which asyncio's own does in Python — and
asyncio's otherwise, or when ``KUBELOOP_EVENT_LOOP=asyncio`` asks for it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

#: The environment variable that names the loop: ``uvloop`` (the default where installed) or ``asyncio``.
EVENT_LOOP_VARIABLE = "KUBELOOP_EVENT_LOOP"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """How the commands make their loop: uvloop's unless it is missing or asyncio's is asked for."""
    if os.environ.get(EVENT_LOOP_VARIABLE, "").strip().lower() != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the loop :func:`loop_factory` makes."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
