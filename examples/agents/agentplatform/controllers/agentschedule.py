"""AgentSchedule → AgentRuns at the times a cron schedule names, the way the CronJob controller
makes Jobs.

At each time ``spec.schedule`` names (five cron fields, in ``spec.timeZone``, UTC without one)
the schedule makes the run ``<schedule>-<scheduled time in minutes since the epoch>``, labelled
with the schedule's name, annotated with the time and owned by the schedule: a second pass over
the same time finds the run it made and makes no other. After an outage only the latest missed
time runs (with a warning past 100 missed), and none more than ``startingDeadlineSeconds`` late
(a MissSchedule event instead). ``concurrencyPolicy``: Allow starts a run while others run;
Forbid (the default) waits until none runs, then starts the latest missed time; Replace deletes
the running ones first. A suspended schedule starts nothing. Finished runs beyond the history
limits are deleted, oldest first. Status: the running runs (``active``), the last scheduled
time, the last successful run's time and the next scheduled time.

The clock is injectable (``clock``), so tests step through schedules without waiting.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import kubeloop
from kubeloop import cron

from ..api.v1alpha1 import GROUP, VERSION, AgentRun, AgentSchedule
from .builders import write_status

Clock = Callable[[], datetime]
SCHEDULE_LABEL = f"{GROUP}/schedule"
SCHEDULED_AT = f"{GROUP}/scheduled-at"
#: How many missed times upstream's CronJob controller tolerates before it warns.
TOO_MANY_MISSED = 100
#: The run's annotations a schedule passes on (the simulation's steering ones, as for runs).
RUN_ANNOTATION_PREFIX = "kubeloop.dev/"


def system_clock() -> datetime:
    return datetime.now(UTC)


def run_name(schedule: str, scheduled: datetime) -> str:
    """The run for ``scheduled``: the schedule's name and the time in minutes since the epoch."""
    return f"{schedule}-{int(scheduled.timestamp()) // 60}"


@dataclass
class Plan:
    """What one pass over a schedule does (``plan`` decides it from the objects alone)."""

    #: The scheduled time to start a run for, if one is due.
    start: datetime | None = None
    #: Runs to delete: replaced running ones, and history beyond the limits.
    delete: list[AgentRun] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    #: Seconds until the next scheduled time (None: never, or suspended).
    requeue_after: float | None = None
    #: Warnings to record: (reason, message).
    warnings: list[tuple[str, str]] = field(default_factory=list)


def _finished(run: AgentRun) -> str | None:
    phase = run.status.phase if run.status else None
    return phase if phase in ("Succeeded", "Failed") else None


def _scheduled(run: AgentRun) -> str:
    return (run.metadata.annotations or {}).get(SCHEDULED_AT) or str(run.metadata.creation_timestamp or "")


def plan(schedule: AgentSchedule, runs: list[AgentRun], now: datetime) -> Plan:
    """What to do for ``schedule``, whose runs are ``runs``, at ``now``."""
    spec = schedule.spec
    out = Plan()
    status = schedule.status.to_dict() if schedule.status else {}
    running = [run for run in runs if _finished(run) is None and run.metadata.deletion_timestamp is None]
    succeeded = [run for run in runs if _finished(run) == "Succeeded"]
    if succeeded:
        latest = max(_scheduled(run) for run in succeeded)
        status["lastSuccessfulTime"] = max(latest, str(status.get("lastSuccessfulTime") or ""))
    for phase, limit in (
        ("Succeeded", spec.successful_runs_history_limit),
        ("Failed", spec.failed_runs_history_limit),
    ):
        finished = sorted((run for run in runs if _finished(run) == phase), key=_scheduled)
        out.delete.extend(finished[: max(0, len(finished) - limit)])

    try:
        parsed = cron.parse(spec.schedule)
        zone = cron.time_zone(spec.time_zone) if spec.time_zone else UTC
    except cron.ScheduleError as exc:
        out.warnings.append(("InvalidSchedule", f"unparseable schedule {spec.schedule!r}: {exc}"))
        out.status = _status(status, running, None)
        return out
    local_now = now.astimezone(zone)
    upcoming = None if spec.suspend else parsed.next_after(local_now)
    if upcoming is not None:
        out.requeue_after = (upcoming - local_now).total_seconds() + 0.1
    out.status = _status(status, running, upcoming)
    if spec.suspend:
        return out
    created = kubeloop.timestamps.parse_time(schedule.metadata.creation_timestamp) or now
    earliest = kubeloop.timestamps.parse_time(status.get("lastScheduleTime")) or created
    deadline = spec.starting_deadline_seconds
    due, missed = parsed.most_recent(earliest.astimezone(zone), local_now)
    if due is None:
        return out
    if missed > TOO_MANY_MISSED:
        out.warnings.append(
            ("TooManyMissedTimes", f"too many missed start times ({missed}); only the latest is started")
        )
    if deadline is not None and due + timedelta(seconds=deadline) < local_now:
        missed_at = kubeloop.timestamps.format_time(due.astimezone(UTC))
        out.warnings.append(("MissSchedule", f"missed scheduled time to start a run: {missed_at}"))
        return out
    name = run_name(schedule.metadata.name or "", due)
    if any(run.metadata.name == name for run in runs):  # started by an earlier pass
        out.status["lastScheduleTime"] = kubeloop.timestamps.format_time(due.astimezone(UTC))
        return out
    if spec.concurrency_policy == "Forbid" and running:
        return out  # the time is not taken: it runs once nothing does (if still in its deadline)
    if spec.concurrency_policy == "Replace":
        out.delete.extend(running)
        running = []
    out.start = due
    out.status = _status(status, running, upcoming)
    out.status["lastScheduleTime"] = kubeloop.timestamps.format_time(due.astimezone(UTC))
    return out


