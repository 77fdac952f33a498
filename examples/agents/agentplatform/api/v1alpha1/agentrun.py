"""``AgentRun``: one task for an agent → a Job (or a Sandbox of kubernetes-sigs/agent-sandbox) and
what it needs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

import kubeloop
from kubeloop.crd import PrinterColumn, Rule

from .agent import ChannelType
from .groupversion import AGE, CATEGORIES, GROUP, VERSION, Name, name_rule


class RunTrigger(kubeloop.KubeModel):
    """What started a run that came from a chat: the channel, who wrote, and the thread to
    answer in."""

    channel: ChannelType
    user: Name
    thread: str | None = None


class AgentRunSpec(kubeloop.KubeModel):
    agent_ref: Name
    task: Annotated[str, Field(min_length=1)]
    timeout_seconds: Annotated[int, Field(ge=1)] = 600
    trigger: RunTrigger | None = None
    #: Where the run runs: a Job, or a Sandbox of kubernetes-sigs/agent-sandbox (isolated).
    backend: Literal["job", "sandbox"] = "job"
    #: How long a finished run's Job (and its pod) stays (the Job's ttlSecondsAfterFinished).
    ttl_seconds_after_finished: Annotated[int, Field(ge=0)] = 300
    #: The most model turns the run takes (the runner's default: 10), and the most tokens it
    #: spends, prompt and completion together (none: no budget); past either it fails
    #: (TurnLimitReached, BudgetExceeded).
    max_turns: Annotated[int | None, Field(ge=1)] = None
    max_tokens: Annotated[int | None, Field(ge=1)] = None


class RunUsage(kubeloop.KubeModel):
    """What a run used, as its runner counted it."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    turns: int = 0
    tool_calls: int = 0
    model: str = ""


class AgentRunStatus(kubeloop.KubeModel):
    phase: Literal["Pending", "Running", "Succeeded", "Failed"] | None = None
    job_name: str | None = None
    #: With ``backend: sandbox``: the run's Sandbox (released when the run ends).
    sandbox_name: str | None = None
    start_time: str | None = None
    completion_time: str | None = None
    #: Why the run is in its phase (Waiting, PodRunning, Completed, JobFailed, TimedOut, or
    #: the runner's: ModelUnreachable, ModelRefused, UnknownModel, BudgetExceeded, ToolFailed...).
    reason: str | None = None
    message: str | None = None
    #: What the agent answered: its pod's termination message.
    result: str | None = None
    #: For a run from a channel, once it ended: what its channel Deployment posts in the thread.
    reply: str | None = None
    #: Tokens, turns and tool calls, as the runner reported them.
    usage: RunUsage | None = None
    #: The usage at the runtime's prices (``spec.pricing``), as ``"0.000350 USD"``.
    cost_estimate: str | None = None


class AgentRun(
    kubeloop.CustomResource,
    group=GROUP,
    version=VERSION,
    short_names=("run",),
    categories=CATEGORIES,
    rules=(name_rule("AgentRun", 63, "the run's Job, whose pods carry it as a label"),),
    selectable_fields=(".spec.agentRef",),
    printer_columns=(
        PrinterColumn("Agent", ".spec.agentRef"),
        PrinterColumn("Phase", ".status.phase"),
        PrinterColumn("Reason", ".status.reason"),
        PrinterColumn("Tokens", ".status.usage.totalTokens", type="integer"),
        PrinterColumn("Cost", ".status.costEstimate"),
        AGE,
    ),
):
    """One task given to an agent, run to completion as a Job."""

    spec: Annotated[AgentRunSpec, Rule("self == oldSelf", message="an AgentRun's spec is immutable")]
    status: AgentRunStatus | None = None
