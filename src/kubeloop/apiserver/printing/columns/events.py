"""events.k8s.io kinds' columns: its Events print as core Events do (upstream's printer reads them
converted).
"""

from __future__ import annotations

from collections.abc import Callable

from kubeloop.apiserver.printing.cells import Column
from kubeloop.apiserver.printing.columns.core import event_columns

#: The column set of each of the group's resources that has one, by (group, plural).
COLUMN_SETS: dict[tuple[str, str], Callable[[], list[Column]]] = {
    ("events.k8s.io", "events"): event_columns,
}
