"""``UserInfo``: who made a request, as authentication found it and authorization judges it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UserInfo:
    """Who made a request (user.Info upstream)."""

    name: str
    groups: tuple[str, ...] = ()
