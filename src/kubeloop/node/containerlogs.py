"""A container's log: each run's output written a line at a time in the CRI's format, kept under
``MAX_LOG_BYTES``, and the end of a failed run's log as its termination message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pathlib
from datetime import UTC, datetime

from kubeloop.api.object import Obj
from kubeloop.node.execsessions import read, tell
from kubeloop.node.podvolumes import (
    DEFAULT_TERMINATION_MESSAGE_PATH,
    CannotMount,
    inside,
)

log = logging.getLogger("kubeloop.node.processes")


#: A line longer than this is logged in parts.
PARTIAL_BYTES = 16 * 1024

#: A container's log starts again past this size.
MAX_LOG_BYTES = 10 * 1024 * 1024

#: What ``FallbackToLogsOnError`` takes from the end of a failed run's log.
MESSAGE_LINES, MESSAGE_BYTES = 80, 2048

#: A termination message is cut to this size (upstream's).
MAX_TERMINATION_MESSAGE_BYTES = 4096


def runs_logged(folder: pathlib.Path) -> list[int]:
    """The numbers of the runs whose logs are in a container's folder, in order."""
    return sorted(int(path.stem) for path in folder.glob("*.log") if path.stem.isdigit())


def termination_message(root: pathlib.Path, container: Obj) -> str:
    """What the process wrote at its ``terminationMessagePath`` (at most 4 KiB, as upstream)."""
    path = str(container.get("terminationMessagePath") or DEFAULT_TERMINATION_MESSAGE_PATH)
    with contextlib.suppress(OSError, CannotMount), inside(root, path).open("rb") as written:
        return written.read(MAX_TERMINATION_MESSAGE_BYTES).decode(errors="replace")
    return ""


def tail_message(log_file: pathlib.Path) -> str:
    """The end of a run's log as its termination message: its last lines, at most 2 KiB (read
    from the file's end: a log may be megabytes)."""
    with contextlib.suppress(OSError), log_file.open("rb") as log:
        log.seek(0, os.SEEK_END)
        log.seek(max(0, log.tell() - 64 * 1024))
        records = log.read().decode(errors="replace").splitlines()
        lines = [record.partition(" F ")[2] for record in records if " F " in record]
        return "\n".join(lines[-MESSAGE_LINES:])[-MESSAGE_BYTES:]
    return ""


class LogWriter:
    """Writes a run's output into its log, a line at a time with its time and stream, and gives
    it, as it comes, to whoever is attached (``listeners``)."""

    def __init__(self, path: pathlib.Path, listeners: set[asyncio.Queue[tuple[str, bytes]]]) -> None:
        self.path = path
        self.listeners = listeners
        path.touch()

    async def copy(self, stream: asyncio.StreamReader, name: str) -> None:
        """Copy ``stream`` until it ends: whole lines tagged F, a line longer than 16 KiB in
        parts tagged P (the CRI's partial lines), a last line without a newline as it is."""
        pending = b""
        while chunk := await read(stream):
            for listener in self.listeners:
                tell(listener, (name, chunk))
            pending += chunk
            *lines, pending = pending.split(b"\n")
            records = [(line, "F") for line in lines]
            if len(pending) > PARTIAL_BYTES:
                records.append((pending, "P"))
                pending = b""
            self._write(name, records)
        if pending:
            self._write(name, [(pending, "F")])

    def _write(self, name: str, records: list[tuple[bytes, str]]) -> None:
        if not records:
            return
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        data = b"".join(f"{stamp} {name} {tag} ".encode() + line + b"\n" for line, tag in records)
        with self.path.open("ab") as out:
            if out.tell() + len(data) > MAX_LOG_BYTES:
                out.truncate(0)  # past the cap the log starts again
                out.seek(0)
            out.write(data)
