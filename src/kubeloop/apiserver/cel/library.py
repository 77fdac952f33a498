"""The libraries Kubernetes adds to CEL (upstream's ``apiserver/pkg/cel/library``), as functions the
interpreter calls: ``isSorted``, list ``indexOf``/``lastIndexOf``, regex ``find``/``findAll`` (RE2),
``url`` with its getters and ``isURL``, ``quantity`` with its comparisons and arithmetic and
``isQuantity``. A rule is given only the ones it calls (``KUBERNETES_LIBRARY`` by name).
"""

from __future__ import annotations

import itertools
import urllib.parse
from collections.abc import Mapping
from fractions import Fraction
from functools import lru_cache
from typing import Any

import re2

from kubeloop.api import quantity
from kubeloop.api.naming import go_quote
from kubeloop.apiserver.cel import syntax as celsyntax
from kubeloop.apiserver.cel.interpreter import cel_standard_library

#: Upstream's per-call cost limit and per-object runtime budget (celconfig).


class LibraryError(ValueError):
    """A library function's error, worded as upstream's (``no such overload``, ...)."""


@lru_cache(maxsize=1)
def library_functions() -> dict[str, Any]:
    functions: dict[str, Any] = {}
    for library in cel_standard_library().values():
        functions.update(library)
    functions.update(KUBERNETES_LIBRARY)
    functions.update(celsyntax.FUNCTIONS)
    return functions


def _is_sorted(items: list[Any]) -> bool:
    if not isinstance(items, list):
        raise LibraryError("no such overload")
    return all(a <= b for a, b in itertools.pairwise(items))


def _index_of(receiver: Any, item: Any, *rest: Any) -> int:
    if isinstance(receiver, str):
        start = rest[0] if rest else 0
        if not 0 <= start <= len(receiver):
            raise LibraryError(f"index out of range: {start}")
        return receiver.find(item, start)
    for index, candidate in enumerate(receiver):
        if candidate == item and type(candidate) is type(item):
            return index
    return -1


def _last_index_of(receiver: Any, item: Any, *rest: Any) -> int:
    if isinstance(receiver, str):
        return receiver.rfind(item) if not rest else receiver.rfind(item, 0, rest[0] + len(item))
    for index in range(len(receiver) - 1, -1, -1):
        if receiver[index] == item and type(receiver[index]) is type(item):
            return index
    return -1


@lru_cache(maxsize=256)
def _regex(pattern: str) -> Any:
    """RE2, as cel-go's regex library: linear time whatever the pattern (patterns come from data)."""
    try:
        return re2.compile(pattern)
    except re2.error as error:
        raise LibraryError(f"error parsing regexp: {error}") from None


def _find(text: str, pattern: str) -> str:
    found = _regex(pattern).search(text)
    return str(found.group(0)) if found else ""


def _find_all(text: str, pattern: str, *limit: int) -> list[str]:
    matches = [str(m.group(0)) for m in _regex(pattern).finditer(text)]
    return matches[: limit[0]] if limit and limit[0] >= 0 else matches


# URLs are maps with a marker key (the interpreter's functions return plain values only).
_URL = "__kubeloop_url__"


def _url(text: str) -> dict[str, Any]:
    if not _is_url(text):
        raise LibraryError(f"URL parse error during conversion from string: parse {go_quote(text)}")
    return {_URL: text}


def _is_url(text: str) -> bool:
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError:
        return False
    return bool(parts.scheme and (parts.netloc or parts.path)) or text.startswith("/")


def _url_text(url: Any) -> str:
    if not isinstance(url, Mapping) or not isinstance(url.get(_URL), str):
        raise LibraryError("no such overload")
    return str(url[_URL])


def _url_part(url: Any, part: str) -> str:
    parts = urllib.parse.urlsplit(_url_text(url))
    if part == "host":
        return parts.netloc.rpartition("@")[2]
    if part == "hostname":
        return parts.hostname or ""
    if part == "port":
        return str(parts.port) if parts.port is not None else ""
    if part == "path":
        return parts.path
    return parts.scheme


def _url_query(url: Any) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(_url_text(url)).query, keep_blank_values=True)


# Quantities: maps holding the exact value as a fraction's text.
_QUANTITY = "__kubeloop_quantity__"


def _parse_quantity(text: str) -> Fraction:
    try:
        return quantity.parse(text)
    except quantity.QuantityError as error:
        raise LibraryError(str(error)) from None


def _quantity(text: str) -> dict[str, Any]:
    return {_QUANTITY: str(_parse_quantity(text))}


def _q(value: Any) -> Fraction:
    if isinstance(value, Mapping) and _QUANTITY in value:
        return Fraction(value[_QUANTITY])
    if isinstance(value, int) and not isinstance(value, bool):
        return Fraction(value)
    raise LibraryError("no such overload")


def _compare(a: Any, b: Any) -> int:
    left, right = _q(a), _q(b)
    return (left > right) - (left < right)


def _as_integer(value: Any) -> int:
    exact = _q(value)
    if exact.denominator != 1 or not -(2**63) <= exact.numerator < 2**63:
        raise LibraryError("cannot convert value to integer")
    return exact.numerator


def _sign(value: Any) -> int:
    exact = _q(value)
    return (exact > 0) - (exact < 0)


KUBERNETES_LIBRARY: dict[str, Any] = {
    # lists
    "isSorted": _is_sorted,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    # regex
    "find": _find,
    "findAll": _find_all,
    # urls
    "url": _url,
    "isURL": _is_url,
    "getScheme": lambda u: _url_part(u, "scheme"),
    "getHost": lambda u: _url_part(u, "host"),
    "getHostname": lambda u: _url_part(u, "hostname"),
    "getPort": lambda u: _url_part(u, "port"),
    "getEscapedPath": lambda u: _url_part(u, "path"),
    "getQuery": _url_query,
    # quantities
    "quantity": _quantity,
    "isQuantity": quantity.is_quantity,
    "isInteger": lambda q: _q(q).denominator == 1,
    "asInteger": _as_integer,
    "asApproximateFloat": lambda q: float(_q(q)),
    "sign": _sign,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "add": lambda a, b: {_QUANTITY: str(_q(a) + _q(b))},
    "sub": lambda a, b: {_QUANTITY: str(_q(a) - _q(b))},
}
