"""metav1.Time and MicroTime as text: UTC, whatever zone a moment is given in, a naive one taken
as UTC; formats are remembered, so the same moment in another zone, or naive, must not be answered
with what an equal-looking one was formatted as."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from kubeloop.api.timestamps import format_time, parse_time

_zones = st.sampled_from([None, UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-7, minutes=-30))])


def test_a_moment_is_written_in_utc_whatever_its_zone() -> None:
    berlin = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    assert format_time(berlin) == "2024-05-01T10:00:00Z"
    assert format_time(berlin, micro=True) == "2024-05-01T10:00:00.123456Z"
    # The same wall time naive (taken as UTC), right after the zoned one was formatted.
    assert format_time(berlin.replace(tzinfo=None)) == "2024-05-01T12:00:00Z"
    assert format_time(berlin.astimezone(UTC)) == "2024-05-01T10:00:00Z"


@given(
    moment=st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30)),
    zone=_zones,
    micro=st.booleans(),
)
def test_formatting_twice_reads_back_the_moment(moment: datetime, zone: timezone | None, micro: bool) -> None:
    given_moment = moment.replace(tzinfo=zone)
    text = format_time(given_moment, micro=micro)
    assert format_time(given_moment, micro=micro) == text
    aware = given_moment if zone is not None else moment.replace(tzinfo=UTC)
    expected = aware if micro else aware.replace(microsecond=0)
    assert parse_time(text) == expected
