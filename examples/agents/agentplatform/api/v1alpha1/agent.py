"""``Agent`` (active): a runtime, a model and a prompt → an owned ConfigMap, Deployment and Service;
its chat channels → a Deployment each (``<agent>-channel-<type>``) and the ServiceAccount it
runs as; its memory → the ConfigMap ``<agent>-memory``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

import kubeloop
from kubeloop.crd import ListType, PrinterColumn
from kubeloop.models import core_v1, meta_v1

from .groupversion import AGE, CATEGORIES, GROUP, VERSION, Name, name_rule


class SecretKeyRef(kubeloop.KubeModel):
    name: Name
    key: Name


class ModelSpec(kubeloop.KubeModel):
    provider: Name
    name: Name
    base_url: str | None = Field(default=None, alias="baseURL")
    auth_secret_ref: SecretKeyRef | None = None


#: The chat front-ends a channel Deployment can connect (``webhook``: any system that posts).
ChannelType = Literal["slack", "telegram", "discord", "whatsapp", "webhook"]


class LocalObjectRef(kubeloop.KubeModel):
    name: Name


class ChannelSpec(kubeloop.KubeModel):
    """A chat front-end: its Deployment connects to the chat with the credentials in
    ``secretRef`` (given to it as its environment) and posts each message to the operator."""

    type: ChannelType
    secret_ref: LocalObjectRef
    #: Who may start runs (empty: everyone not denied); ``denyUsers`` wins.
    allow_users: Annotated[list[str], ListType("set")] = []
    deny_users: Annotated[list[str], ListType("set")] = []
    #: A keyword the message must hold as a word (any case), or ``@name``, a mention it must
    #: hold (taken out of the task); none: every message.
    trigger: Annotated[str | None, Field(min_length=1, max_length=63)] = None
    #: The channel Deployment's image, instead of the platform's for this type.
    image: str | None = None


class ChannelStatus(kubeloop.KubeModel):
    type: ChannelType
    phase: Literal["Pending", "Connected", "Error"]
    message: str = ""


class MemorySpec(kubeloop.KubeModel):
    """What the agent remembers across runs: ``MEMORY.md`` in the ConfigMap ``<agent>-memory``,
    mounted at ``/memory``; runs add to it, the oldest entries go past ``maxBytes``. What one
    run adds, every later run reads, whoever started it: ``readOnly`` keeps runs from adding."""

    enabled: bool = True
    #: Runs read the memory but add nothing to it (a run's ``memory`` is dropped).
    read_only: bool = False
    max_bytes: Annotated[int, Field(ge=1024, le=512 * 1024)] = 64 * 1024
    #: Also a memory server of the agent's own, on a PersistentVolumeClaim of ``storage``,
    #: reached at ``MEMORY_URL``; runs wait until it is ready.
    persistent: bool = False
    #: The claim's size when it is made (a quantity: 1Gi, 500Mi).
    storage: Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")] = "1Gi"


class EndpointSpec(kubeloop.KubeModel):
    """The agent's own OpenAI-compatible endpoint, which its Deployment serves behind its
    Service (``POST /v1/chat/completions``)."""

    #: The key callers must present as their bearer token (none: any caller that reaches it).
    auth_secret_ref: SecretKeyRef | None = None
    rate_limit_per_minute: Annotated[int, Field(ge=1, le=100_000)] = 60


class AgentSpec(kubeloop.KubeModel):
    runtime_ref: Name
    model: ModelSpec
    system_prompt: str = ""
    replicas: Annotated[int, Field(ge=0)] = 1
    #: Overrides the runtime's variables of the same name.
    env: Annotated[list[core_v1.EnvVar] | None, ListType("map", keys=("name",))] = None
    skill_pack_refs: Annotated[list[str], ListType("set")] = []
    mcp_server_refs: Annotated[list[str], ListType("set")] = []
    #: The tools the agent may offer its model, of its MCP servers and its own (memory_search...),
    #: by name or shell-style pattern (``list_*``): empty, every tool; ``denyTools`` wins.
    allow_tools: Annotated[list[Annotated[str, Field(min_length=1, max_length=128)]], ListType("set")] = []
    deny_tools: Annotated[list[Annotated[str, Field(min_length=1, max_length=128)]], ListType("set")] = []
    memory: MemorySpec | None = None
    #: Finished runs kept per agent (the oldest are deleted past it); a schedule's own limits
    #: apply to its runs too.
    run_history_limit: Annotated[int, Field(ge=0)] = 50
    #: Give the agent's pods a NetworkPolicy: in from its channels and the operator's namespace
    #: only; out to DNS, its MCP servers and its model endpoint's port only.
    network_policy: bool = False
    #: One channel per type.
    channels: Annotated[list[ChannelSpec] | None, ListType("map", keys=("type",))] = None
    #: Who may call the agent's endpoint, and how often.
    endpoint: EndpointSpec | None = None
    #: The most model turns and tokens a run of the agent (or a conversation with it) takes;
    #: a run's own limits and the namespace's AgentPolicies may only lower them.
    max_turns: Annotated[int | None, Field(ge=1)] = None
    max_tokens: Annotated[int | None, Field(ge=1)] = None


class AgentStatus(kubeloop.KubeModel):
    observed_generation: int | None = None
    runtime_name: str | None = None
    config_hash: str | None = None
    url: str | None = None
    ready_replicas: int | None = None
    #: With persistent memory: whether its server is ready (runs wait until it is).
    memory_ready: bool | None = None
    channels: Annotated[list[ChannelStatus] | None, ListType("map", keys=("type",))] = None
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