def _status(status: dict[str, Any], running: list[AgentRun], upcoming: datetime | None) -> dict[str, Any]:
    out = dict(status)
    out["active"] = sorted(run.metadata.name or "" for run in running) or None
    out["nextScheduleTime"] = kubeloop.timestamps.format_time(upcoming.astimezone(UTC)) if upcoming else None
    return out


class AgentScheduleReconciler:
    """Reconciles AgentSchedules with ``client`` (the manager's, or any) at the ``clock``'s time."""

    def __init__(
        self, client: kubeloop.Client, recorder: kubeloop.EventRecorder, clock: Clock = system_clock
    ):
        self.client = client
        self.recorder = recorder
        self.clock = clock

    def setup(self, manager: kubeloop.Manager) -> None:
        kubeloop.Builder(manager).named("agentschedule").for_(AgentSchedule).owns(AgentRun).complete(
            self.reconcile
        )

    async def reconcile(self, request: kubeloop.Request) -> kubeloop.Result | None:
        try:
            schedule = await self.client.get(AgentSchedule, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return None  # its runs go with it
        if schedule.metadata.deletion_timestamp is not None:
            return None
        owned = await self.client.list(
            AgentRun, namespace=request.namespace, label_selector=f"{SCHEDULE_LABEL}={request.name}"
        )
        runs = [run for run in owned if _controlled_by(run, schedule)]
        decided = plan(schedule, runs, self.clock())
        for reason, message in decided.warnings:
            self.recorder.event(schedule, kubeloop.WARNING, reason, message)
        for run in decided.delete:
            with contextlib.suppress(kubeloop.errors.NotFound):
                await self.client.delete(run, propagation_policy="Background")
        if decided.start is not None:
            new_run = self._run(schedule, decided.start)
            name = new_run["metadata"]["name"]
            try:
                await self.client.create(new_run)
                self.recorder.event(schedule, kubeloop.NORMAL, "SuccessfulCreate", f"created AgentRun {name}")
            except kubeloop.errors.AlreadyExists:  # made by an earlier pass
                pass
            except (kubeloop.errors.Invalid, kubeloop.errors.Forbidden) as refused:  # a policy, say
                # The schedule's to fix: said once per time, not retried; the next time comes.
                self.recorder.event(schedule, kubeloop.WARNING, "FailedCreate", f"AgentRun {name}: {refused}")
                name = ""
            if name:
                decided.status["active"] = sorted({*(decided.status.get("active") or ()), name})
        await write_status(self.client, schedule, decided.status)
        return (
            kubeloop.Result(requeue_after=decided.requeue_after)
            if decided.requeue_after is not None
            else None
        )

    @staticmethod
    def _run(schedule: AgentSchedule, scheduled: datetime) -> kubeloop.Obj:
        name = schedule.metadata.name or ""
        annotations = {
            key: value
            for key, value in (schedule.metadata.annotations or {}).items()
            if key.startswith(RUN_ANNOTATION_PREFIX)
        }
        annotations[SCHEDULED_AT] = kubeloop.timestamps.format_time(scheduled.astimezone(UTC))
        run: kubeloop.Obj = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "AgentRun",
            "metadata": {
                "name": run_name(name, scheduled),
                "namespace": schedule.metadata.namespace,
                "labels": {SCHEDULE_LABEL: name},
                "annotations": annotations,
            },
            "spec": {"agentRef": schedule.spec.agent_ref, "task": schedule.spec.task},
        }
        kubeloop.set_controller_reference(schedule, run)
        return run


def _controlled_by(run: AgentRun, schedule: AgentSchedule) -> bool:
    return any(
        ref.controller and ref.uid == schedule.metadata.uid for ref in run.metadata.owner_references or ()
    )


def setup(manager: kubeloop.Manager, clock: Clock = system_clock) -> AgentScheduleReconciler:
    reconciler = AgentScheduleReconciler(manager.client, manager.event_recorder("agentschedule"), clock)
    reconciler.setup(manager)
    return reconciler
