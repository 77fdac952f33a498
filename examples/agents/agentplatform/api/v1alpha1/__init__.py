"""agents.kubeloop.dev/v1alpha1: the agent platform's kinds, as pydantic models, one module per kind.

Their CRDs are generated from these classes (``kubeloop crd examples/agents``):

- ``ServingRuntime`` (cluster-scoped, passive): how to run an agent — image, command, port,
  resources. Nothing runs for it; Agents read it.
- ``SkillPack``: named skills (text, and tools: commands run in the pod) → one owned ConfigMap
  that agents mount.
- ``MCPServer``: a tool server → an owned Deployment and Service, or one at a URL (with headers
  from Secrets); its URL in status.
- ``Agent`` (active): a runtime, a model and a prompt → an owned ConfigMap, Deployment and Service;
  each chat channel → a Deployment that posts its messages to the operator.
- ``AgentRun``: one task for an agent → a Job and what it needs; ``AgentSchedule``: runs on a cron
  schedule; ``PersonaPack``: a bundle of agents and schedules; ``AgentPolicy``: what a
  namespace's agents, runs and skill packs may use.
"""

from .agent import (
    Agent,
    AgentSpec,
    AgentStatus,
    ChannelSpec,
    ChannelStatus,
    ChannelType,
    EndpointSpec,
    LocalObjectRef,
    MemorySpec,
    ModelSpec,
    SecretKeyRef,
)
from .agentpolicy import AgentPolicy, AgentPolicySpec
from .agentrun import AgentRun, AgentRunSpec, AgentRunStatus, RunTrigger, RunUsage
from .agentschedule import AgentSchedule, AgentScheduleSpec, AgentScheduleStatus
from .groupversion import GROUP, VERSION
from .mcpserver import MCPHeader, MCPServer, MCPServerSpec, MCPServerStatus
from .personapack import PersonaAgent, PersonaPack, PersonaPackSpec, PersonaPackStatus, PersonaSchedule
from .servingruntime import ServingRuntime, ServingRuntimeSpec, TokenPricing
from .skillpack import Skill, SkillPack, SkillPackSpec, SkillPackStatus, SkillTool

#: Every kind of the version, in the order their CRDs are installed.
ALL = (ServingRuntime, SkillPack, MCPServer, Agent, AgentRun, AgentSchedule, PersonaPack, AgentPolicy)

__all__ = [
    "ALL",
    "GROUP",
    "VERSION",
    "Agent",
    "AgentPolicy",
    "AgentPolicySpec",
    "AgentRun",
    "AgentRunSpec",
    "AgentRunStatus",
    "AgentSchedule",
    "AgentScheduleSpec",
    "AgentScheduleStatus",
    "AgentSpec",
    "AgentStatus",
    "ChannelSpec",
    "ChannelStatus",
    "ChannelType",
    "EndpointSpec",
    "LocalObjectRef",
    "MCPHeader",
    "MCPServer",
    "MCPServerSpec",
    "MCPServerStatus",
    "MemorySpec",
    "ModelSpec",
    "PersonaAgent",
    "PersonaPack",
    "PersonaPackSpec",
    "PersonaPackStatus",
    "PersonaSchedule",
    "RunTrigger",
    "RunUsage",
    "SecretKeyRef",
    "ServingRuntime",
    "ServingRuntimeSpec",
    "Skill",
    "SkillPack",
    "SkillPackSpec",
    "SkillPackStatus",
    "SkillTool",
    "TokenPricing",
]
