"""Log output of the ``kubeloop`` command: text for people, JSON lines for log pipelines.

Every record carries the reconcile ID of the reconcile it was logged in (``reconcileID``), so a
reconciler's own ``logging`` calls can be told apart per reconcile, as controller-runtime binds
it into the logger; records of ``kubeloop.logger()`` also carry the controller and the object.

How much is said: by default what happens to the operator and what fails; ``-v`` adds one line
per reconcile (``kubeloop.reconcile``); ``-vv`` is debug, everything's, the libraries'
connection chatter and every retry's traceback included.
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


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message``, then ``[controller namespace/name]`` for the records of a
    reconcile's logger (``kubeloop.logger``)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        controller = getattr(record, "controller", None)
        if controller is None:
            return text
        head, newline, rest = text.partition("\n")
        return f"{head} [{controller} {getattr(record, 'object', '')}]{newline}{rest}"


#: Libraries whose debug lines are connection chatter: shown from -vv on.
_CHATTY = ("aiohttp", "asyncio", "urllib3", "charset_normalizer")


def configure(*, verbose: int = 0, json_format: bool, stream: TextIO | None = None) -> logging.Handler:
    """Install the root handler, JSON lines with ``json_format``. ``verbose`` (how many ``-v``):
    0 what happens and fails, 1 a line per reconcile too, 2 and more everything at debug."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(ReconcileContext())
    handler.setFormatter(JSONFormatter() if json_format else TextFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    level = int(verbose)
    root.setLevel(logging.DEBUG if level >= 2 else logging.INFO)
    logging.getLogger("kubeloop.reconcile").setLevel(
        logging.DEBUG if level >= 2 else logging.INFO if level == 1 else logging.WARNING
    )
    # The embedded cluster's own control loops: their reconciles are not the operator's news.
    logging.getLogger("kubeloop.controllermanager.reconcile").setLevel(
        logging.DEBUG if level >= 2 else logging.WARNING
    )
    for name in _CHATTY:
        logging.getLogger(name).setLevel(logging.NOTSET if level >= 2 else logging.WARNING)
    return handler
