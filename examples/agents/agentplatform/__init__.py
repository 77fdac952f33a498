"""The agent platform operator: ServingRuntimes, SkillPacks, MCPServers, Agents, AgentRuns,
AgentSchedules and PersonaPacks, and a webhook that turns posts (and chat channels' messages)
into AgentRuns.

    kubeloop run examples/agents --install-crds

Laid out as a kubebuilder project: the kinds in ``api/v1alpha1/`` (one module per kind), the
controllers in ``controllers/`` (one per kind), and :func:`setup` wiring them to a manager, as
``cmd/main.go`` does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import kubeloop

from .api.v1alpha1 import ALL as CUSTOM_RESOURCES
from .controllers import (
    agent,
    agentrun,
    agentschedule,
    indexes,
    mcpserver,
    personapack,
    policy,
    runwebhook,
    skillpack,
)
from .controllers.channels import ChannelSettings, InboundTrust
from .controllers.deliveries import DeliveryLedger
from .controllers.memory import AgentMemory
from .controllers.runwebhook import WebhookOptions


@dataclass
class Platform:
    """The controllers ``setup`` registered (tests reach the reconcilers through it)."""

    skill_packs: skillpack.SkillPackReconciler
    mcp_servers: mcpserver.MCPServerReconciler
    agents: agent.AgentReconciler
    runs: agentrun.AgentRunReconciler
    schedules: agentschedule.AgentScheduleReconciler
    personas: personapack.PersonaPackReconciler
    #: None without options (``WebhookOptions``, or ``AGENTS_WEBHOOK_BIND_ADDRESS`` or ``_TOKEN``).
    webhook: runwebhook.RunWebhook | None


def setup(
    manager: kubeloop.Manager,
    *,
    clock: agentschedule.Clock = agentschedule.system_clock,
    webhook_options: WebhookOptions | None = None,
    channel_settings: ChannelSettings | None = None,
    enforce_policies: bool | None = None,
) -> Platform:
    """Register the platform's indexes and controllers with ``manager``; ``clock`` is the
    schedules' (tests pass a fake one); the inbound endpoint serves with ``webhook_options``
    (default: from the environment, none without an address or a token); channels run the images of
    ``channel_settings`` (default: from the environment). With ``enforce_policies`` (default:
    ``AGENTS_ENFORCE_POLICIES`` set to true) AgentPolicies are enforced by validating webhooks
    the manager's webhook server serves."""
    indexes.register(manager)
    if enforce_policies is None:
        enforce_policies = os.environ.get("AGENTS_ENFORCE_POLICIES", "").lower() in ("1", "true", "yes")
    channel_settings = channel_settings or ChannelSettings.from_env()
    webhook_options = webhook_options or WebhookOptions.from_env()
    ledger = DeliveryLedger(manager.client)
    trust = InboundTrust(channel_settings.inbound_ca)
    memory = AgentMemory(manager)
    if enforce_policies:
        policy.setup(manager, policy.PlatformImages(channel_settings.images, memory.image))
    return Platform(
        skill_packs=skillpack.setup(manager),
        mcp_servers=mcpserver.setup(manager),
        agents=agent.setup(manager, memory, channel_settings, ledger, trust),
        runs=agentrun.setup(manager, memory),
        schedules=agentschedule.setup(manager, clock),
        personas=personapack.setup(manager),
        webhook=runwebhook.setup(manager, webhook_options, ledger, trust),
    )


__all__ = ["CUSTOM_RESOURCES", "ChannelSettings", "Platform", "WebhookOptions", "setup"]
