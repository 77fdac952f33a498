"""The audit log backend: events appended as JSON lines to a file (or standard output), written by
a thread of its own so that a slow, stalled or full disk never holds a request.

Requests hand their events over without waiting (:meth:`AuditLogWriter.write`); the thread writes
whatever is waiting in one go and flushes. When more than ``max_pending`` events wait (the disk
has stalled), further ones are dropped and counted, as upstream's batching backend drops what
its buffer cannot hold; a write that fails (a full disk) loses its events, is logged, and
the next ones are tried again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pathlib
import queue
import sys
import threading
from typing import IO, Any

import orjson

log = logging.getLogger("kubeloop.apiserver.audit")

_STOP = object()


class AuditLogWriter:
    """Owns the log's file and its writing thread; ``start`` and ``stop`` are the server's."""

    def __init__(self, path: str | pathlib.Path, *, max_pending: int = 10_000) -> None:
        #: The log's path, or "-" for standard output.
        self.path = str(path)
        self._pending: queue.Queue[Any] = queue.Queue(maxsize=max_pending)
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._file: IO[bytes] | None = None
        #: Events dropped because the writer could not keep up.
        self.dropped = 0
        #: Events lost to failed writes.
        self.failed = 0

    def start(self) -> None:
        """Open the log (created 0600, appended to); OSError when it cannot be."""
        if self.path == "-":
            self._file = sys.stdout.buffer
        else:
            descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._file = os.fdopen(descriptor, "ab")
        self._thread = threading.Thread(target=self._run, name="kubeloop-audit-log", daemon=True)
        self._thread.start()

    def write(self, event: dict[str, Any]) -> None:
        """Queue one event; never waits."""
        line = orjson.dumps(event) + b"\n"
        try:
            self._pending.put_nowait(line)
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.error("audit log %s is not keeping up: %d events dropped", self.path, self.dropped)

    async def stop(self, patience: float = 5.0) -> None:
        """Write what is queued, then close the log. A log that takes more than ``patience``
        seconds (a stalled disk) is left to its thread, and what it holds is reported lost."""
        thread = self._thread
        if thread is None:
            return
        self._thread = None
        self._stopping.set()
        with contextlib.suppress(queue.Full):
            self._pending.put_nowait(_STOP)
        await asyncio.to_thread(thread.join, patience)
        if thread.is_alive():
            log.error(
                "audit log %s did not take its last %d events in %.0f s: given up",
                self.path,
                self._pending.qsize(),
                patience,
            )
            return
        if self._file is not None and self._file is not sys.stdout.buffer:
            self._file.close()
        self._file = None

    def _run(self) -> None:
        assert self._file is not None
        stopping = False
        while not stopping:
            if self._stopping.is_set() and self._pending.empty():
                break
            lines = [self._pending.get()]
            while True:
                try:
                    lines.append(self._pending.get_nowait())
                except queue.Empty:
                    break
            if _STOP in lines:
                stopping = True
                lines = [line for line in lines if line is not _STOP]
            if not lines:
                continue
            try:
                self._file.write(b"".join(lines))
                self._file.flush()
            except (OSError, ValueError) as error:
                self.failed += len(lines)
                log.error("writing %d events to audit log %s failed: %s", len(lines), self.path, error)
