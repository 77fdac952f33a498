"""resource.Quantity's text, read as apimachinery reads it (kubeloop.api.quantity)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubeloop.api import quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("1", 1),
        ("500m", Fraction(1, 2)),
        ("1.5", Fraction(3, 2)),
        ("+2k", 2000),
        ("-1Mi", -(2**20)),
        ("1Gi", 2**30),
        ("1e3", 1000),
        ("1E-3", Fraction(1, 1000)),
        ("12n", Fraction(12, 10**9)),
        (".5", Fraction(1, 2)),
        ("5.", 5),
    ],
)
def test_values(text: str, value: Fraction | int) -> None:
    assert quantity.syntax_error(text) is None
    assert quantity.parse(text) == value
    assert quantity.is_quantity(text)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", quantity.FORMAT_ERROR),
        ("abc", quantity.FORMAT_ERROR),
        ("1 Gi", quantity.FORMAT_ERROR),
        ("1GG", "unable to parse quantity's suffix"),
        ("1Ki2", "unable to parse quantity's suffix"),
    ],
)
def test_syntax_errors(text: str, error: str) -> None:
    assert quantity.syntax_error(text) == error
    with pytest.raises(quantity.QuantityError, match="quantities must match the regular expression"):
        quantity.parse(text)
    assert not quantity.is_quantity(text)


def test_bounds() -> None:
    with pytest.raises(quantity.QuantityError, match="is too long"):
        quantity.parse("1" * 65)
    with pytest.raises(quantity.QuantityError, match="is out of range"):
        quantity.parse("1e101")
    assert quantity.parse("1e100") == 10**100
    with pytest.raises(quantity.QuantityError, match="must match"):
        quantity.parse(".")  # passes the syntax check, holds no number


@pytest.mark.parametrize(("text", "sign"), [("0", 0), ("0.000", 0), ("-0", 0), ("1m", 1), ("-2Gi", -1), ("+.5", 1)])
def test_sign(text: str, sign: int) -> None:
    assert quantity.sign(text) == sign


_suffix = st.sampled_from(["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"])


@given(st.integers(-(10**12), 10**12), st.integers(0, 999), _suffix)
def test_what_parses_has_its_sign_and_a_consistent_value(whole: int, fraction: int, suffix: str) -> None:
    text = f"{whole}.{fraction:03d}{suffix}"
    assert quantity.syntax_error(text) is None
    value = quantity.parse(text)
    assert quantity.sign(text) == (value > 0) - (value < 0)
    magnitude = Fraction(abs(whole)) + Fraction(fraction, 1000)
    assert abs(value) == magnitude * quantity.parse(f"1{suffix}")


@given(st.text(alphabet="0123456789.+-eEinumkKMGTP ", max_size=12))
def test_parse_agrees_with_the_syntax_check(text: str) -> None:
    if quantity.syntax_error(text) is not None:
        assert not quantity.is_quantity(text)
    elif text != ".":
        try:
            quantity.parse(text)
        except quantity.QuantityError as error:
            assert "out of range" in str(error) or "must match" in str(error)
