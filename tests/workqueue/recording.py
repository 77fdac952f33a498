"""A clock the test moves and a ``QueueMetrics`` that records what a queue reports: for the
tests that check when a queue says a key waited and worked."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import ModuleType
from unittest import mock


class FakeTime:
    """Stands in for a queue module's ``time``: ``perf_counter`` is ``now``, moved by the test."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@contextlib.contextmanager
def fake_time(module: ModuleType) -> Iterator[FakeTime]:
    clock = FakeTime()
    with mock.patch.object(module, "time", clock):
        yield clock


class RecordingMetrics:
    """Every report, in order."""

    def __init__(self) -> None:
        self.adds = 0
        self.retries = 0
        self.waited: list[float] = []
        self.worked: list[float] = []

    def added(self) -> None:
        self.adds += 1

    def handed_out(self, waited: float) -> None:
        self.waited.append(waited)

    def finished(self, worked: float) -> None:
        self.worked.append(worked)

    def retried(self) -> None:
        self.retries += 1
