r"""What reconciles tell the log, and the logger a reconciler logs with.

Each reconcile ends in one line on the ``kubeloop.reconcile`` logger, at INFO (``kubeloop run
-v`` shows them): ``website: reconcile default/blog ok 12ms (Deployment/blog updated)``, with
what it wrote (``client.writejournal``); a requeue says so, a ``Conflict`` is a quiet requeue
(``conflict; requeued``). A reconcile that fails is an ERROR line each time, with the
traceback the first time it fails that way in a row (every time when ``kubeloop.reconcile``
logs at DEBUG: ``-vv``).

:func:`logger` is controller-runtime's ``log.FromContext``: a logger whose records, inside a
reconcile, carry the controller, the object (``namespace/name``) and the reconcile ID (as JSON
fields, and after the message in text), whenever it was made. Each controller also keeps its
latest reconciles as :class:`ReconcileRecord`\ s (``Controller.recent``), for live views.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import MutableMapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubeloop.controller.reconcile import Request

RECONCILE_LOG = logging.getLogger("kubeloop.reconcile")


@dataclass(frozen=True)
class ReconcileRecord:
    """One finished reconcile, as a view shows it (``Controller.recent``)."""

    finished: datetime
    request: Request
    #: ok, requeue, requeue after Ns, conflict, error, failed for good.
    outcome: str
    took_ms: float
    writes: tuple[str, ...]
    #: What it raised (``Forbidden: persistentvolumeclaims is forbidden: ...``), if it failed.
    error: str = ""


@dataclass(frozen=True)
class ReconcileScope:
    """The reconcile running in a context."""

    controller: str
    request: Request
    reconcile_id: str


#: The reconcile running in this context (None outside one).
current_reconcile: contextvars.ContextVar[ReconcileScope | None] = contextvars.ContextVar(
    "kubeloop_current_reconcile", default=None
)


class ReconcileLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger whose records carry the current reconcile's controller and object."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        """The record's ``extra`` with the current reconcile's ``controller`` and ``object``."""
        scope = current_reconcile.get()
        if scope is not None:
            extra = dict(kwargs.get("extra") or {})
            extra.setdefault("controller", scope.controller)
            extra.setdefault("object", str(scope.request))
            kwargs["extra"] = extra
        return msg, kwargs


def logger(name: str | None = None) -> ReconcileLogger:
    """The logger ``name`` (default ``kubeloop.reconcile``) bound to whatever reconcile logs
    through it: ``log = kubeloop.logger(__name__)`` at the top of a module is enough."""
    return ReconcileLogger(logging.getLogger(name or "kubeloop.reconcile"), {})


def milliseconds(seconds: float) -> str:
    """``seconds`` as whole milliseconds, as reconcile lines print durations (``12ms``)."""
    return f"{seconds * 1000:.0f}ms"
