"""The CronJob controller: a Job at each time the schedule names, and the history it keeps.

A reconciler of CronJobs that owns Jobs. At each scheduled time (``spec.schedule`` in
``spec.timeZone``, UTC without one) since the last it ran, it makes the Job
``<cronjob>-<scheduled time in minutes>`` from ``jobTemplate``, annotated with
``batch.kubernetes.io/cronjob-scheduled-timestamp`` and owned by the CronJob; only the latest
missed time runs, and none that is more than ``startingDeadlineSeconds`` late. With
``concurrencyPolicy`` Forbid a time is skipped while a Job runs; Replace deletes the running
ones first. A suspended CronJob makes none. The status lists the running Jobs (``active``) with
``lastScheduleTime`` and ``lastSuccessfulTime``; finished Jobs beyond
``successfulJobsHistoryLimit`` and ``failedJobsHistoryLimit`` are deleted, oldest first.
:func:`plan` decides all this from the objects alone; the reconciler carries it out.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from kubeloop import errors, kinds
from kubeloop.api import timestamps
from kubeloop.api.cronschedule import ScheduleError, parse, time_zone
from kubeloop.api.object import Obj
from kubeloop.controller.reconcile import Request, Result
from kubeloop.controllermanager.podcontrol import controlled_by
from kubeloop.manager.builder import Builder
from kubeloop.manager.manager import Manager

log = logging.getLogger("kubeloop.controllermanager.cronjobs")

CRONJOB = kinds.CronJob
JOB = kinds.Job
SCHEDULED_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"


@dataclass
class Plan:
    """What one reconcile of a CronJob does."""

    #: The Job to create (None: none is due).
    create: Obj | None = None
    #: Jobs to delete: replaced running ones and history beyond the limits.
    delete: list[Obj] = field(default_factory=list)
    #: The status to write.
    status: dict[str, Any] = field(default_factory=dict)
    #: When to look again (seconds), None: at the next event.
    requeue_after: float | None = None


def _finished(job: Obj) -> str | None:
    """``Complete`` or ``Failed`` once the Job has finished, else None."""
    for condition in (job.get("status") or {}).get("conditions") or ():
        if (
            isinstance(condition, dict)
            and condition.get("status") == "True"
            and condition.get("type") in ("Complete", "Failed")
        ):
            return str(condition["type"])
    return None


def _reference(job: Obj) -> Obj:
    meta = job.get("metadata") or {}
    return {
        "kind": "Job",
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "apiVersion": "batch/v1",
        "resourceVersion": meta.get("resourceVersion"),
    }


def _started(job: Obj) -> str:
    return str(
        (job.get("status") or {}).get("startTime") or (job.get("metadata") or {}).get("creationTimestamp")
    )


def job_name(cronjob_name: str, scheduled: datetime) -> str:
    """Upstream's name of the Job for ``scheduled``: the time in minutes since the epoch."""
    return f"{cronjob_name}-{int(scheduled.timestamp()) // 60}"


