"""The embedded server under strace: which of its answers went out before their write was synced.

``python -m tests.syscall_trace --ensure`` installs Debian's strace when it is missing (``make
test`` runs it, as it does for kubectl). :func:`acknowledged_before_sync` reads a trace of
``kubeloop apiserver --insecure-http`` taken with :data:`STRACE_ARGS` and returns the names of
created objects whose ``201 Created`` answer was sent before an ``fdatasync``/``fsync`` of the
SQLite WAL that followed the WAL write holding the object.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from tests.debian_packages import ensure_package

STRACE_ARGS = [
    "-f",
    "-s",
    "65536",
    "-e",
    "trace=openat,pwrite64,write,fdatasync,fsync,sendto,sendmsg,writev",
]

#: A slow disk: every fsync and fdatasync of the traced process waits 20 ms first.
SLOW_FSYNC = [
    "-f",
    # Only the traced calls stop the process (a seccomp filter): the front-end processes of
    # --workers, which make none, run at full speed.
    "--seccomp-bpf",
    "-qq",
    "-o",
    "/dev/null",
    "-e",
    "trace=fdatasync,fsync",
    "-e",
    "inject=fdatasync,fsync:delay_enter=20000",
]

_LINE = re.compile(r"^(\d+)\s+(.*)$")
_OPENAT = re.compile(r'openat\(AT_FDCWD, "([^"]+)".*\)\s+=\s+(\d+)$')
_CALL = re.compile(r"^(\w+)\((\d+)")
_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>.*=\s+(-?\d+)")


def strace() -> str:
    """The strace binary; its absence is an error (``make test`` installs it), never a skip."""
    found = shutil.which("strace")
    if found is None:
        raise RuntimeError("strace is missing: `python -m tests.syscall_trace --ensure` (make test) installs it")
    return found


@dataclass(frozen=True)
class Event:
    """What the trace says happened to the WAL and on the wire, in the order it happened."""

    kind: str  # "wal-write", "wal-synced" (a sync of the WAL completed) or "answer"
    line: int
    text: str = ""


def events(trace: str) -> Iterator[Event]:
    """The WAL writes, completed WAL syncs and HTTP answers of a trace taken with STRACE_ARGS
    (a sync split by another thread's lines counts when it resumes)."""
    paths: dict[int, str] = {}
    pending_sync: dict[int, int] = {}  # pid → fd of an unfinished sync

    def wal(fd: int) -> bool:
        return paths.get(fd, "").endswith("-wal")

    for number, raw in enumerate(trace.splitlines()):
        match = _LINE.match(raw)
        if match is None:
            continue
        pid, text = int(match.group(1)), match.group(2)
        opened = _OPENAT.search(text)
        if opened is not None:
            paths[int(opened.group(2))] = opened.group(1)
            continue
        resumed = _RESUMED.match(text)
        if resumed is not None:
            completed = resumed.group(1) in ("fdatasync", "fsync") and resumed.group(2) == "0"
            if completed and wal(pending_sync.pop(pid, -1)):
                yield Event("wal-synced", number)
            continue
        call = _CALL.match(text)
        if call is None:
            continue
        name, fd = call.group(1), int(call.group(2))
        if name in ("fdatasync", "fsync"):
            if "<unfinished" in text:
                pending_sync[pid] = fd
            elif text.rstrip().endswith("= 0") and wal(fd):
                yield Event("wal-synced", number)
        elif name == "pwrite64" and wal(fd):
            yield Event("wal-write", number, text)
        elif name in ("sendto", "write", "writev", "sendmsg") and "HTTP/1.1 " in text:
            yield Event("answer", number, text)


def acknowledged_before_sync(trace: str, names: list[str]) -> list[str]:
    """Names whose 201 went out with no WAL sync between their WAL write and the answer."""
    written: dict[str, int] = {}  # name → line of its first WAL write
    synced: list[int] = []  # lines where a WAL sync completed
    answered: dict[str, int] = {}  # name → line its 201 was sent on
    for event in events(trace):
        if event.kind == "wal-synced":
            synced.append(event.line)
        elif event.kind == "wal-write":
            for wanted in names:
                if wanted not in written and f'"{wanted}"' in _unescape(event.text):
                    written[wanted] = event.line
        elif "HTTP/1.1 201 Created" in event.text:
            for wanted in names:
                if wanted not in answered and f'\\"name\\":\\"{wanted}\\"' in event.text:
                    answered[wanted] = event.line
    unsynced = []
    for wanted in names:
        write, answer = written.get(wanted), answered.get(wanted)
        if write is None or answer is None:
            raise AssertionError(f"{wanted}: no WAL write ({write}) or no answer ({answer}) in the trace")
        if not any(write < line < answer for line in synced):
            unsynced.append(wanted)
    return unsynced


def answers_before_sync(trace: str) -> list[int]:
    """For a server answering one request at a time: the positions (0-based, after the first
    answer, which only fences off start-up) of the 2xx answers that went out with no WAL write
    followed by a completed WAL sync since the answer before them."""
    wrote = synced = False
    answers: list[bool] = []
    for event in events(trace):
        if event.kind == "wal-write":
            wrote, synced = True, False  # a later write needs a sync of its own
        elif event.kind == "wal-synced":
            synced = synced or wrote
        elif "HTTP/1.1 20" in event.text:
            answers.append(wrote and synced)
            wrote = synced = False
    return [position for position, ok in enumerate(answers[1:]) if not ok]


def _unescape(text: str) -> str:
    """strace prints data as C string escapes; JSON quotes appear as \\" in it."""
    return text.replace('\\"', '"')


def ensure() -> int:
    return ensure_package("strace", lambda: shutil.which("strace") is not None, "no strace on this machine")


if __name__ == "__main__":
    if "--ensure" in sys.argv:
        sys.exit(ensure())
