"""The agent platform's kinds (agents.kubeloop.dev/v1alpha1), as pydantic models; their CRDs are
generated from these classes (``kubeloop crd examples/agents``).

- ``ServingRuntime`` (cluster-scoped, passive): how to run an agent — image, command, port,
  resources. Nothing runs for it; Agents read it.
- ``SkillPack``: named skills (text) → one owned ConfigMap that agents mount.
- ``MCPServer``: a tool server → an owned Deployment and Service; its URL in status.
- ``Agent`` (active): a runtime, a model and a prompt → an owned ConfigMap, Deployment and Service.
- ``AgentRun``: one task for an agent → a Job and what it needs; ``AgentSchedule``: runs on a cron
  schedule; ``PersonaPack``: a bundle of agents and schedules.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

import kubeloop
from kubeloop.crd import ListType, PrinterColumn, Rule
from kubeloop.models import core_v1, meta_v1

GROUP = "agents.kubeloop.dev"
VERSION = "v1alpha1"
#: ``kubectl get agentplatform`` lists them all. Not "agents": kubectl expands a category before
#: it looks for a resource, so ``kubectl get agents`` would list every kind of the category.
PLATFORM = "agentplatform"
CATEGORIES = (PLATFORM, "all")
AGE = PrinterColumn("Age", ".metadata.creationTimestamp", type="date")

Name = Annotated[str, Field(min_length=1, max_length=253)]


def name_rule(kind: str, limit: int, names: str) -> Rule:
    """A rule on the object's name, for kinds whose name becomes a name with tighter rules than
    an object's (a Service's: a DNS-1035 label; a label value: at most 63 characters). Refused at
    the API, the user hears it at once, not as an operator's failed write later."""
    return Rule(
        f"self.metadata.name.size() <= {limit} && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
        message=f"a{'n' if kind[0] in 'AEIOU' else ''} {kind}'s name must be at most {limit} characters of"
        f" a-z, 0-9 and '-', starting with a letter and ending with a letter or digit: it names {names}",
    )


class ServingRuntimeSpec(kubeloop.KubeModel):
    image: Name
    command: list[str] | None = None
    args: list[str] | None = None
    env: Annotated[list[core_v1.EnvVar] | None, ListType("map", keys=("name",))] = None
    port: Annotated[int, Field(ge=1, le=65535)] = 8080
    resources: core_v1.ResourceRequirements | None = None
    #: A disabled runtime starts nothing new; agents that use it keep what runs.
    disabled: bool = False


class ServingRuntime(
    kubeloop.CustomResource,
    group=GROUP,
    version=VERSION,
    scope="Cluster",
    short_names=("sr",),
    categories=(PLATFORM,),
    printer_columns=(
        PrinterColumn("Image", ".spec.image"),
        PrinterColumn("Port", ".spec.port", type="integer"),
        PrinterColumn("Disabled", ".spec.disabled", type="boolean"),
        AGE,
    ),
):
    """A reusable blueprint for running agents: nothing runs for it, Agents refer to it."""

    spec: ServingRuntimeSpec


class Skill(kubeloop.KubeModel):
    name: Annotated[str, Field(pattern=r"^[-._a-zA-Z0-9]+$", max_length=253)]
    text: str


class SkillPackSpec(kubeloop.KubeModel):
    skills: Annotated[list[Skill], ListType("map", keys=("name",))] = []


class SkillPackStatus(kubeloop.KubeModel):
    observed_generation: int | None = None
    config_map_name: str | None = None
    skills: int | None = None


class SkillPack(
    kubeloop.CustomResource,
    group=GROUP,
    version=VERSION,
    short_names=("skp",),
    categories=CATEGORIES,
    printer_columns=(PrinterColumn("Skills", ".status.skills", type="integer"), AGE),
):
    """Named skills, given to the agents that list the pack as one mounted ConfigMap."""

    spec: SkillPackSpec = SkillPackSpec()
    status: SkillPackStatus | None = None


class MCPServerSpec(kubeloop.KubeModel):
    image: Name
    port: Annotated[int, Field(ge=1, le=65535)] = 8080
    env: Annotated[list[core_v1.EnvVar] | None, ListType("map", keys=("name",))] = None
    replicas: Annotated[int, Field(ge=0)] = 1


class MCPServerStatus(kubeloop.KubeModel):
    observed_generation: int | None = None
    url: str | None = None
    ready_replicas: int | None = None


