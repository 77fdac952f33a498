"""The agent platform operator: ServingRuntimes, SkillPacks, MCPServers, Agents, AgentRuns,
AgentSchedules and PersonaPacks, and a webhook that turns posts into AgentRuns.

    kubeloop run examples/agents --install-crds
"""

from __future__ import annotations

from dataclasses import dataclass

import kubeloop

from . import agents, indexes, mcpservers, personas, runs, schedules, skillpacks, webhook
from .api import ALL as CUSTOM_RESOURCES
from .webhook import WebhookOptions


@dataclass
class Platform:
    """The controllers ``setup`` registered (tests reach the reconcilers through it)."""

    skill_packs: skillpacks.SkillPackReconciler
    mcp_servers: mcpservers.MCPServerReconciler
    agents: agents.AgentReconciler
    runs: runs.AgentRunReconciler
    schedules: schedules.AgentScheduleReconciler
    personas: personas.PersonaPackReconciler
    #: None without a token (``webhook.WebhookOptions``, or ``AGENTS_WEBHOOK_TOKEN``).
    webhook: webhook.RunWebhook | None


def setup(
    manager: kubeloop.Manager,
    *,
    clock: schedules.Clock = schedules.system_clock,
    webhook_options: webhook.WebhookOptions | None = None,
) -> Platform:
    """Register the platform's indexes and controllers with ``manager``; ``clock`` is the
    schedules' (tests pass a fake one); the webhook serves with ``webhook_options`` (default:
    from the environment, none without a token)."""
    indexes.register(manager)
    return Platform(
        skill_packs=skillpacks.setup(manager),
        mcp_servers=mcpservers.setup(manager),
        agents=agents.setup(manager),
        runs=runs.setup(manager),
        schedules=schedules.setup(manager, clock),
        personas=personas.setup(manager),
        webhook=webhook.setup(manager, webhook_options),
    )


__all__ = ["CUSTOM_RESOURCES", "Platform", "WebhookOptions", "setup"]
