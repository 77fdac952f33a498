"""IntOrString fields that hold a count or a percentage (``maxSurge``, ``minAvailable``): the
value checks the apps and policy groups share.
"""

from __future__ import annotations

import re
from typing import Any

from kubeloop.api import naming
from kubeloop.apiserver.registry.validation.causes import NEGATIVE, as_text, invalid, is_int
from kubeloop.errors import StatusCause

__all__ = ["PERCENT", "is_zero_int_or_percent", "percent_over_100", "positive_int_or_percent"]


PERCENT = re.compile(r"[0-9]+%")


_PERCENT_ERROR = naming.regex_error(
    "a valid percent string must be a numeric string followed by an ending '%'", "[0-9]+%", "1%", "93%"
)


def percent_over_100(value: str) -> bool:
    """A valid percent string above 100% (told by its digits: there may be thousands)."""
    digits = value[:-1].lstrip("0")
    return len(digits) > 3 or int(digits or "0") > 100


def positive_int_or_percent(value: Any, path: str, *, at_most_100: bool = True) -> list[StatusCause]:
    """``ValidatePositiveIntOrPercent`` (and ``IsNotMoreThan100Percent`` unless told not)."""
    if isinstance(value, str):
        if not PERCENT.fullmatch(value):
            return [invalid(path, value, _PERCENT_ERROR)]
        if at_most_100 and percent_over_100(value):
            return [invalid(path, value, "must not be greater than 100%")]
        return []
    if is_int(value) and value < 0:
        return [invalid(path, value, NEGATIVE)]
    return []


def is_zero_int_or_percent(value: Any) -> bool:
    """``getIntOrPercentValue(v) == 0``: a percent's number, an integer, else the string's Atoi
    (which is 0 for a string that is not a number)."""
    if is_int(value):
        return value == 0
    text = as_text(value)
    number = text[:-1] if PERCENT.fullmatch(text) else text.removeprefix("+").removeprefix("-")
    return not (number.isascii() and number.isdigit()) or not number.strip("0")
