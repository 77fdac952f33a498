"""The agent platform operator (group agents.kubeloop.dev): ServingRuntimes, SkillPacks,
MCPServers and Agents, reconciled into ConfigMaps, Deployments and Services.

    kubeloop run examples/agents --embedded --simulate --install-crds
    kubeloop crd examples/agents     # the CRDs, as YAML
"""

from agentplatform import setup
from agentplatform.api import (
    Agent,
    AgentRun,
    AgentSchedule,
    MCPServer,
    PersonaPack,
    ServingRuntime,
    SkillPack,
)

__all__ = [
    "Agent",
    "AgentRun",
    "AgentSchedule",
    "MCPServer",
    "PersonaPack",
    "ServingRuntime",
    "SkillPack",
    "setup",
]
