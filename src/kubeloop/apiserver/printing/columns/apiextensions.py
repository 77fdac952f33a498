"""apiextensions.k8s.io kinds' columns: CustomResourceDefinitions print as upstream's generic
table convertor prints (Name, Created At).
"""

from __future__ import annotations

from collections.abc import Callable

from kubeloop.apiserver.printing.cells import Column, generic_columns

#: The column set of each of the group's resources that has one, by (group, plural).
COLUMN_SETS: dict[tuple[str, str], Callable[[], list[Column]]] = {
    ("apiextensions.k8s.io", "customresourcedefinitions"): generic_columns,
}
