"""node.k8s.io kinds' columns: RuntimeClasses."""

from __future__ import annotations

from collections.abc import Callable

from kubeloop.apiserver.printing.cells import Column, age_column, name_column, text_at


def runtimeclass_columns() -> list[Column]:
    # Upstream's description is ObjectMeta's (missing) "handler" doc: empty.
    return [name_column(), Column("Handler", "string", lambda o, n: text_at(o, "handler"), ""), age_column()]


#: The column set of each of the group's resources that has one, by (group, plural).
COLUMN_SETS: dict[tuple[str, str], Callable[[], list[Column]]] = {
    ("node.k8s.io", "runtimeclasses"): runtimeclass_columns,
}
