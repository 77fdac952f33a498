"""The agent platform operator (group agents.kubeloop.dev): ServingRuntimes, SkillPacks,
MCPServers, Agents, AgentRuns, AgentSchedules, PersonaPacks and AgentPolicies, reconciled into ConfigMaps,
Deployments, Services, Jobs and RBAC; a webhook turns posts into AgentRuns.

    kubeloop demo                      # on the embedded server, with config/samples/ and a live view
    kubeloop run examples/agents --embedded --simulate --install-crds
    kubeloop crd examples/agents       # the CRDs, as YAML
    kubeloop rbac examples/agents      # the ClusterRole it needs
    kubectl apply -k examples/agents/config/default   # on a cluster (image: Dockerfile)
    helm install agents examples/agents/chart -n agents-system --create-namespace   # or with Helm
"""

from agentplatform import ChannelSettings, WebhookOptions, setup
from agentplatform.api.v1alpha1 import (
    Agent,
    AgentPolicy,
    AgentRun,
    AgentSchedule,
    MCPServer,
    PersonaPack,
    ServingRuntime,
    SkillPack,
)

__all__ = [
    "Agent",
    "AgentPolicy",
    "AgentRun",
    "AgentSchedule",
    "ChannelSettings",
    "MCPServer",
    "PersonaPack",
    "ServingRuntime",
    "SkillPack",
    "WebhookOptions",
    "setup",
]
