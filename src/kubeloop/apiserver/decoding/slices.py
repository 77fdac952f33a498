"""A large JSON body decoded a slice at a time, so that no single call holds the GIL for long.

``orjson.loads`` of a 3 MiB body (a ConfigMap of 87,000 keys) holds the GIL for 40–70 ms on a
slow machine, and every other request of the server waits that long. :func:`loads_in_slices`
gives the same value in calls of about :data:`SLICE_BYTES` each: a regular expression bounded to
the slice finds where the members of the body's containers end, and each run of whole members is
decoded by orjson on its own, wrapped in its container's brackets, and merged into the container
(a repeated key keeps its first place and its last value, as in one decode). A container that does
not close within its slice is walked into.

The result is always ``orjson.loads``'s: whatever the slices do not read as well-formed JSON (a
stray comma, a missing colon, bytes that are not UTF-8, a container left open) is decoded again
whole, so a refusal is orjson's, worded as it always was.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import orjson

__all__ = ["SLICE_BYTES", "loads_in_slices"]

#: Bytes of a body scanned, and decoded, per call (orjson: ~1 ms per 64 KiB on a slow machine).
SLICE_BYTES = 64 * 1024
#: Containers the slices walk into, one inside another, before the body is decoded whole instead
#: (the registry refuses more than 128 levels of nesting anyway).
_MAX_OPEN = 256
#: Levels of containers a run of members may hold whole (a deeper one is walked into).
_LEVELS = 4


def _item_pattern(levels: int) -> str:
    """One JSON item that is not a comma and holds no bracket left open: a run of characters
    that are no quote, bracket or comma, a string, or a container of at most ``levels`` levels.
    Every repeat is possessive: each item can be read one way only, so nothing backtracks."""
    item = rf"[^\"{{}}\[\],]++|{_STRING}"
    for _ in range(levels):
        item = rf"{item}|\{{(?:{item}|,)*+\}}|\[(?:{item}|,)*+\]"
    return item


_STRING = r'"(?:[^"\\]++|\\.)*+"'
#: JSON's white space (space, tab, line feed, carriage return; not Python's ``\s``).
_SPACE = re.compile(rb"[ \t\r\n]*")


class _Patterns:
    """The expressions that find the members; compiled at the first large body, not at import
    (their compilation is ~25 ms of every server process's start)."""

    __slots__ = ("items", "key", "members")

    def __init__(self) -> None:
        item = _item_pattern(_LEVELS)
        #: Whole members, each followed by its comma: as many as the slice holds.
        self.members = re.compile(rf"(?:(?:{item})*+,)++".encode(), re.DOTALL)
        #: Items and commas up to a bracket of this container's level, a string left open, or the slice's end.
        self.items = re.compile(rf"(?:{item}|,)*+".encode(), re.DOTALL)
        #: What comes before an object's member that is walked into: its key and colon.
        self.key = re.compile(rf"[ \t\r\n]*({_STRING})[ \t\r\n]*:[ \t\r\n]*".encode(), re.DOTALL)


@functools.cache
def _patterns() -> _Patterns:
    return _Patterns()


_OPENING = {ord("{"): b"{", ord("["): b"["}
_CLOSING = {ord("{"): b"}", ord("["): b"]"}
_CLOSED_BY = {ord("}"): ord("{"), ord("]"): ord("[")}


class _NotSliced(Exception):
    """The slices do not read this body; it is decoded whole."""


class _Open:
    """A container being filled: its opening bracket, its value so far, and its key in its parent."""

    __slots__ = ("bracket", "key", "value")

    def __init__(self, bracket: int, key: str | None) -> None:
        self.bracket = bracket
        self.key = key
        self.value: dict[str, Any] | list[Any] = {} if bracket == ord("{") else []

    def add_members(self, members: bytes) -> None:
        """Merge a run of whole members (``"a":1,"b":2`` or ``1,2``), decoded in this container's brackets."""
        decoded = orjson.loads(_OPENING[self.bracket] + members + _CLOSING[self.bracket])
        if isinstance(self.value, dict):
            self.value.update(decoded)
        else:
            self.value.extend(decoded)

    def add(self, key: str | None, value: Any) -> None:
        if isinstance(self.value, dict):
            self.value[key] = value  # type: ignore[index]
        else:
            self.value.append(value)


def loads_in_slices(raw: bytes, slice_bytes: int = SLICE_BYTES) -> Any:
    """``orjson.loads(raw)``, decoded in calls of about ``slice_bytes`` bytes each."""
    try:
        return _decode(raw, slice_bytes)
    except (_NotSliced, orjson.JSONDecodeError):
        return orjson.loads(raw)


def _blank(text: bytes) -> bool:
    return _SPACE.fullmatch(text) is not None


def _skip_space(raw: bytes, pos: int) -> int:
    return _SPACE.match(raw, pos).end()  # type: ignore[union-attr]


def _decode(raw: bytes, slice_bytes: int) -> Any:
    patterns = _patterns()
    end = len(raw)
    pos = _skip_space(raw, 0)
    if pos == end or raw[pos] not in _OPENING:
        raise _NotSliced  # a scalar: small, or orjson's to refuse
    stack = [_Open(raw[pos], None)]
    pos += 1
    member_due = False  # after a comma: a member must follow (JSON has no trailing comma)
    window = slice_bytes
    while True:
        top = stack[-1]
        limit = min(end, pos + window)
        members = patterns.members.match(raw, pos, limit)
        if members is not None:
            run = raw[pos : members.end() - 1]
            if _blank(run):
                raise _NotSliced  # a comma with no member before it
            top.add_members(run)
            pos, member_due, window = members.end(), True, slice_bytes
            continue
        stop = patterns.items.match(raw, pos, limit).end()  # type: ignore[union-attr]
        if stop == limit or raw[stop] == ord('"'):
            if limit == end:
                raise _NotSliced  # a string or container never closed
            window *= 2  # one item longer than the slice: look further
            continue
        window = slice_bytes
        rest, bracket = raw[pos:stop], raw[stop]
        if bracket in _CLOSED_BY:
            if _CLOSED_BY[bracket] != top.bracket:
                raise _NotSliced
            if not _blank(rest):
                top.add_members(rest)
            elif member_due:
                raise _NotSliced  # a trailing comma
            stack.pop()
            pos = _skip_space(raw, stop + 1)
            if not stack:
                if pos != end:
                    raise _NotSliced  # more after the value
                return top.value
            stack[-1].add(top.key, top.value)
            if pos < end and raw[pos] == ord(","):
                pos, member_due = pos + 1, True
            elif pos < end and raw[pos] in _CLOSED_BY:
                member_due = False
            else:
                raise _NotSliced  # a member with no comma after it
            continue
        # A container that does not close within the slice (or nests deeper): walk into it.
        if isinstance(top.value, dict):
            key = patterns.key.fullmatch(rest)
            if key is None:
                raise _NotSliced
            name = orjson.loads(key.group(1))
        elif _blank(rest):
            name = None
        else:
            raise _NotSliced
        if len(stack) >= _MAX_OPEN:
            raise _NotSliced
        stack.append(_Open(bracket, name))
        pos, member_due = stop + 1, False
