"""The agent memory server: an agent's long-term memory (``memory.persistent: true``), one
SQLite database on the agent's PersistentVolumeClaim, searched with FTS5 and ranked by bm25.

``python -m agentruntime.memoryserver`` serves on ``PORT`` (8080) of ``POD_IP`` (else every
address), its database in ``DATA_DIR`` (``/data``, the claim). The HTTP API, JSON in and out:

- ``POST /v1/memories`` ``{"text", "source"?}`` → 201 ``{"id", "text", "source", "createdAt"}``
- ``GET /v1/memories/search?q=&limit=`` → ``{"items": [...]}``, best match first (each with its
  ``rank``); the query is words, matched as a prefix each, any of them
- ``GET /v1/memories?limit=&before=`` → ``{"items": [...]}``, newest first; ``before`` an id
- ``DELETE /v1/memories/{id}`` → 200 the entry, 404 when there is none
- ``GET /healthz`` → 200 once the database is open (the Deployment's probes)

Bad input is a 400 naming the field. A write is committed (WAL, synchronous=FULL) before it is
answered; the database is opened once, its work done on one thread beside the serving loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import pathlib
import re
import sqlite3
import time
from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import web

import kubeloop

DEFAULT_PORT = 8080
DEFAULT_DATA_DIR = "/data"
MAX_TEXT_BYTES = 64 * 1024
MAX_LIMIT = 100
_WORD = re.compile(r"\w+")
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    text TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(text, content='memories', content_rowid='id');
CREATE TRIGGER IF NOT EXISTS memories_added AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER IF NOT EXISTS memories_removed AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
"""


class MemoryStore:
    """The database: every call on the one thread that owns the connection."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="memory-db")
        self._db: sqlite3.Connection | None = None

    async def open(self) -> None:
        await self._run(self._open)

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.executescript(_SCHEMA)
        db.row_factory = sqlite3.Row
        self._db = db

    async def close(self) -> None:
        if self._db is not None:
            await self._run(self._db.close)
        self._thread.shutdown(wait=True)

    async def _run(self, work: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, work)

    @property
    def db(self) -> sqlite3.Connection:
        assert self._db is not None, "the store is not open"
        return self._db

    async def add(self, text: str, source: str) -> dict[str, Any]:
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

        def insert() -> dict[str, Any]:
            with self.db:
                cursor = self.db.execute(
                    "INSERT INTO memories (text, source, created_at) VALUES (?, ?, ?)", (text, source, created)
                )
            return {"id": cursor.lastrowid, "text": text, "source": source, "createdAt": created}

        return await self._run(insert)

    async def search(self, query: str, limit: int) -> list[dict[str, Any]]:
        words = _WORD.findall(query)
        match = " OR ".join(f'"{word}"*' for word in words)

        def select() -> list[dict[str, Any]]:
            rows = self.db.execute(
                "SELECT m.id, m.text, m.source, m.created_at, bm25(memories_fts) AS rank"
                " FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid"
                " WHERE memories_fts MATCH ? ORDER BY rank, m.id DESC LIMIT ?",
                (match, limit),
            ).fetchall()
            return [{**_entry(row), "rank": round(-float(row["rank"]), 6)} for row in rows]

        return await self._run(select)

    async def newest(self, limit: int, before: int | None) -> list[dict[str, Any]]:
        def select() -> list[dict[str, Any]]:
            rows = self.db.execute(
                "SELECT id, text, source, created_at FROM memories WHERE id < ? ORDER BY id DESC LIMIT ?",
                (before if before is not None else 2**62, limit),
            ).fetchall()
            return [_entry(row) for row in rows]

        return await self._run(select)

    async def remove(self, entry_id: int) -> dict[str, Any] | None:
        def delete() -> dict[str, Any] | None:
            with self.db:
                row = self.db.execute(
                    "SELECT id, text, source, created_at FROM memories WHERE id = ?", (entry_id,)
                ).fetchone()
                if row is None:
                    return None
                self.db.execute("DELETE FROM memories WHERE id = ?", (entry_id,))
            return _entry(row)

        return await self._run(delete)


def _entry(row: sqlite3.Row) -> dict[str, Any]:
    return {"id": row["id"], "text": row["text"], "source": row["source"], "createdAt": row["created_at"]}


def _bad(message: str) -> web.HTTPBadRequest:
    return web.HTTPBadRequest(text=json.dumps({"error": message}), content_type="application/json")


def _limit(request: web.Request, default: int) -> int:
    value = request.query.get("limit", str(default))
    if not value.isdigit() or not 1 <= int(value) <= MAX_LIMIT:
        raise _bad(f"limit: a whole number from 1 to {MAX_LIMIT}")
    return int(value)


def application(store: MemoryStore) -> web.Application:
    """The server's routes over ``store`` (opened and closed with the application)."""
    app = web.Application(client_max_size=MAX_TEXT_BYTES * 2)

    async def add(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            raise _bad("the body is not JSON") from None
        if not isinstance(body, dict):
            raise _bad("the body is not a JSON object")
        text, source = body.get("text"), body.get("source", "")
        if not isinstance(text, str) or not text.strip():
            raise _bad("text: a non-empty string is required")
        if len(text.encode()) > MAX_TEXT_BYTES:
            raise _bad(f"text: at most {MAX_TEXT_BYTES} bytes")
        if not isinstance(source, str) or len(source) > 253:
            raise _bad("source: a string of at most 253 characters")
        return web.json_response(await store.add(text.strip(), source), status=201)

    async def search(request: web.Request) -> web.Response:
        query = request.query.get("q", "")
        if not _WORD.search(query):
            raise _bad("q: words to search for are required")
        return web.json_response({"items": await store.search(query, _limit(request, 5))})

    async def newest(request: web.Request) -> web.Response:
        before = request.query.get("before")
        if before is not None and not before.isdigit():
            raise _bad("before: an entry's id")
        items = await store.newest(_limit(request, 20), int(before) if before else None)
        return web.json_response({"items": items})

    async def remove(request: web.Request) -> web.Response:
        entry = request.match_info["id"]
        if not entry.isdigit():
            raise _bad("id: an entry's id")
        removed = await store.remove(int(entry))
        if removed is None:
            raise web.HTTPNotFound(text=json.dumps({"error": f"no entry {entry}"}), content_type="application/json")
        return web.json_response(removed)

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def lifecycle(app: web.Application) -> Any:
        await store.open()
        yield
        await store.close()

    app.router.add_post("/v1/memories", add)
    app.router.add_get("/v1/memories/search", search)
    app.router.add_get("/v1/memories", newest)
    app.router.add_delete("/v1/memories/{id}", remove)
    app.router.add_get("/healthz", healthz)
    app.cleanup_ctx.append(lifecycle)
    return app


def main() -> int:
    """Serve until SIGTERM (the pod's end)."""
    data = pathlib.Path(kubeloop.container_path(os.environ.get("DATA_DIR", DEFAULT_DATA_DIR)))
    port = int(os.environ.get("PORT", DEFAULT_PORT))
    # The pod's own address where it has one (the downward API's status.podIP): on kubeloop's
    # process node every pod shares the machine's ports.
    host = os.environ.get("BIND_ADDRESS") or os.environ.get("POD_IP") or "0.0.0.0"
    web.run_app(application(MemoryStore(data / "memory.db")), host=host, port=port, print=None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