def plan(cronjob: Obj, jobs: list[Obj], now: datetime) -> Plan:
    """What to do for ``cronjob`` whose Jobs are ``jobs`` (the ones it controls), at ``now``."""
    meta = cronjob.get("metadata") or {}
    spec = cronjob.get("spec") or {}
    status = dict(cronjob.get("status") or {})
    out = Plan()
    running = [
        job
        for job in jobs
        if _finished(job) is None and not (job.get("metadata") or {}).get("deletionTimestamp")
    ]
    succeeded = [job for job in jobs if _finished(job) == "Complete"]
    failed = [job for job in jobs if _finished(job) == "Failed"]
    if succeeded:
        latest = max(
            str((job.get("status") or {}).get("completionTime") or _started(job)) for job in succeeded
        )
        if latest > str(status.get("lastSuccessfulTime") or ""):
            status["lastSuccessfulTime"] = latest
    for finished, limit in (
        (succeeded, spec.get("successfulJobsHistoryLimit", 3)),
        (failed, spec.get("failedJobsHistoryLimit", 1)),
    ):
        if limit is not None:
            out.delete.extend(sorted(finished, key=_started)[: max(0, len(finished) - int(limit))])

    try:
        schedule = parse(str(spec.get("schedule") or ""))
        zone = time_zone(str(spec["timeZone"])) if spec.get("timeZone") else UTC
    except ScheduleError as exc:
        log.warning("cronjob %s/%s: unusable schedule: %s", meta.get("namespace"), meta.get("name"), exc)
        out.status = _status(status, running)
        return out
    since = timestamps.parse_time(status.get("lastScheduleTime") or meta.get("creationTimestamp")) or now
    deadline = spec.get("startingDeadlineSeconds")
    if deadline is not None:  # nothing older than the deadline can run: no need to look further back
        since = max(since, now - timedelta(seconds=int(deadline)))
    local_now = now.astimezone(zone)
    due, _ = schedule.most_recent(since.astimezone(zone), local_now)
    upcoming = schedule.next_after(local_now)
    if upcoming is not None:
        out.requeue_after = max(0.0, (upcoming - local_now).total_seconds()) + 0.05
    if spec.get("suspend") or due is None:
        out.status = _status(status, running)
        return out
    if deadline is not None and due < local_now - timedelta(seconds=int(deadline)):
        log.info("cronjob %s/%s missed its start at %s", meta.get("namespace"), meta.get("name"), due)
        out.status = _status(status, running)
        return out
    policy = spec.get("concurrencyPolicy") or "Allow"
    if policy == "Forbid" and running:
        out.status = _status(status, running)
        return out
    if policy == "Replace":
        out.delete.extend(running)
        running = []
    name = job_name(str(meta.get("name")), due)
    template = spec.get("jobTemplate") or {}
    template_meta = template.get("metadata") or {}
    out.create = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace"),
            "labels": dict(template_meta.get("labels") or {}),
            "annotations": {
                **(template_meta.get("annotations") or {}),
                SCHEDULED_ANNOTATION: _rfc3339(due),
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "CronJob",
                    "name": meta.get("name"),
                    "uid": meta.get("uid"),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": template.get("spec") or {},
    }
    status["lastScheduleTime"] = timestamps.format_time(due.astimezone(UTC))
    out.status = _status(status, running)
    return out


def _rfc3339(moment: datetime) -> str:
    """Go's RFC 3339 form of a time in its own zone: ``Z`` for UTC, else the offset."""
    text = moment.replace(microsecond=0).isoformat()
    return text.removesuffix("+00:00") + "Z" if moment.utcoffset() == timedelta(0) else text


def _status(status: dict[str, Any], running: list[Obj]) -> dict[str, Any]:
    out = {key: value for key, value in status.items() if key != "active"}
    if running:
        out["active"] = [_reference(job) for job in sorted(running, key=_started)]
    return out


class CronJobController:
    """Registers its reconciler with ``manager`` (a controller named ``cronjob``)."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.client = manager.api_reader
        Builder(manager).named("cronjob").for_(CRONJOB).owns(JOB).with_options(
            max_concurrent_reconciles=2
        ).complete(self.reconcile)

    async def reconcile(self, request: Request) -> Result | None:
        try:
            cronjob = await self.manager.client.get(CRONJOB, request.name, namespace=request.namespace)
        except errors.NotFound:
            return None
        meta = cronjob.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return None
        uid = str(meta.get("uid"))
        jobs = [
            job
            for job in (await self.manager.client.list(JOB, namespace=request.namespace)).items
            if controlled_by(job, uid)
        ]
        decided = plan(cronjob, jobs, datetime.now(UTC))
        for job in decided.delete:
            job_meta = job.get("metadata") or {}
            with contextlib.suppress(errors.NotFound):
                await self.client.delete(
                    JOB,
                    str(job_meta.get("name")),
                    namespace=request.namespace,
                    propagation_policy="Background",
                )
        status = decided.status
        if decided.create is not None:
            try:
                created = await self.client.create(decided.create)
            except errors.AlreadyExists:
                created = None  # made by an earlier reconcile; the cache will show it
            if created is not None:
                status["active"] = [*status.get("active", []), _reference(created)]
        current = cronjob.get("status") or {}
        if current != status:
            patch = {**{key: None for key in current if key not in status}, **status}
            with contextlib.suppress(errors.NotFound):
                await self.client.patch(
                    CRONJOB,
                    request.name,
                    {"status": patch},
                    namespace=request.namespace,
                    subresource="status",
                )
        return Result(requeue_after=decided.requeue_after) if decided.requeue_after is not None else None
