"""Pausing CPython's cyclic garbage collector while many acyclic objects are made at once.

Decoding a large body or thousands of objects allocates hundreds of thousands of dicts, lists and
strings that hold no reference cycles (plain JSON values are freed by reference counting). Each
generational pass the GC runs meanwhile walks every one made so far — a 2.9 MB YAML body set off
passes that held the interpreter lock for 200 ms and stopped every other thread that long (and a
10,000-object cache read took 2-5x longer). Work of that shape runs inside :func:`gc_paused`.

The pause is counted: overlapping pauses from several threads end when the last one does.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic GC for the block (counted across threads; restores what was before)."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