class MCPServer(
    kubeloop.CustomResource,
    group=GROUP,
    version=VERSION,
    short_names=("mcp",),
    categories=CATEGORIES,
    rules=(name_rule("MCPServer", 63, "the server's Service"),),
    printer_columns=(
        PrinterColumn("URL", ".status.url"),
        PrinterColumn("Ready", ".status.readyReplicas", type="integer"),
        AGE,
    ),
):
    """A Model Context Protocol server: a Deployment and a Service agents reach it by."""

    spec: MCPServerSpec
    status: MCPServerStatus | None = None


class SecretKeyRef(kubeloop.KubeModel):
    name: Name
    key: Name


class ModelSpec(kubeloop.KubeModel):
    provider: Name
    name: Name
    base_url: str | None = Field(default=None, alias="baseURL")
    auth_secret_ref: SecretKeyRef | None = None


class AgentSpec(kubeloop.KubeModel):
    runtime_ref: Name
    model: ModelSpec
    system_prompt: str = ""
    replicas: Annotated[int, Field(ge=0)] = 1
    #: Overrides the runtime's variables of the same name.
    env: Annotated[list[core_v1.EnvVar] | None, ListType("map", keys=("name",))] = None
    skill_pack_refs: Annotated[list[str], ListType("set")] = []
    mcp_server_refs: Annotated[list[str], ListType("set")] = []


class AgentStatus(kubeloop.KubeModel):
    observed_generation: int | None = None
    runtime_name: str | None = None
    config_hash: str | None = None
    url: str | None = None
    ready_replicas: int | None = None
    conditions: Annotated[list[meta_v1.Condition] | None, ListType("map", keys=("type",))] = None


class Agent(
    kubeloop.CustomResource,
    group=GROUP,
    version=VERSION,
    short_names=("ag",),
    categories=CATEGORIES,
    rules=(name_rule("Agent", 63, "the agent's Service"),),
    printer_columns=(
        PrinterColumn("Runtime", ".spec.runtimeRef"),
        PrinterColumn("Model", ".spec.model.name"),
        PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
        PrinterColumn("Replicas", ".status.readyReplicas", type="integer"),
        AGE,
    ),
):
    """An agent: a model and a prompt served with a ServingRuntime, its skills and tool servers."""

    spec: AgentSpec
    status: AgentStatus | None = None


class AgentRunSpec(kubeloop.KubeModel):
    agent_ref: Name
    task: Annotated[str, Field(min_length=1)]
    timeout_seconds: Annotated[int, Field(ge=1)] = 600


class AgentRunStatus(kubeloop.KubeModel):
    phase: Literal["Pending", "Running", "Succeeded", "Failed"] | None = None
    job_name: str | None = None
    start_time: str | None = None
    completion_time: str | None = None
    #: Why the run is in its phase (Waiting, PodRunning, Completed, JobFailed, TimedOut...).
    reason: str | None = None
    message: str | None = None
    #: What the agent answered: its pod's termination message.
    result: str | None = None


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
        AGE,
    ),
):
    """One task given to an agent, run to completion as a Job."""

    spec: Annotated[AgentRunSpec, Rule("self == oldSelf", message="an AgentRun's spec is immutable")]
    status: AgentRunStatus | None = None


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


class PersonaAgent(kubeloop.KubeModel):
    name: Name
    spec: AgentSpec


class PersonaSchedule(kubeloop.KubeModel):
    name: Name
    spec: AgentScheduleSpec


class PersonaPackSpec(kubeloop.KubeModel):
    agents: Annotated[list[PersonaAgent], ListType("map", keys=("name",))] = []
    schedules: Annotated[list[PersonaSchedule], ListType("map", keys=("name",))] = []


class PersonaPackStatus(kubeloop.KubeModel):
    observed_generation: int | None = None
    agents: list[str] | None = None
    schedules: list[str] | None = None
    #: The API server's message for each entry it refused to make.
    refused: list[str] | None = None


class PersonaPack(
    kubeloop.CustomResource,
    group=GROUP,
    version=VERSION,
    short_names=("pp",),
    categories=CATEGORIES,
    printer_columns=(AGE,),
):
    """A bundle of agents and schedules, created and pruned as the pack changes."""

    spec: PersonaPackSpec = PersonaPackSpec()
    status: PersonaPackStatus | None = None


ALL = (ServingRuntime, SkillPack, MCPServer, Agent, AgentRun, AgentSchedule, PersonaPack)
