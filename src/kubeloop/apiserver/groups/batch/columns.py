"""batch/v1 kinds' columns: Jobs and CronJobs."""

from __future__ import annotations

import datetime

from kubeloop.api.timestamps import parse_time
from kubeloop.apiserver.printing.cells import (
    BATCH,
    Cell,
    Column,
    Obj,
    age_column,
    api_doc,
    bool_ptr,
    field_column,
    has_condition,
    human_duration,
    int_at,
    list_at,
    name_column,
    since_text,
    template_columns,
    value_at,
)


def _job_status(job: Obj, now: datetime.datetime) -> Cell:
    if has_condition(job, "status.conditions", "Complete"):
        return "Complete"
    if has_condition(job, "status.conditions", "Failed"):
        return "Failed"
    if value_at(job, "metadata.deletionTimestamp"):
        return "Terminating"
    if has_condition(job, "status.conditions", "Suspended"):
        return "Suspended"
    if has_condition(job, "status.conditions", "FailureTarget"):
        return "FailureTarget"
    return "Running"


def _job_completions(job: Obj, now: datetime.datetime) -> Cell:
    succeeded = int_at(job, "status.succeeded")
    if value_at(job, "spec.completions") is not None:
        return f"{succeeded}/{int_at(job, 'spec.completions')}"
    parallelism = int_at(job, "spec.parallelism")
    if parallelism > 1:
        return f"{succeeded}/1 of {parallelism}"
    return f"{succeeded}/1"


def _job_duration(job: Obj, now: datetime.datetime) -> Cell:
    start = parse_time(value_at(job, "status.startTime"))
    if start is None:
        return ""
    end = parse_time(value_at(job, "status.completionTime")) or now
    return human_duration((end - start).total_seconds())


def _last_schedule(cronjob: Obj, now: datetime.datetime) -> Cell:
    value = value_at(cronjob, "status.lastScheduleTime")
    return "<none>" if value is None else since_text(value, now)


def job_columns() -> list[Column]:
    return [
        name_column(),
        Column("Status", "string", _job_status, "Status of the job."),
        Column("Completions", "string", _job_completions, api_doc(BATCH + "JobStatus", "succeeded")),
        Column("Duration", "string", _job_duration, "Time required to complete the job."),
        age_column(),
        *template_columns(
            "spec.template.spec.containers", "spec.selector", api_doc(BATCH + "JobSpec", "selector")
        ),
    ]


def cronjob_columns() -> list[Column]:
    spec = BATCH + "CronJobSpec"
    return [
        name_column(),
        field_column("Schedule", spec, "spec.schedule"),
        field_column("Timezone", spec, "spec.timeZone", default="<none>"),
        Column(
            "Suspend", "boolean", lambda o, n: bool_ptr(value_at(o, "spec.suspend")), api_doc(spec, "suspend")
        ),
        Column(
            "Active",
            "integer",
            lambda o, n: len(list_at(o, "status.active")),
            api_doc(BATCH + "CronJobStatus", "active"),
        ),
        Column(
            "Last Schedule", "string", _last_schedule, api_doc(BATCH + "CronJobStatus", "lastScheduleTime")
        ),
        age_column(),
        *template_columns(
            "spec.jobTemplate.spec.template.spec.containers",
            "spec.jobTemplate.spec.selector",
            api_doc(BATCH + "JobSpec", "selector"),
        ),
    ]
