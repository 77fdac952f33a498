"""``resource.Quantity``: the text of a quantity ("500m", "1Gi", "1e3"), as apimachinery reads it.

- :func:`syntax_error` is ``ParseQuantity``'s verdict on the text (None: it parses);
- :func:`parse` is its exact value, a ``Fraction`` (what comparisons and arithmetic use);
- :func:`sign` is ``Quantity.Sign()``; :func:`is_quantity` says whether a text parses.

Validation, CEL's quantity library and the typed models read quantities through this module.
"""

from __future__ import annotations

import re
from fractions import Fraction

from kubeloop.api.naming import go_quote

#: ParseQuantity's message for text that is not a quantity.
FORMAT_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
#: Quantities longer than this are refused before they are read (CEL's library bound).
MAX_LENGTH = 64
#: resource.Quantity keeps values in int64 with a scale; beyond this exponent none is exact.
MAX_EXPONENT = 100

_SUFFIXES = frozenset(["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"])
_DECIMAL_EXPONENT = re.compile(r"[eE][-+]?[0-9]+")
_NUMBER = re.compile(r"[+-]?[0-9]*\.?[0-9]*")
_MANTISSA = re.compile(r"\s*([+-]?)(\d*)(?:\.(\d*))?")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: dict[str, Fraction] = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
}  # fmt: skip


class QuantityError(ValueError):
    """Text that is not a quantity, or one no resource.Quantity can hold; worded as upstream's."""


def syntax_error(text: str) -> str | None:
    """``resource.ParseQuantity``'s verdict on the syntax (not on overflow): None when it parses."""
    if not text:
        return FORMAT_ERROR
    if text == "0":
        return None
    pos, end = 0, len(text)
    if text[0] in "+-":
        pos = 1
    while pos < end and text[pos] in "0123456789":
        pos += 1
    if pos < end and text[pos] == ".":
        pos += 1
        while pos < end and text[pos] in "0123456789":
            pos += 1
    suffix_start = pos
    while pos < end and text[pos] in "eEinumkKMGTP":
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in "0123456789":
        pos += 1
    if pos < end:
        return FORMAT_ERROR
    suffix = text[suffix_start:]
    if suffix in _SUFFIXES or _DECIMAL_EXPONENT.fullmatch(suffix):
        return None
    return "unable to parse quantity's suffix"


def parse(text: str) -> Fraction:
    """The exact value of a quantity's text; raises :class:`QuantityError`."""
    if len(text) > MAX_LENGTH:
        raise QuantityError(f"quantity {go_quote(text[:MAX_LENGTH])}... is too long")
    if syntax_error(text) is not None:
        raise QuantityError(f"quantities must match the regular expression: {go_quote(text)}")
    number = _NUMBER.match(text)
    assert number is not None
    digits, suffix = number.group(0), text[number.end() :]
    try:
        value = Fraction(digits) if digits not in ("", "+", "-") else Fraction(0)
    except ValueError:  # a lone "." passes the syntax check but holds no number
        raise QuantityError(f"quantities must match the regular expression: {go_quote(text)}") from None
    if suffix in _BINARY:
        return value * _BINARY[suffix]
    if suffix in _DECIMAL:
        return value * _DECIMAL[suffix]
    exponent = int(suffix[1:])
    if abs(exponent) > MAX_EXPONENT:
        raise QuantityError(f"quantity {go_quote(text)} is out of range")
    return value * (Fraction(10**exponent) if exponent >= 0 else Fraction(1, 10**-exponent))


def is_quantity(text: str) -> bool:
    try:
        parse(text)
    except (QuantityError, ZeroDivisionError):
        return False
    return True


def sign(text: object) -> int:
    """``Quantity.Sign()`` of a quantity's text already known to parse (0 for anything else)."""
    match = _MANTISSA.match(str(text))
    if match is None or not any(c not in "0" for c in (match.group(2) or "") + (match.group(3) or "")):
        return 0
    return -1 if match.group(1) == "-" else 1
