"""Large garbage freed a member at a time, so that freeing it never holds the GIL for long.

A 3 MiB ConfigMap refused for its size leaves ~400,000 objects to free (its decoded body, the
managed fields recorded for it, their path sets: freeing a set of 87,000 paths alone takes 30-40
ms on a slow machine). Freed at once, as the last reference goes, they are one cascade of
deallocations in C, and every other thread (the server's serving loop) waits for it.
:func:`free_in_steps` empties the containers that nothing else holds one member at a time, in
Python code, which hands the GIL over as usual; :func:`take_traceback` gives it what the frames of
an error's traceback held.
"""

from __future__ import annotations

import dataclasses
import sys
from types import TracebackType
from typing import Any

__all__ = ["free_in_steps", "take_traceback"]

_CONTAINERS = (dict, list, set)


def take_traceback(error: BaseException) -> list[Any]:
    """Drop ``error``'s traceback, context and cause, and return what their frames alone held,
    for :func:`free_in_steps` (the frame still running, the caller's, is left as it is)."""
    held: list[Any] = []
    _take_locals(error.__traceback__, held)
    error.__traceback__ = error.__context__ = error.__cause__ = None
    return held


def _take_locals(traceback: TracebackType | None, into: list[Any]) -> None:
    while traceback is not None:
        frame = traceback.tb_frame
        locals_ = frame.f_locals  # a dict of the frame's variables, ours once the frame is cleared
        try:
            frame.clear()
        except RuntimeError:  # still running: the caller's own frame
            pass
        else:
            into.append(locals_)
        traceback = traceback.tb_next


def free_in_steps(held: list[Any]) -> None:
    """Empty ``held`` (the caller's list, which it holds alone), and every dict, list and set in
    it that nothing else holds, one member at a time, as well as the fields of the dataclass
    instances nothing else holds; what others hold is only let go of."""
    leaves, containers = _LEAVES, _CONTAINERS
    while held:
        container = held.pop()
        # Two references: ``container`` and getrefcount's argument. More: someone else holds it.
        if type(container) not in containers or sys.getrefcount(container) > 2:
            if _is_instance(container):  # its fields, held by it alone unless others hold it
                held.append(container.__dict__)
            continue
        if type(container) is dict:
            while container:
                _, member = container.popitem()
                if type(member) not in leaves and (member or type(member) not in containers):
                    _take(member, held)
                del member
        else:
            while container:
                member = container.pop()
                if type(member) not in leaves and (member or type(member) not in containers):
                    _take(member, held)
                del member
        del container


#: What holds nothing that needs freeing in steps (a tuple: a path, a few strings).
_LEAVES = frozenset({str, int, float, bool, type(None), bytes, tuple})


def _take(member: Any, held: list[Any]) -> None:
    """Keep a container or a dataclass instance to be emptied later, in steps too (whether
    anything else holds it is looked at when its turn comes)."""
    if type(member) in _CONTAINERS or _is_instance(member):
        held.append(member)


def _is_instance(value: Any) -> bool:
    """A dataclass instance with its fields in a ``__dict__``."""
    return dataclasses.is_dataclass(value) and not isinstance(value, type) and hasattr(value, "__dict__")
