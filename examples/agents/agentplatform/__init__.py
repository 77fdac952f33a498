"""The agent platform operator: ServingRuntimes, SkillPacks, MCPServers and Agents (AgentRuns,
AgentSchedules and PersonaPacks are declared; their controllers come next).

    kubeloop run examples/agents --install-crds
"""

from __future__ import annotations

from dataclasses import dataclass

import kubeloop

from . import agents, mcpservers, skillpacks
from .api import ALL as CUSTOM_RESOURCES


@dataclass
class Platform:
    """The controllers ``setup`` registered (tests reach the reconcilers through it)."""

    agents: agents.AgentReconciler


def setup(manager: kubeloop.Manager) -> Platform:
    skillpacks.setup(manager)
    mcpservers.setup(manager)
    return Platform(agents=agents.setup(manager))


__all__ = ["CUSTOM_RESOURCES", "Platform", "setup"]
