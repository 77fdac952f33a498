"""The agent platform operator: ServingRuntimes, SkillPacks, MCPServers, Agents, AgentRuns,
AgentSchedules and PersonaPacks.

    kubeloop run examples/agents --install-crds
"""

from __future__ import annotations

from dataclasses import dataclass

import kubeloop

from . import agents, indexes, mcpservers, personas, runs, schedules, skillpacks
from .api import ALL as CUSTOM_RESOURCES


@dataclass
class Platform:
    """The controllers ``setup`` registered (tests reach the reconcilers through it)."""

    agents: agents.AgentReconciler
    runs: runs.AgentRunReconciler
    schedules: schedules.AgentScheduleReconciler
    personas: personas.PersonaPackReconciler


def setup(manager: kubeloop.Manager, *, clock: schedules.Clock = schedules.system_clock) -> Platform:
    """Register the platform's indexes and controllers with ``manager``; ``clock`` is the
    schedules' (tests pass a fake one)."""
    indexes.register(manager)
    skillpacks.setup(manager)
    mcpservers.setup(manager)
    return Platform(
        agents=agents.setup(manager),
        runs=runs.setup(manager),
        schedules=schedules.setup(manager, clock),
        personas=personas.setup(manager),
    )


__all__ = ["CUSTOM_RESOURCES", "Platform", "setup"]
