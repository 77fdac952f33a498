"""Kubernetes times in JSON: ``metav1.Time`` (RFC 3339, whole seconds, UTC: "2024-05-01T12:00:00Z")
and ``metav1.MicroTime`` (microseconds: "2024-05-01T12:00:00.123456Z"). The one place that formats
and parses them."""

from __future__ import annotations

import functools
import time
from datetime import UTC, datetime
from typing import Any


def format_time(moment: datetime, *, micro: bool = False) -> str:
    """``moment`` as metav1.Time (or MicroTime with ``micro``), in UTC; a naive moment is taken as UTC."""
    return _formatted(moment, micro)


#: A typed model's times are formatted each time it is dumped (an object's creationTimestamp and
#: its managedFields' times, again at every reconcile): strftime took 3 % of an operator's CPU.
@functools.lru_cache(maxsize=4096)
def _formatted(moment: datetime, micro: bool) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


#: The last second ``now`` formatted, and its text: every write stamps the time, and a busy
#: server writes thousands of times a second.
_last_second: tuple[int, str] = (-1, "")


def now(*, micro: bool = False) -> str:
    """The current time as metav1.Time (or MicroTime with ``micro``)."""
    if micro:
        return format_time(datetime.now(UTC), micro=True)
    global _last_second
    second = int(time.time())
    if _last_second[0] != second:
        _last_second = (second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second)))
    return _last_second[1]


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 time (Time or MicroTime) as an aware datetime; None if it is not one. A
    datetime (a typed model's ``creation_timestamp``) is answered as it is (UTC if naive)."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
