"""The storage writer: a process of its own that commits the server's log to SQLite.

The server (:class:`~kubeloop.apiserver.storage.log.SQLiteLog`) starts it with one end of a
socket pair and the log's lock; it reads requests, commits every append it has been sent since
its last commit as one transaction (a group commit: one fsync for all of them), and answers each
request in the order it came. As a thread of the server it queued for the GIL behind the serving
loop at every step of a commit; as a process it holds no lock the server needs.

Frames both ways are a 4-byte little-endian length and a pickle. Requests: ``("append", rows)``,
``("probe", size)``, ``("compact", revision)``, ``("pragma", name, value)``. Answers: for an
append, one entry per row (None, or ``(reason, message)`` of the StorageError that refused it);
for the others ``("ok", value)`` or ``("error", reason, message)``.

It ends when the server's end of the socket closes (the server stopped or died): it commits what
it has read whole, answers if it can, and exits; the log's lock, inherited from the server, is
released when both have gone, so a server started again waits for it before it reads the log.
"""

from __future__ import annotations

import argparse
import pathlib
import pickle
import select
import signal
import socket
import sqlite3
import struct
import sys
from collections.abc import Sequence
from typing import Any

from kubeloop.apiserver.storage import kine

_LENGTH = struct.Struct("<I")


def frame(message: object) -> bytes:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(payload)) + payload


class FrameReader:
    """Whole frames out of a byte stream."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        self._buffer += data
        messages: list[Any] = []
        start = 0
        buffer = self._buffer
        while len(buffer) - start >= 4:
            (length,) = _LENGTH.unpack_from(buffer, start)
            end = start + 4 + length
            if len(buffer) < end:
                break
            messages.append(pickle.loads(memoryview(buffer)[start + 4 : end]))
            start = end
        del buffer[:start]
        return messages


def _serve_call(conn: sqlite3.Connection, request: Sequence[Any]) -> tuple[Any, ...]:
    try:
        if request[0] == "probe":
            kine.probe(conn, int(request[1]))
            return ("ok", None)
        if request[0] == "compact":
            kine.compact(conn, int(request[1]))
            return ("ok", None)
        if request[0] == "pragma":
            return ("ok", kine.pragma(conn, request[1], request[2]))
        return ("error", "other", f"no such request: {request[0]!r}")
    except sqlite3.Error as exc:
        error = kine.StorageError.from_sqlite(exc)
        return ("error", error.reason, error.message)
    except Exception as exc:  # the caller hears of it; the writer lives on
        return ("error", "other", f"{type(exc).__name__}: {exc}")


def answer(conn: sqlite3.Connection, requests: list[Any]) -> list[bytes]:
    """The answers to requests in order; consecutive appends are committed together."""
    answers: list[bytes] = []
    appends: list[Sequence[kine.Row]] = []

    def commit_appends() -> None:
        if not appends:
            return
        rows = [row for append in appends for row in append]
        try:
            results = kine.commit(conn, rows)
        except Exception as exc:  # every waiting write hears of it
            error = kine.StorageError(f"{type(exc).__name__}: {exc}", reason="other")
            results = [error] * len(rows)
        offset = 0
        for append in appends:
            own = results[offset : offset + len(append)]
            offset += len(append)
            answers.append(frame([None if r is None else (r.reason, r.message) for r in own]))
        appends.clear()

    for request in requests:
        if request[0] == "append":
            appends.append(request[1])
            continue
        commit_appends()
        answers.append(frame(_serve_call(conn, request)))
    commit_appends()
    return answers


def serve(sock: socket.socket, conn: sqlite3.Connection) -> None:
    reader = FrameReader()
    ended = False
    while not ended:
        requests: list[Any] = []
        while not requests or select.select([sock], [], [], 0)[0]:
            data = sock.recv(1 << 20)
            if not data:
                ended = True
                break
            requests += reader.feed(data)
        if not requests:
            return
        replies = answer(conn, requests)
        try:
            sock.sendall(b"".join(replies))
        except OSError:
            return  # the server has gone: what was committed stays, nobody waits for answers


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kubeloop.apiserver.storage.writer")
    parser.add_argument("database", type=pathlib.Path)
    parser.add_argument(
        "--fd", type=int, required=True, help="this process's end of the server's socket pair"
    )
    parser.add_argument("--no-fsync", action="store_true", help="synchronous=NORMAL: no fsync per commit")
    parser.add_argument("--busy-timeout", type=float, default=2.0)
    options = parser.parse_args(argv)
    # Its life is the server's: a Ctrl-C or a SIGTERM sent to the process group is the server's to
    # handle (it stops, and closes this process's socket once its writes are answered).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sock = socket.socket(fileno=options.fd)
    conn = kine.connect(options.database, durable=not options.no_fsync, busy_timeout=options.busy_timeout)
    try:
        serve(sock, conn)
    finally:
        conn.close()
        sock.close()


if __name__ == "__main__":
    main(sys.argv[1:])
