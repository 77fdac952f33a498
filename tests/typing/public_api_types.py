"""What a user's type checker makes of the public API (``make typecheck`` runs mypy --strict on
this folder; nothing here runs): each ``assert_type`` fails the check if the API's types change."""

from __future__ import annotations

from typing import assert_type

from kubeloop.testing import eventually


async def _found() -> int:
    return 1


def _named() -> str:
    return "x"


async def eventually_returns_what_its_check_returns() -> None:
    assert_type(await eventually(_found), int)  # an async check
    assert_type(await eventually(_named), str)  # a plain one
    assert_type(await eventually(lambda: 2 > 1, timeout=1), bool)
