"""Cron schedules as CronJobs write them (the standard five fields Kubernetes parses).

``minute hour day-of-month month day-of-week``; each field is ``*`` (``?`` too for the days), a
number, a name (``JAN``–``DEC``, ``SUN``–``SAT``), a range ``a-b``, a step ``*/n``, ``a-b/n`` or
``a/n`` (from ``a`` to the field's end), or a comma list of these. When both day fields are
restricted a day matching either runs, otherwise both must match. Errors are worded as the parser Kubernetes uses (robfig/cron) words them. The descriptors ``@yearly``
(``@annually``), ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``), ``@hourly`` and
``@every <duration>`` (Go's duration syntax, whole seconds) are accepted too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
#: Go's longest duration (2^63 - 1 nanoseconds, about 292 years); longer ones do not parse.
_MAX_DURATION_SECONDS = (2**63 - 1) / 1e9
#: How far ahead a schedule is searched before it is taken to never fire (Feb 30th).
_HORIZON_YEARS = 5


class ScheduleError(ValueError):
    """A schedule that does not parse; the message says which part and why."""


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    names_from: int = 0


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day of month", 1, 31),
    _Field("month", 1, 12, _MONTHS, 1),
    _Field("day of week", 0, 6, _DAYS, 0),
)


@dataclass(frozen=True)
class CronSchedule:
    """A parsed schedule: the values each field allows, or a constant delay (``@every``)."""

    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    days: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    weekdays: frozenset[int] = frozenset()
    #: Whether a day field was ``*``/``?`` (then both day fields must match).
    any_day: bool = True
    any_weekday: bool = True
    every: timedelta | None = None

    def next_after(self, moment: datetime) -> datetime | None:
        """The first time strictly after ``moment`` (an aware datetime) the schedule fires, in
        ``moment``'s time zone; None if it never does (``0 0 30 2 *``)."""
        if self.every is not None:
            return moment.replace(microsecond=0) + self.every
        tz = moment.tzinfo
        local = moment.replace(second=0, microsecond=0, tzinfo=None) + timedelta(minutes=1)
        limit = local.year + _HORIZON_YEARS
        while local.year <= limit:
            if local.month not in self.months:
                local = (local.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
                continue
            if not self._day_matches(local):
                local = local.replace(hour=0, minute=0) + timedelta(days=1)
                continue
            if local.hour not in self.hours:
                local = local.replace(minute=0) + timedelta(hours=1)
                continue
            if local.minute not in self.minutes:
                local += timedelta(minutes=1)
                continue
            return local.replace(tzinfo=tz)
        return None

    def most_recent(self, earliest: datetime, now: datetime) -> tuple[datetime | None, int]:
        """The latest time in (``earliest``, ``now``] the schedule fires at (None: it does not),
        and about how many times it fires in that span (upstream's ``mostRecentScheduleTime``:
        the count is estimated from the first interval, so a long outage costs no walk through
        every missed minute). Times are in ``earliest``'s zone."""
        first = self.next_after(earliest)
        if first is None or first > now:
            return None, 0
        second = self.next_after(first)
        if second is None or second > now:
            return first, 1
        gap = second - first
        missed = max(2, int((now - first) / gap) + 1)
        back = gap
        while True:
            # The latest firing is after now - back once back spans the widest gap: widen it
            # until a firing is found (irregular schedules, "0 0 * * 1,2", have wider gaps).
            moment = max(now.astimezone(first.tzinfo) - back, earliest)
            latest = None
            while (following := self.next_after(moment)) is not None and following <= now:
                latest = moment = following
            if latest is not None:
                return latest, missed
            back *= 2

    def _day_matches(self, day: datetime) -> bool:
        by_date = day.day in self.days
        by_weekday = (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return by_date and by_weekday
        return by_date or by_weekday


def time_zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` (a CronJob's ``timeZone``), as Go's ``time.LoadLocation``
    finds it; :class:`ScheduleError` ("unknown time zone X") for anything else — a directory
    (``Europe``), a path, a name too long for the file system."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(f"unknown time zone {name}") from None


def parse(schedule: str) -> CronSchedule:
    """Parse ``schedule``; :class:`ScheduleError` names what is wrong."""
    text = schedule.strip()
    if text.startswith(("TZ=", "CRON_TZ=")):
        # A zone prefix parses (the CronJob's validation refuses it: timeZone says where).
        text = text.partition(" ")[2].strip()
    if text.startswith("@every "):
        return CronSchedule(every=_duration(text[len("@every ") :].strip()))
    if text.startswith("@"):
        if text not in _DESCRIPTORS:
            raise ScheduleError(f"unrecognized descriptor: {text}")
        text = _DESCRIPTORS[text]
    parts = text.split()
    if len(parts) != len(_FIELDS):
        raise ScheduleError(f"expected exactly 5 fields, found {len(parts)}: {text}")
    values = [_parse_field(part, field) for part, field in zip(parts, _FIELDS, strict=True)]
    return CronSchedule(
        minutes=values[0],
        hours=values[1],
        days=values[2],
        months=values[3],
        weekdays=values[4],
        any_day=parts[2][0] in "*?",
        any_weekday=parts[4][0] in "*?",
    )


def _parse_field(text: str, field: _Field) -> frozenset[int]:
    allowed: set[int] = set()
    for item in text.split(","):
        range_part, _, step_part = item.partition("/")
        step = 1
        if step_part:
            if not step_part.isdigit():
                raise ScheduleError(f"failed to parse int from {step_part}: invalid syntax")
            if int(step_part) == 0:
                raise ScheduleError(f"step of range should be a positive number: {item}")
            step = int(step_part)
        if range_part in ("*", "?"):
            low, high = field.low, field.high
        elif "-" in range_part:
            first, _, last = range_part.partition("-")
            low, high = _value(first, field), _value(last, field)
        else:
            low = _value(range_part, field)
            high = field.high if step_part else low
        if low < field.low:
            raise ScheduleError(f"beginning of range ({low}) below minimum ({field.low}): {item}")
        if high > field.high:
            raise ScheduleError(f"end of range ({high}) above maximum ({field.high}): {item}")
        if low > high:
            raise ScheduleError(f"beginning of range ({low}) beyond end of range ({high}): {item}")
        allowed.update(range(low, high + 1, step))
    return frozenset(allowed)


def _value(text: str, field: _Field) -> int:
    upper = text.upper()
    if upper in field.names:
        return field.names.index(upper) + field.names_from
    if not text.isdigit():
        raise ScheduleError(f"failed to parse int from {text}: invalid syntax")
    return int(text)


def _duration(text: str) -> timedelta:
    """Go's ``time.ParseDuration`` (``1h30m``, ``90s``), rounded down to whole seconds, at least one."""
    position, seconds = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            break
        seconds += float(match[1]) * _UNIT_SECONDS[match[2]]
        position = match.end()
    if not text or position != len(text) or seconds > _MAX_DURATION_SECONDS:
        raise ScheduleError(f"failed to parse duration @every {text}")
    return timedelta(seconds=max(1, int(seconds)))
