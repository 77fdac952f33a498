"""Log output of the ``kubeloop`` command: text for people, JSON lines for log pipelines.

Every record carries the reconcile ID of the reconcile it was logged in (``reconcileID``), so a
reconciler's own ``logging`` calls can be told apart per reconcile, as controller-runtime binds
it into the logger.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "reconcileID",
}


class ReconcileContext(logging.Filter):
    """Adds ``reconcileID`` (empty outside a reconcile) to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        # Looked up, not imported: ``kubeloop apiserver`` logs too and should not load controllers.
        controller = sys.modules.get("kubeloop.controller.controller")
        record.reconcileID = controller.reconcile_id.get() if controller is not None else ""
        return True


class JSONFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, reconcileID, extra fields, error."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if getattr(record, "reconcileID", ""):
            entry["reconcileID"] = record.reconcileID  # type: ignore[attr-defined]
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


def configure(*, verbose: bool, json_format: bool, stream: TextIO | None = None) -> logging.Handler:
    """Install the root handler: debug with ``verbose``, JSON lines with ``json_format``."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(ReconcileContext())
    if json_format:
        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    return handler
