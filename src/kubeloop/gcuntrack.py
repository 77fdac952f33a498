"""Taking long-lived acyclic values out of the cyclic garbage collector's sight.

CPython's cyclic GC walks every container it tracks that lives in the generation it collects:
a full pass walks every dict and list alive. A server's stored objects (decoded JSON, never
mutated once stored: copy-on-write) are the bulk of them and can hold no reference cycle, so
every pass over them finds nothing: 20,000 ConfigMaps are ~120,000 containers, a 55 ms full pass
during which no request is served (``bench/stall.py``). Reference counting frees them whatever
the GC knows; :func:`untrack_json` only stops the walking. CPython untracks dicts of plain
values itself, during passes; this does it at once, for every container of a JSON value, via
the C API's ``PyObject_GC_UnTrack`` (a no-op on other interpreters).

A value handed here must never be made part of a cycle afterwards (a list of it appended to
itself, say): the GC would not see that cycle. Dicts are safe even then: CPython tracks a dict
again when a container is put in it.
"""

from __future__ import annotations

import ctypes
import gc
import sys
from collections.abc import Callable

__all__ = ["untrack", "untrack_json"]


def _gc_untrack() -> Callable[[object], None] | None:
    if sys.implementation.name != "cpython" or not hasattr(ctypes, "pythonapi"):
        return None
    function = ctypes.pythonapi.PyObject_GC_UnTrack
    function.argtypes = (ctypes.py_object,)
    function.restype = None
    return function


_untrack = _gc_untrack()
_is_tracked = gc.is_tracked


def untrack(value: object) -> None:
    """Untrack one object that holds references but never a cycle (a slots dataclass of
    plain values and untracked containers, say). Only tracked objects are touched: an object
    the GC does not track may not even have the header untracking reads."""
    if _untrack is not None and _is_tracked(value):
        _untrack(value)


def untrack_json(value: object) -> None:
    """Untrack every dict and list of a JSON value (dicts, lists, strings, numbers, booleans,
    None). A container already untracked is not entered: what is shared with a value untracked
    before (the unchanged parts of an updated object) costs nothing, and CPython keeps a dict
    untracked only while it holds no container."""
    if _untrack is not None and _is_tracked(value):
        _untrack_tracked(value)


def _untrack_tracked(value: object) -> None:
    """``untrack_json`` of a tracked container; its untracked members (dicts of plain values,
    which CPython never tracks, and what an earlier untracking reached) are not entered: a
    ConfigMap with its managedFields 5.4 → 3.6 µs."""
    _untrack(value)  # type: ignore[misc]
    for item in value.values() if type(value) is dict else value:  # type: ignore[attr-defined]
        kind = type(item)
        if (kind is dict or kind is list) and _is_tracked(item):
            _untrack_tracked(item)
