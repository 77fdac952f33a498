"""CronJob schedules: the five-field syntax and descriptors parse as Kubernetes' parser does, and
the next run is the first matching minute (checked against a minute-by-minute search)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.api.cronschedule import CronSchedule, ScheduleError, parse

FIELD_BOUNDS = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 6)]


@st.composite
def field_items(draw: st.DrawFn, low: int, high: int) -> tuple[str, set[int]]:
    """One item of a field (value, range, step) and the values it allows, computed here."""
    kind = draw(st.sampled_from(["star", "value", "range", "step", "range-step", "start-step"]))
    a = draw(st.integers(low, high))
    b = draw(st.integers(a, high))
    step = draw(st.integers(1, high - low + 1))
    if kind == "star":
        return "*", set(range(low, high + 1))
    if kind == "value":
        return str(a), {a}
    if kind == "range":
        return f"{a}-{b}", set(range(a, b + 1))
    if kind == "step":
        return f"*/{step}", set(range(low, high + 1, step))
    if kind == "range-step":
        return f"{a}-{b}/{step}", set(range(a, b + 1, step))
    return f"{a}/{step}", set(range(a, high + 1, step))


@st.composite
def fields(draw: st.DrawFn, low: int, high: int) -> tuple[str, set[int]]:
    items = draw(st.lists(field_items(low, high), min_size=1, max_size=3))
    return ",".join(text for text, _ in items), set().union(*(values for _, values in items))


schedules = st.tuples(*(fields(low, high) for low, high in FIELD_BOUNDS))
moments = st.datetimes(datetime(2020, 1, 1), datetime(2030, 12, 31), timezones=st.just(UTC))


def matches(schedule: CronSchedule, moment: datetime) -> bool:
    day = moment.day in schedule.days
    weekday = (moment.isoweekday() % 7) in schedule.weekdays
    days = (day and weekday) if (schedule.any_day or schedule.any_weekday) else (day or weekday)
    return (
        moment.minute in schedule.minutes
        and moment.hour in schedule.hours
        and moment.month in schedule.months
        and days
    )


@given(schedules)
def test_every_field_allows_what_its_items_say(parts: tuple[tuple[str, set[int]], ...]) -> None:
    parsed = parse(" ".join(text for text, _ in parts))
    expected = [values for _, values in parts]
    assert [parsed.minutes, parsed.hours, parsed.days, parsed.months, parsed.weekdays] == expected


@settings(max_examples=150, deadline=None)
@given(schedules, moments)
def test_the_next_run_is_the_first_matching_minute(
    parts: tuple[tuple[str, set[int]], ...], moment: datetime
) -> None:
    schedule = parse(" ".join(text for text, _ in parts))
    following = schedule.next_after(moment)
    if following is None:  # e.g. only February 30th
        return
    assert following > moment and following.second == 0 and following.tzinfo == moment.tzinfo
    assert matches(schedule, following)
    # No minute in between matches (searched up to two days, past that the fields are checked).
    probe = moment.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while probe < following and probe < moment + timedelta(days=2):
        assert not matches(schedule, probe), probe
        probe += timedelta(minutes=1)


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        ("*/15 * * * *", "2025-03-01T10:07:30", "2025-03-01T10:15:00"),
        ("0 9 * * MON-FRI", "2025-03-01T10:00:00", "2025-03-03T09:00:00"),  # Saturday → Monday
        ("0 0 29 2 *", "2025-03-01T00:00:00", "2028-02-29T00:00:00"),
        # Both day fields restricted: the 13th *or* a Friday.
        ("0 0 13 * 5", "2025-06-01T00:00:00", "2025-06-06T00:00:00"),
        ("0 0 13 * *", "2025-06-01T00:00:00", "2025-06-13T00:00:00"),
        ("0 0 ? * sun", "2025-06-01T00:00:00", "2025-06-08T00:00:00"),
        ("30 23 31 dec *", "2025-06-01T00:00:00", "2025-12-31T23:30:00"),
        ("@hourly", "2025-06-01T10:59:59", "2025-06-01T11:00:00"),
        ("@daily", "2025-06-01T10:00:00", "2025-06-02T00:00:00"),
        ("@weekly", "2025-06-01T10:00:00", "2025-06-08T00:00:00"),
        ("@monthly", "2025-06-01T10:00:00", "2025-07-01T00:00:00"),
        ("@yearly", "2025-06-01T10:00:00", "2026-01-01T00:00:00"),
        ("@every 90s", "2025-06-01T10:00:00.500", "2025-06-01T10:01:30"),
        ("@every 1h30m", "2025-06-01T10:00:00", "2025-06-01T11:30:00"),
        ("@every 500ms", "2025-06-01T10:00:00", "2025-06-01T10:00:01"),
    ],
)
def test_known_schedules(schedule: str, after: str, expected: str) -> None:
    moment = datetime.fromisoformat(after).replace(tzinfo=UTC)
    assert parse(schedule).next_after(moment) == datetime.fromisoformat(expected).replace(tzinfo=UTC)


def test_a_schedule_runs_in_its_time_zone() -> None:
    paris = ZoneInfo("Europe/Paris")
    winter = datetime(2025, 1, 10, 12, 0, tzinfo=UTC).astimezone(paris)
    assert parse("0 9 * * *").next_after(winter) == datetime(2025, 1, 11, 9, 0, tzinfo=paris)
    assert parse("0 9 * * *").next_after(winter).astimezone(UTC).hour == 8  # type: ignore[union-attr]


def test_a_schedule_that_never_fires_has_no_next_run() -> None:
    assert parse("0 0 30 2 *").next_after(datetime(2025, 1, 1, tzinfo=UTC)) is None


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("", "expected exactly 5 fields, found 0: "),
        ("* * * *", "expected exactly 5 fields, found 4: * * * *"),
        ("60 * * * *", "end of range (60) above maximum (59): 60"),
        ("* 24 * * *", "end of range (24) above maximum (23): 24"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("* * * 13 *", "end of range (13) above maximum (12): 13"),
        ("* * * * 7", "end of range (7) above maximum (6): 7"),
        ("5-2 * * * *", "beginning of range (5) beyond end of range (2): 5-2"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("x * * * *", "failed to parse int from x: invalid syntax"),
        ("* * * FOO *", "failed to parse int from FOO: invalid syntax"),
        ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        ("@every", "unrecognized descriptor: @every"),
        ("@every 5 minutes", "failed to parse duration @every 5 minutes"),
        # Longer than Go's longest duration (292 years): refused, not an overflow.
        ("@every 99999999999999999h", "failed to parse duration @every 99999999999999999h"),
        ("@every 2562048h", "failed to parse duration @every 2562048h"),
    ],
)
def test_bad_schedules_say_what_is_wrong(schedule: str, message: str) -> None:
    with pytest.raises(ScheduleError) as raised:
        parse(schedule)
    assert str(raised.value) == message


@given(st.text(max_size=40))
def test_any_text_parses_or_raises_a_schedule_error(text: str) -> None:
    try:
        parsed = parse(text)
    except ScheduleError:
        return
    parsed.next_after(datetime(2025, 1, 1, tzinfo=UTC))


@given(schedules, moments, st.integers(0, 60 * 24 * 40))
@settings(max_examples=150, deadline=None)
def test_the_most_recent_run_is_the_last_one_a_walk_finds(
    parts: tuple[tuple[str, set[int]], ...], earliest: datetime, minutes: int
) -> None:
    """``most_recent`` (which estimates and jumps) finds the firing a minute-by-minute walk from
    ``earliest`` to ``now`` finds last."""
    schedule = parse(" ".join(text for text, _ in parts))
    now = earliest + timedelta(minutes=minutes, seconds=17)
    walked, count = None, 0
    moment = earliest
    while (following := schedule.next_after(moment)) is not None and following <= now:
        walked, moment, count = following, following, count + 1
        if count > 2_000:
            break
    if count > 2_000:
        assert schedule.most_recent(earliest, now)[0] is not None
        return
    found, missed = schedule.most_recent(earliest, now)
    assert found == walked
    assert (missed == 0) == (walked is None) and (missed == 1) == (count == 1)


def test_a_long_outage_is_not_walked_minute_by_minute() -> None:
    """A schedule every minute, last run two years ago: the latest firing and roughly how many
    were missed, at once (upstream warns past 100 missed runs)."""
    schedule = parse("* * * * *")
    earliest = datetime(2024, 1, 1, tzinfo=UTC)
    now = datetime(2026, 1, 1, 12, 30, 40, tzinfo=UTC)
    found, missed = schedule.most_recent(earliest, now)
    assert found == datetime(2026, 1, 1, 12, 30, tzinfo=UTC)
    assert missed == int((now - earliest).total_seconds() // 60)
    weekly = parse("0 0 * * 1,2")  # irregular gaps: one day, then six
    found, _ = weekly.most_recent(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 3, 1, tzinfo=UTC))
    assert found == datetime(2026, 2, 24, tzinfo=UTC)  # a Tuesday
