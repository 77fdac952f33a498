"""The cache's field indexes the platform's controllers look objects up by (each registered once,
before the controllers start): which agents use a runtime, a skill pack or an MCP server, and
which runs and schedules belong to an agent."""

from __future__ import annotations

import kubeloop

from ..api.v1alpha1 import Agent, AgentRun, AgentSchedule

RUNTIME_INDEX = "spec.runtimeRef"
SKILLS_INDEX = "spec.skillPackRefs"
MCP_INDEX = "spec.mcpServerRefs"
AGENT_INDEX = "spec.agentRef"


def register(manager: kubeloop.Manager) -> None:
    manager.add_index(Agent, RUNTIME_INDEX, lambda a: [str(a["spec"].get("runtimeRef", ""))])
    manager.add_index(Agent, SKILLS_INDEX, lambda a: a["spec"].get("skillPackRefs") or [])
    manager.add_index(Agent, MCP_INDEX, lambda a: a["spec"].get("mcpServerRefs") or [])
    for kind in (AgentRun, AgentSchedule):
        manager.add_index(kind, AGENT_INDEX, lambda o: [str(o["spec"].get("agentRef", ""))])
