"""The classes of a generated module (models, apply configurations), made when first used.

``kubeloop.api.models.core_v1`` defines 229 models; an operator uses a handful. Making a pydantic
model costs ~1 ms and ~14 KB whether it is used or not, so a generated module defines each class
inside ``if _lazy.wanted("Name"):`` and, when it is imported, defines none. The first time a
class is asked for (``core_v1.ConfigMap``, ``from ... import ConfigMap``, ``pickle``), the
module's ``__getattr__`` runs the module's code again with that class and the classes of its
module its fields name, transitively, wanted: they are then ordinary module-level classes
(their ``__module__`` and ``__qualname__`` as written, their forward references found in the
module's namespace). A class of another module that a field names is made when pydantic resolves
the field, through that module's ``__getattr__``.

The generated source stays the one definition of every class: type checkers and readers see
plain class statements.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from types import CodeType

__all__ = ["LazyClasses"]

#: One lock for every generated module: making a class may make another module's (a field's type).
_LOCK = threading.RLock()
_BY_MODULE: dict[str, LazyClasses] = {}


class LazyClasses:
    """The classes of one generated module, by name, with the names of the module's classes each
    one's fields use (``needs``)."""

    def __init__(self, module: str, needs: Mapping[str, tuple[str, ...]], code: CodeType) -> None:
        self.module = module
        self.needs = needs
        #: The module's code, run again to make classes. Kept from its import rather than asked
        #: of its loader, which need not offer it (pytest's assertion rewriter, a zip importer).
        self.code = code
        self._making: frozenset[str] = frozenset()

    @classmethod
    def of(cls, module: str, needs: Mapping[str, tuple[str, ...]]) -> LazyClasses:
        """The instance of the module whose top level calls this (its code, running again to
        make classes, gets the same one)."""
        found = _BY_MODULE.get(module)
        if found is None:
            found = _BY_MODULE[module] = cls(module, needs, sys._getframe(1).f_code)
        return found

    def wanted(self, name: str) -> bool:
        """Whether the module's code, running now, is to define class ``name``."""
        return name in self._making

    def getattr(self, name: str) -> type:
        """The module's ``__getattr__``: class ``name``, made with what it needs."""
        if name not in self.needs:
            raise AttributeError(f"module {self.module!r} has no attribute {name!r}")
        module = sys.modules[self.module]
        namespace = vars(module)
        with _LOCK:
            if name not in namespace:
                self._making = frozenset(self._closure(name, namespace))
                try:
                    exec(self.code, namespace)
                finally:
                    self._making = frozenset()
        made: type = namespace[name]
        return made

    def dir(self) -> list[str]:
        """The module's ``__dir__``: what it holds now and every class it can make."""
        return sorted({*vars(sys.modules[self.module]), *self.needs})

    def _closure(self, name: str, namespace: Mapping[str, object]) -> set[str]:
        """``name`` and the classes it needs, transitively, that the module does not hold yet."""
        missing: set[str] = set()
        pending = [name]
        while pending:
            current = pending.pop()
            if current in missing or current in namespace:
                continue
            missing.add(current)
            pending.extend(self.needs[current])
        return missing
