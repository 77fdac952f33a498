"""AgentPolicies as kubectl users meet them (1.27 and the newest): an Agent the namespace's policy
does not allow is refused by the operator's webhook, and kubectl prints each field that is not
allowed; the Agent is not made."""

from __future__ import annotations

import asyncio
import pathlib

import agentplatform
import yaml
from agentobjects import agent, runtime

import kubeloop
from kubeloop.testing import ServerThread, webhooks_installed
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl


async def test_kubectl_is_told_what_the_policy_does_not_allow(
    cluster: ServerThread, client: kubeloop.APIClient, namespace: str, tmp_path: pathlib.Path
) -> None:
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(
        {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "AgentPolicy",
         "metadata": {"name": "strict", "namespace": namespace},
         "spec": {"modelProviders": ["anthropic"], "allowedMcpServers": []}}
    )  # fmt: skip
    manager = kubeloop.Manager(client, webhook_server=kubeloop.webhook.WebhookServer(port=0))
    agentplatform.setup(manager, enforce_policies=True)
    rogue = agent("rogue", namespace, f"{namespace}-rt", mcpServerRefs=["shell"])
    async with manager, webhooks_installed(client, manager):
        for binary in (KUBECTLS[0], KUBECTLS[-1]):
            kubectl = Kubectl(binary, pathlib.Path(cluster.kubeconfig), tmp_path)
            # In a thread: the webhook kubectl's request reaches is served on this loop.
            refused = await asyncio.to_thread(
                kubectl, "apply", "-f", "-", stdin=yaml.safe_dump(rogue), check=False
            )
            assert refused.returncode == 1, binary.name
            assert refused.stderr.startswith('The Agent "rogue" is invalid: '), refused.stderr
            assert (
                'spec.model.provider: Invalid value: "openai": not allowed by AgentPolicy strict (allowed: anthropic)'
                in refused.stderr
            )
            assert (
                'spec.mcpServerRefs[0]: Invalid value: "shell": not allowed by AgentPolicy strict (allowed: none)'
                in refused.stderr
            )
            assert (
                await asyncio.to_thread(kubectl, "get", "agents", "-n", namespace, "-o", "name")
            ).stdout == ""
