"""Debugging endpoints for a running operator, Python's answer to controller-runtime's
``PprofBindAddress``: served on the metrics server (``MetricsServerOptions(extra_handlers=
debug_handlers())``, or ``kubeloop run --debug-endpoints``), so behind the same authentication and
authorization as ``/metrics`` when it is secure (bind a ClusterRole allowing ``get`` on the
``nonResourceURLs`` ``/debug/*`` to who may look).

- ``GET /debug/tasks``: every asyncio task of the manager's loop, its name and where it waits
  (its stack), as text;
- ``GET /debug/threads``: every thread, its name and stack (the loop's own, a sync reconciler's);
- ``GET /debug/tracemalloc``: where memory was allocated, the 25 biggest places by line;
  ``?start=N`` starts tracing (N frames, 1 by default: tracing costs time and memory, so it is
  off until asked), ``?diff`` shows what changed since the previous snapshot this endpoint took,
  ``?stop`` stops tracing and forgets the snapshot.
"""

from __future__ import annotations

import asyncio
import io
import sys
import threading
import traceback
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web

Handler = Callable[["web.Request"], Awaitable["web.Response"]]
#: How many places a tracemalloc answer lists.
TOP = 25


def task_dump() -> str:
    """Every task of the running loop, with its stack."""
    out = io.StringIO()
    tasks = sorted(asyncio.all_tasks(), key=lambda task: task.get_name())
    out.write(f"{len(tasks)} tasks\n")
    for task in tasks:
        out.write(f"\n--- task {task.get_name()} ({'done' if task.done() else 'pending'})\n")
        task.print_stack(limit=20, file=out)
    return out.getvalue()


def thread_dump() -> str:
    """Every thread of the process, with its stack."""
    out = io.StringIO()
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    frames = sys._current_frames()
    out.write(f"{len(frames)} threads\n")
    for ident, frame in sorted(frames.items()):
        out.write(f"\n--- thread {names.get(ident, '?')} ({ident})\n")
        out.write("".join(traceback.format_stack(frame, limit=30)))
    return out.getvalue()


class _Tracemalloc:
    """The tracemalloc endpoint's state: the snapshot a ``?diff`` compares with."""

    def __init__(self) -> None:
        self.previous: tracemalloc.Snapshot | None = None

    def answer(self, query: dict[str, str]) -> str:
        if "stop" in query:
            tracemalloc.stop()
            self.previous = None
            return "tracemalloc stopped\n"
        if "start" in query:
            frames = int(query["start"] or 1)
            if not tracemalloc.is_tracing():
                tracemalloc.start(max(1, min(frames, 50)))
            self.previous = None
            return f"tracemalloc started ({tracemalloc.get_traceback_limit()} frames)\n"
        if not tracemalloc.is_tracing():
            return "tracemalloc is not tracing: ask with ?start first\n"
        snapshot = tracemalloc.take_snapshot().filter_traces(
            (tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap>"))
        )
        if "diff" in query and self.previous is not None:
            lines = [str(stat) for stat in snapshot.compare_to(self.previous, "lineno")[:TOP]]
            heading = f"the {TOP} biggest changes since the previous snapshot"
        else:
            lines = [str(stat) for stat in snapshot.statistics("lineno")[:TOP]]
            heading = f"the {TOP} biggest places"
        self.previous = snapshot
        current, peak = tracemalloc.get_traced_memory()
        return f"traced: {current} bytes now, {peak} at the peak; {heading}:\n" + "\n".join(lines) + "\n"


def debug_handlers() -> dict[str, Handler]:
    """The debugging endpoints, by path, for ``MetricsServerOptions(extra_handlers=...)``."""
    from aiohttp import web

    traced = _Tracemalloc()

    async def tasks(request: web.Request) -> web.Response:
        return web.Response(text=task_dump())

    async def threads(request: web.Request) -> web.Response:
        return web.Response(text=thread_dump())

    async def allocations(request: web.Request) -> web.Response:
        try:
            text = await asyncio.to_thread(traced.answer, dict(request.query))
        except ValueError as exc:  # ?start=x
            return web.Response(status=400, text=f"start: {exc}\n")
        return web.Response(text=text)

    return {"/debug/tasks": tasks, "/debug/threads": threads, "/debug/tracemalloc": allocations}
