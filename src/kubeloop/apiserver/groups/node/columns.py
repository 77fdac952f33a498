"""node.k8s.io kinds' columns: RuntimeClasses."""

from __future__ import annotations

from kubeloop.apiserver.printing.cells import Column, age_column, name_column, text_at


def runtimeclass_columns() -> list[Column]:
    # Upstream's description is ObjectMeta's (missing) "handler" doc: empty.
    return [name_column(), Column("Handler", "string", lambda o, n: text_at(o, "handler"), ""), age_column()]
