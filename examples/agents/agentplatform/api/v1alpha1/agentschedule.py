"""``AgentSchedule``: AgentRuns on a cron schedule."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

import kubeloop
from kubeloop.crd import PrinterColumn

from .groupversion import AGE, CATEGORIES, GROUP, VERSION, Name, name_rule


class AgentScheduleSpec(kubeloop.KubeModel):
    agent_ref: Name
    schedule: Name
    time_zone: str | None = None
    task: Annotated[str, Field(min_length=1)]
    suspend: bool = False
    concurrency_policy: Literal["Allow", "Forbid", "Replace"] = "Forbid"
    starting_deadline_seconds: Annotated[int | None, Field(ge=0)] = None
    successful_runs_history_limit: Annotated[int, Field(ge=0)] = 3
    failed_runs_history_limit: Annotated[int, Field(ge=0)] = 1


class AgentScheduleStatus(kubeloop.KubeModel):
    #: The runs that have not finished.
    active: list[str] | None = None
    last_schedule_time: str | None = None
    last_successful_time: str | None = None
    next_schedule_time: str | None = None


class AgentSchedule(
    kubeloop.CustomResource,
    group=GROUP,
    version=VERSION,
    short_names=("asch",),
    categories=CATEGORIES,
    rules=(name_rule("AgentSchedule", 52, "its runs, with 9 characters added (as a CronJob's, 52)"),),
    selectable_fields=(".spec.agentRef",),
    printer_columns=(
        PrinterColumn("Agent", ".spec.agentRef"),
        PrinterColumn("Schedule", ".spec.schedule"),
        PrinterColumn("Suspend", ".spec.suspend", type="boolean"),
        PrinterColumn("Last", ".status.lastScheduleTime", type="date"),
        AGE,
    ),
):
    """Runs of an agent on a cron schedule."""

    spec: AgentScheduleSpec
    status: AgentScheduleStatus | None = None
