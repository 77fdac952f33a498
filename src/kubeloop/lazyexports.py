"""A package's public names imported when first used (PEP 562's module ``__getattr__``).

A package whose ``__init__`` imported everything it exports would load all of it for whoever
imports one of its modules: an operator that serves no webhook would load the admission
machinery because the manager imports ``kubeloop.webhook.server``. Such a package lists its
names and their modules, and binds ``__getattr__`` and ``__dir__`` to :func:`lazy_exports`'s.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package``: ``exports`` maps each name to the
    module defining it; the first lookup imports that module and keeps the value in ``namespace``
    (the package's ``globals()``), so later lookups do not call it again. ``__dir__`` lists the
    package's ``__all__``."""

    def __getattr__(name: str) -> Any:
        try:
            module_name = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module_name), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(namespace["__all__"])

    return __getattr__, __dir__
