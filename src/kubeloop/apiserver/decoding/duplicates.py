"""Repeated keys in a JSON body: what ``fieldValidation=Strict`` refuses and ``Warn`` reports
(sigs.k8s.io/json's case), found without decoding twice when the body cannot hold any.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

__all__ = ["find_duplicate_fields"]


class _DupObject(dict[str, Any]):
    """A decoded JSON object that had repeated keys (listed in ``dups``)."""

    __slots__ = ("dups",)

    def __init__(self, pairs: list[tuple[str, Any]], dups: list[str]) -> None:
        super().__init__(pairs)
        self.dups = dups


def find_duplicate_fields(raw: bytes, decoded: Any = None) -> list[str]:
    """Dotted paths of repeated object keys in a JSON body (``metadata.name``, ``a.b[0].c``).

    orjson keeps the last of repeated keys silently; Go's strict decoding reports them. Paths use
    sigs.k8s.io/json's notation. Bodies that are not JSON give ``[]`` (their parser reports them).
    ``decoded``, orjson's reading of ``raw`` when the caller has it, answers the common case
    (no repeated key) without parsing again.
    """
    if decoded is not None and _no_repeated_keys(raw, decoded):
        return []
    found = False

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal found
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        found = True
        seen: set[str] = set()
        dups: list[str] = []
        for key, _ in pairs:
            if key in seen and key not in dups:
                dups.append(key)
            seen.add(key)
        return _DupObject(pairs, dups)

    try:
        document = json.loads(raw, object_pairs_hook=hook)
    except (ValueError, RecursionError):
        return []
    if not found:
        return []
    out: list[str] = []
    with contextlib.suppress(RecursionError):
        _collect_duplicates(document, "", out)
    return out


#: A key with white space before its colon (compact JSON, as clients send it, has none).
_SPACED_COLON = re.compile(rb'"[ \t\r\n]+:')
#: A quote followed by nothing but white space up to the end of a window.
_QUOTE_AT_WINDOW_END = re.compile(rb'"[ \t\r\n]*\Z')
#: Bytes of a large body looked at per call: one search of a 3 MiB body held the GIL for 5-10 ms.
_WINDOW = 64 * 1024


def _no_repeated_keys(raw: bytes, decoded: Any) -> bool:
    """True when ``raw`` surely repeats no key: with no space before a colon, every key of
    ``raw`` is a ``":`` (and a string may hold more), so as many ``":`` as ``decoded`` has keys
    means none was dropped. False means only that the full check must look."""
    if _has_spaced_colon(raw):
        return False
    try:
        keys = _count_keys(decoded)
    except RecursionError:
        return False
    return _count_key_ends(raw) == keys


def _count_keys(decoded: Any) -> int:
    """How many keys the objects of a decoded JSON value hold, all levels counted (recursive:
    four times quicker than a loop with a stack on the bodies clients send; orjson decodes no
    deeper than 1,024 levels, and a RecursionError sends the caller to the full check)."""
    kind = type(decoded)
    if kind is dict:
        keys = len(decoded)
        values = decoded.values()
    elif kind is list:
        keys, values = 0, decoded
    else:
        return 0
    for value in values:
        kind = type(value)
        if kind is dict or kind is list:
            keys += _count_keys(value)
    return keys


def _count_key_ends(raw: bytes, window: int = _WINDOW) -> int:
    """``raw.count(b'":')``, a window at a time: each occurrence is counted in the window it
    starts in (it cannot overlap another)."""
    size = len(raw)
    if size <= window:  # most bodies: one count
        return raw.count(b'":')
    return sum(raw.count(b'":', start, min(size, start + window + 1)) for start in range(0, size, window))


def _has_spaced_colon(raw: bytes, window: int = _WINDOW) -> bool:
    """Whether ``raw`` holds a quote, white space and a colon, searched a window at a time (a
    match that starts in one window and ends in the next is followed from its quote)."""
    size = len(raw)
    if size <= window:  # most bodies: one search
        return _SPACED_COLON.search(raw) is not None
    for start in range(0, size, window):
        stop = min(size, start + window)
        if _SPACED_COLON.search(raw, start, stop) is not None:
            return True
        straddling = _QUOTE_AT_WINDOW_END.search(raw, start, stop)
        if straddling is not None and stop < size and _SPACED_COLON.match(raw, straddling.start()) is not None:
            return True
    return False


def _collect_duplicates(node: Any, prefix: str, out: list[str]) -> None:
    if isinstance(node, dict):
        dups = node.dups if isinstance(node, _DupObject) else ()
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else key
            _collect_duplicates(value, path, out)
            if key in dups:
                out.append(path)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _collect_duplicates(value, f"{prefix}[{index}]", out)
