"""AgentSchedules on a fake clock, against the real server: runs start at the scheduled times,
named after them (a second pass makes no other), with each concurrency policy as the CronJob
controller has it (Allow runs side by side; Forbid waits and then starts the latest missed
time; Replace deletes the running run); a late start past startingDeadlineSeconds is skipped
with an event; history beyond the limits is deleted; time zones and suspend are honoured.

The reconciler is driven step by step with a plain API client (no manager), and the runs'
phases are written by the test, so each step's outcome is exact. One test runs the platform in a
manager on a running clock: the schedule wakes itself at the minute and its run succeeds."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import agentplatform
import pytest
from agentobjects import agent, runtime, writes
from agentplatform.api.v1alpha1 import AgentRun, AgentSchedule
from agentplatform.controllers.agentschedule import SCHEDULE_LABEL, AgentScheduleReconciler, run_name

import kubeloop
from kubeloop import kinds
from kubeloop.testing import eventually


class FakeClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def at(self, moment: datetime) -> None:
        self.now = moment


@pytest.fixture
def clock() -> Iterator[FakeClock]:
    yield FakeClock(datetime.now(UTC))


def schedule(name: str, namespace: str, cron: str = "* * * * *", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "agents.kubeloop.dev/v1alpha1",
        "kind": "AgentSchedule",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"agentRef": "reporter", "schedule": cron, "task": "report", **spec},
    }


class Steps:
    """Creates a schedule, then reconciles it at chosen times."""

    def __init__(self, client: kubeloop.APIClient, namespace: str, clock: FakeClock) -> None:
        self.client, self.namespace, self.clock = client, namespace, clock
        recorder = kubeloop.EventRecorder(client, "agentschedule")
        self.reconciler = AgentScheduleReconciler(client, recorder, clock)
        self.name = ""
        self.created = datetime.now(UTC)

    async def create(self, name: str, cron: str = "* * * * *", **spec: Any) -> datetime:
        """Create the schedule; its first firing (a minute boundary after its creation)."""
        made = await self.client.create(schedule(name, self.namespace, cron, **spec))
        self.name = name
        self.created = kubeloop.timestamps.parse_time(made["metadata"]["creationTimestamp"]) or datetime.now(
            UTC
        )
        self.clock.at(self.created)
        return self.created.replace(second=0, microsecond=0) + timedelta(minutes=1)

    async def at(self, moment: datetime) -> kubeloop.Result | None:
        self.clock.at(moment)
        return await self.reconciler.reconcile(kubeloop.Request(self.namespace, self.name))

    async def runs(self) -> list[str]:
        found = await self.client.list(
            AgentRun, namespace=self.namespace, label_selector=f"{SCHEDULE_LABEL}={self.name}"
        )
        return sorted(run.metadata.name or "" for run in found if run.metadata.deletion_timestamp is None)

    def run(self, moment: datetime) -> str:
        return run_name(self.name, moment)

    async def finish(self, moment: datetime, phase: str = "Succeeded") -> None:
        await self.client.patch(
            AgentRun,
            self.run(moment),
            {"status": {"phase": phase}},
            namespace=self.namespace,
            subresource="status",
        )

    async def status(self) -> dict[str, Any]:
        found = await self.client.get(AgentSchedule, self.name, namespace=self.namespace)
        return found.status.to_dict() if found.status else {}


def utc(moment: datetime) -> str:
    return kubeloop.timestamps.format_time(moment)


async def test_forbid_waits_for_the_running_run_then_starts_the_latest_missed_time(
    client: kubeloop.APIClient, namespace: str, clock: FakeClock
) -> None:
    steps = Steps(client, namespace, clock)
    first = await steps.create("hourly-report")  # Forbid is the default
    result = await steps.at(first - timedelta(seconds=1))
    assert await steps.runs() == []
    assert result is not None and result.requeue_after == pytest.approx(1.1)
    assert (await steps.status())["nextScheduleTime"] == utc(first)

    await steps.at(first + timedelta(seconds=5))
    assert await steps.runs() == [steps.run(first)]
    run = await client.get(AgentRun, steps.run(first), namespace=namespace)
    assert run.spec.agent_ref == "reporter" and run.spec.task == "report"
    assert (run.metadata.owner_references or [])[0].kind == "AgentSchedule"
    status = await steps.status()
    assert status["active"] == [steps.run(first)] and status["lastScheduleTime"] == utc(first)
    assert status["nextScheduleTime"] == utc(first + timedelta(minutes=1))

    # A second pass at the same moment makes nothing and writes nothing.
    before = writes(client)
    await steps.at(first + timedelta(seconds=6))
    assert writes(client) == before

    # The next minute comes while the first run still runs: Forbid skips it for now.
    await steps.at(first + timedelta(minutes=1, seconds=5))
    assert await steps.runs() == [steps.run(first)]
    assert (await steps.status())["lastScheduleTime"] == utc(first)
    # Three more minutes pass and the run finishes: only the latest missed time starts.
    await steps.finish(first)
    await steps.at(first + timedelta(minutes=4, seconds=5))
    assert await steps.runs() == [steps.run(first), steps.run(first + timedelta(minutes=4))]
    status = await steps.status()
    assert status["active"] == [steps.run(first + timedelta(minutes=4))]
    assert status["lastSuccessfulTime"] == utc(first)


async def test_allow_runs_side_by_side_and_replace_deletes_the_running_run(
    client: kubeloop.APIClient, namespace: str, clock: FakeClock
) -> None:
    steps = Steps(client, namespace, clock)
    first = await steps.create("allowed", concurrencyPolicy="Allow")
    await steps.at(first + timedelta(seconds=1))
    await steps.at(first + timedelta(minutes=1, seconds=1))
    both = [steps.run(first), steps.run(first + timedelta(minutes=1))]
    assert await steps.runs() == both
    assert (await steps.status())["active"] == both

    first = await steps.create("replaced", concurrencyPolicy="Replace")
    await steps.at(first + timedelta(seconds=1))
    await steps.at(first + timedelta(minutes=1, seconds=1))
    assert await steps.runs() == [steps.run(first + timedelta(minutes=1))]
    assert (await steps.status())["active"] == [steps.run(first + timedelta(minutes=1))]


async def test_a_start_later_than_its_deadline_is_skipped_with_an_event(
    client: kubeloop.APIClient, namespace: str, clock: FakeClock
) -> None:
    steps = Steps(client, namespace, clock)
    first = await steps.create("strict", startingDeadlineSeconds=30)
    await steps.at(first + timedelta(seconds=45))
    assert await steps.runs() == []
    await steps.at(first + timedelta(minutes=1, seconds=10))  # within 30 s of the next time
    assert await steps.runs() == [steps.run(first + timedelta(minutes=1))]

    async def warned() -> None:
        events = await client.list(kinds.Event, namespace=namespace)
        reasons = {(e["reason"], e["involvedObject"]["name"]) for e in events.items}
        assert ("MissSchedule", "strict") in reasons

    await kubeloop.testing.eventually(warned, timeout=10)


async def test_finished_runs_beyond_the_history_limits_are_deleted_oldest_first(
    client: kubeloop.APIClient, namespace: str, clock: FakeClock
) -> None:
    steps = Steps(client, namespace, clock)
    first = await steps.create("kept", successfulRunsHistoryLimit=1, failedRunsHistoryLimit=1)
    times = [first + timedelta(minutes=n) for n in range(4)]
    for n, moment in enumerate(times):
        await steps.at(moment + timedelta(seconds=1))
        await steps.finish(moment, "Failed" if n == 1 else "Succeeded")
    await steps.at(times[-1] + timedelta(seconds=2))
    # the newest success and the one failure are kept
    assert await steps.runs() == [steps.run(times[1]), steps.run(times[3])]


async def test_time_zones_and_suspend(client: kubeloop.APIClient, namespace: str, clock: FakeClock) -> None:
    steps = Steps(client, namespace, clock)
    await steps.create("tokyo-morning", "0 9 * * *", timeZone="Asia/Tokyo")
    await steps.at(steps.created)
    midnight_utc = steps.created.replace(hour=0, minute=0, second=0, microsecond=0)
    expected = midnight_utc if midnight_utc > steps.created else midnight_utc + timedelta(days=1)
    assert (await steps.status())["nextScheduleTime"] == utc(expected)  # 09:00 JST is 00:00 UTC

    first = await steps.create("paused", suspend=True)
    result = await steps.at(first + timedelta(minutes=3))
    assert await steps.runs() == [] and result is None
    assert "nextScheduleTime" not in await steps.status()
    await client.patch(AgentSchedule, "paused", {"spec": {"suspend": False}}, namespace=namespace)
    await steps.at(first + timedelta(minutes=3, seconds=1))
    assert await steps.runs() == [steps.run(first + timedelta(minutes=3))]


async def test_the_manager_fires_a_schedule_on_a_running_clock(
    client: kubeloop.APIClient, namespace: str
) -> None:
    """End to end in a manager, with a clock that runs (the system's, set ahead to two seconds
    before a minute): no pass is driven by the test, the reconciler's requeue_after wakes it at the
    minute, the run starts, runs and succeeds, and the schedule's status follows."""
    now = datetime.now(UTC)
    if now.second >= 55:  # keep the schedule's creation and the shifted clock in one minute
        await asyncio.sleep(61 - now.second)
        now = datetime.now(UTC)
    ahead = now.replace(second=58, microsecond=0) - now
    firing = now.replace(second=0, microsecond=0) + timedelta(minutes=1)

    manager = kubeloop.Manager(client)
    agentplatform.setup(manager, clock=lambda: datetime.now(UTC) + ahead)
    async with manager:
        await client.create(runtime(f"{namespace}-rt"))
        await client.create(agent("reporter", namespace, f"{namespace}-rt"))
        await client.create(schedule("minutely", namespace))

        async def succeeded() -> dict[str, Any]:
            found = await client.get(AgentSchedule, "minutely", namespace=namespace)
            status = found.status.to_dict() if found.status else {}
            assert status.get("lastSuccessfulTime") == utc(firing), status
            return status

        status = await eventually(succeeded, timeout=20)
        assert status["lastScheduleTime"] == utc(firing) and not status.get("active")
        assert status["nextScheduleTime"] == utc(firing + timedelta(minutes=1))
        runs = await client.list(AgentRun, namespace=namespace)
        assert [run.metadata.name for run in runs] == [run_name("minutely", firing)]
        run = await client.get(AgentRun, run_name("minutely", firing), namespace=namespace)
        assert run.status is not None and run.status.phase == "Succeeded"
        assert manager.controllers["agentschedule"].results.get("error", 0) == 0
