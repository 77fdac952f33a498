"""Whether the cyclic GC is on, as tests of the counted pause (:mod:`kubeloop.gcpause`) read it.

The pause is process-wide, and other threads of a test process hold pauses of their own at any
moment (an in-process server's controllers list their caches with the GC paused). So "the GC is
on again" is waited for, never read once: a pause that leaked never ends, and the wait fails.
"""

from __future__ import annotations

import asyncio
import gc

from kubeloop.testing import eventually


async def gc_back_on() -> None:
    await eventually(gc.isenabled)


def wait_gc_back_on() -> None:
    """:func:`gc_back_on` from a test that runs no event loop."""
    asyncio.run(gc_back_on())
