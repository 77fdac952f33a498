"""``kubeloop run --view``: a live view of any operator in the terminal — its controllers (with
their counters, queue depth, busy workers and median reconcile time over the latest
reconciles), its latest reconciles and the cluster's latest events — sized to the terminal: at
100×30 the controllers and the events still show (the reconciles and events share what rows are
left).

The view reads the manager's own counters and each controller's ring of recent reconciles
(``Controller.recent``), and lists Events (warnings first) every half second; it is written by a
thread of its own (``demo.ViewWriter``), so a terminal that stops reading holds up nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.cli.console import EVENT, controller_summary, ordered_events
from kubeloop.client.rest import APIClient
from kubeloop.controller.reconcilelog import ReconcileRecord
from kubeloop.manager.manager import Manager

#: Rows the header, the three titles, the column headers and the borders take.
_FIXED_ROWS = 10


def _age(stamp: Any, now: datetime) -> str:
    if not isinstance(stamp, str) or not stamp:
        return "-"
    try:
        then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return "-"
    seconds = max(0, int((now - then).total_seconds()))
    return f"{seconds}s" if seconds < 120 else f"{seconds // 60}m"


def render_operator_view(manager: Manager, events: list[Obj], *, header: str, height: int) -> Group:
    """The view of ``manager`` and ``events`` in ``height`` rows."""
    now = datetime.now(UTC)
    controllers = Table(title="Controllers", title_justify="left", expand=True, box=None, pad_edge=False)
    for column in ("controller", "reconciles", "errors", "requeues", "queue", "busy", "median", "last"):
        controllers.add_column(column, no_wrap=True)
    records: list[tuple[str, ReconcileRecord]] = []
    for name, controller in sorted(manager.controllers.items()):
        records.extend((name, record) for record in controller.recent)
        summary = controller_summary(name, controller)
        last = summary["last"]
        controllers.add_row(
            name,
            str(summary["reconciles"]),
            Text(str(summary["errors"]), style="red" if summary["errors"] else ""),
            str(summary["requeues"]),
            str(summary["queue"]),
            str(summary["busy"]),
            f"{summary['median_ms']:.0f}ms" if summary["median_ms"] is not None else "-",
            f"{last['result']} {last['took_ms']:.0f}ms" if last else "-",
        )
    left = max(2, height - _FIXED_ROWS - len(manager.controllers))
    reconcile_rows = max(1, left // 2)
    event_rows = max(1, left - reconcile_rows)

    reconciles = Table(title="Latest reconciles", title_justify="left", expand=True, box=None, pad_edge=False)
    for column in ("age", "controller", "object", "result", "took", "wrote"):
        reconciles.add_column(column, no_wrap=column != "wrote", overflow="ellipsis")
    latest = sorted(records, key=lambda item: item[1].finished, reverse=True)[:reconcile_rows]
    for name, record in latest:
        style = "red" if record.outcome == "error" else "green" if record.outcome == "ok" else "yellow"
        reconciles.add_row(
            f"{max(0, int((now - record.finished).total_seconds()))}s",
            name,
            str(record.request),
            Text(record.outcome, style=style),
            f"{record.took_ms:.0f}ms",
            ", ".join(record.writes) or "-",
        )

    table = Table(title="Warnings and events", title_justify="left", expand=True, box=None, pad_edge=False)
    for column in ("age", "type", "reason", "object", "message"):
        table.add_column(column, no_wrap=column != "message", overflow="ellipsis")

    ordered = ordered_events(events)
    for event in ordered[:event_rows]:
        involved = event.get("involvedObject") or {}
        kind = str(event.get("type") or "")
        table.add_row(
            _age(event.get("lastTimestamp") or event.get("eventTime"), now),
            Text(kind, style="red" if kind == "Warning" else ""),
            str(event.get("reason") or ""),
            f"{involved.get('kind')}/{involved.get('name')}",
            str(event.get("message") or ""),
        )
    return Group(
        Text(header, style="bold", overflow="ellipsis", no_wrap=True), controllers, reconciles, table
    )


class ViewWriter:
    """Hands the newest view to ``write`` in a daemon thread of its own.

    While ``write`` is blocked (a pipe nobody reads, a terminal paused with Ctrl-S), newer views
    replace the one waiting, and nothing else waits for it: not the event loop, and not the way
    out — the default executor's threads are joined when the loop shuts down, so a view written
    there would keep Ctrl-C from ever ending the demo. ``kubeloop demo`` leaves with ``os._exit``
    for the same reason (a daemon thread blocked in a write holds the stream's lock).
    """

    def __init__(self, write: Callable[[Any], object]) -> None:
        self._write = write
        self._changed = threading.Condition()
        self._latest: Any = None
        threading.Thread(target=self._run, name="demo view", daemon=True).start()

    def show(self, view: Any) -> None:
        with self._changed:
            self._latest = view
            self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._latest is not None)
                view, self._latest = self._latest, None
            self._write(view)


async def show_view(manager: Manager, client: APIClient, *, header: str, namespace: str | None) -> None:
    """Show the view until cancelled: redrawn twice a second on a terminal, a snapshot every
    10 s when the output is piped or logged."""
    console = Console()
    live = console.is_terminal
    with contextlib.ExitStack() as stack:
        if live:
            display = stack.enter_context(Live(console=console, refresh_per_second=4, screen=False))
            writer = ViewWriter(display.update)
        else:
            writer = ViewWriter(console.print)
        while True:
            try:
                events = (await client.list(EVENT, namespace=namespace)).items
            except errors.APIError:
                events = []  # the view shows what it can; the operator's log says why
            writer.show(render_operator_view(manager, events, header=header, height=console.size.height))
            await asyncio.sleep(0.5 if live else 10)
