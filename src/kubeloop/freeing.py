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

import collections
import dataclasses
import inspect
import sys
from types import FrameType
from typing import Any

__all__ = ["free_in_steps", "take_traceback"]

_CONTAINERS = (dict, list, set)


def take_traceback(error: BaseException) -> list[Any]:
    """Drop ``error``'s traceback, context and cause, and return what the frames it went through
    alone held, for :func:`free_in_steps`. A frame of a coroutine or generator is taken only once
    it has ended: one still suspended may be there (an exception raised again, or handed over
    through a future, carries the frames that caught it before), and clearing its frame would
    close it. A suspended one's frame is held by its coroutine too, which the count shows."""
    frames: list[FrameType] = []
    traceback = error.__traceback__
    while traceback is not None:
        frames.append(traceback.tb_frame)
        traceback = traceback.tb_next
    # A frame that ended keeps the one that called it (f_back): those references are known.
    called_from = collections.Counter(id(frame.f_back) for frame in frames if frame.f_back is not None)
    held: list[Any] = []
    for frame in frames:
        # Its traceback entry, ``frames``, this variable, getrefcount's argument, its callees.
        if frame.f_code.co_flags & _RESUMABLE and sys.getrefcount(frame) != _ALONE + 2 + called_from[id(frame)]:
            continue
        locals_ = frame.f_locals  # a dict of the frame's variables, ours once the frame is cleared
        try:
            frame.clear()
        except RuntimeError:  # still running (on this thread's stack or another's)
            continue
        held.append(locals_)
    error.__traceback__ = error.__context__ = error.__cause__ = None
    return held


def _count_when_alone() -> int:
    """What ``sys.getrefcount`` says of an object only a local variable holds: 2 on CPython
    3.11-3.13 (the variable and the call's argument); measured, since an interpreter that lends
    its argument (3.14) says less, and a fixed 2 would then empty what another still holds."""
    probe: list[Any] = []
    return sys.getrefcount(probe)


_ALONE = _count_when_alone()
#: Code flags of generators, coroutines and async generators (their frames can be suspended).
_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def free_in_steps(held: list[Any]) -> None:
    """Empty ``held`` (the caller's list, which it holds alone), and every dict, list and set in
    it that nothing else holds, one member at a time, as well as the fields of the dataclass
    instances nothing else holds; what others hold is only let go of."""
    leaves, containers = _LEAVES, _CONTAINERS
    while held:
        container = held.pop()
        # Held by ``container`` alone (and getrefcount's argument)? More: someone else holds it.
        if type(container) not in containers or sys.getrefcount(container) > _ALONE:
            if _is_instance(container):  # its fields, held by it alone unless others hold it
                held.append(container.__dict__)
            continue
        if type(container) is dict:
            while container:
                _, member = container.popitem()
                if type(member) not in leaves:
                    _take(member, held)
                del member
        else:
            while container:
                member = container.pop()
                if type(member) not in leaves:
                    _take(member, held)
                del member
        del container


#: What holds nothing that needs freeing in steps (a tuple: a path, a few strings).
_LEAVES = frozenset({str, int, float, bool, type(None), bytes, tuple})


def _take(member: Any, held: list[Any]) -> None:
    """Keep a container or a dataclass instance to be emptied later, in steps too (whether
    anything else holds it is looked at when its turn comes)."""
    if type(member) in _CONTAINERS:
        if len(member):  # (an exact dict, list or set: no code of the member's own runs)
            held.append(member)
    elif _is_instance(member):
        held.append(member)


def _is_instance(value: Any) -> bool:
    """A dataclass instance with its fields in a ``__dict__``."""
    return dataclasses.is_dataclass(value) and not isinstance(value, type) and hasattr(value, "__dict__")
