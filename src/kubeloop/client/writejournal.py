"""What a reconcile wrote, for its log line (``Deployment/blog updated``): the controller opens
a journal for each reconcile (a context variable, so writes from the reconciler's thread and
tasks land in it too) and the API client notes each write it sends there.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

_journal: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("kubeloop_write_journal", default=None)

_DONE = {"POST": "created", "PUT": "updated", "PATCH": "patched", "DELETE": "deleted"}


@contextmanager
def journal() -> Iterator[list[str]]:
    """A journal of the writes made inside the block: ``["Deployment/blog updated", ...]``."""
    writes: list[str] = []
    token = _journal.set(writes)
    try:
        yield writes
    finally:
        _journal.reset(token)


def note_write(method: str, path: str, answer: Mapping[str, Any]) -> None:
    """Note a write the server accepted (nothing outside a journal, or for a GET)."""
    writes = _journal.get()
    done = _DONE.get(method)
    if writes is None or done is None:
        return
    kind = str(answer.get("kind") or "")
    metadata = answer.get("metadata")
    name = str(metadata.get("name") or "") if isinstance(metadata, Mapping) else ""
    if kind == "Status" or not name:  # a delete answered with Success: the path names it
        parts = path.rstrip("/").split("/")
        kind, name = parts[-2], parts[-1]
    subresource = path.rsplit("/", 1)[-1] if path.endswith(("/status", "/scale")) else ""
    what = f"{kind}/{name}" + (f" {subresource}" if subresource else "")
    writes.append(f"{what} {done}")
