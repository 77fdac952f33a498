"""The whole platform at once, every program a process on the process node and the model a test
double of a provider (``fakemodel``: the one party a test cannot reach), which calls the tools a
run offers it and then answers.

One agent with persistent memory (its memory server), an MCP server (``mcp-kubernetes``, reached
through its Service, reading as its own ServiceAccount), a webhook channel and a schedule:

- an AgentRun → its Job → the runner's process → the model → the MCP server's tool and the
  memory server's store → Succeeded with its result, usage and cost, the memory in the server;
- the same with ``backend: sandbox`` (agent-sandbox's controller beside the platform's);
- a chat message through the channel's program and the inbound endpoint → a run → its reply;
- the schedule firing a run at the minute (the platform's clock set ahead of the machine's);
- then the agent and the MCP server deleted: no process of any of their pods is left.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import agentplatform
import aiohttp
import pytest
from agentobjects import agent, agent_run, finished, process_node_server, runtime
from agentplatform.api.v1alpha1 import Agent, AgentRun, AgentSchedule, MCPServer
from agentplatform.controllers.channels import ChannelSettings
from agentplatform.controllers.runwebhook import WebhookOptions
from agentruntime.channels.webhook import signature
from aiohttp import web
from fakemodel import FakeModel, answer, tool_calls

import kubeloop
from kubeloop import kinds
from kubeloop.manager.operatortarget import load_target, module_crds
from kubeloop.testing import ServerThread, eventually, pod_processes

RUNNER_IMAGE = "ghcr.io/kubeloop/agent-python:0.1"
MCP_KUBERNETES_IMAGE = "ghcr.io/kubeloop/mcp-kubernetes:0.1"
#: agent-sandbox: its CRD and its Sandbox controller (examples/agent_sandbox).
AGENT_SANDBOX, _ = load_target(str(pathlib.Path(__file__).parents[2] / "agent_sandbox"))
PRICES = {"inputPerMillion": "2.50", "outputPerMillion": "10"}


@pytest.fixture(scope="module")
def pods(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return tmp_path_factory.mktemp("pods")


@pytest.fixture(scope="module")
def cluster(pods: pathlib.Path) -> Iterator[ServerThread]:
    """This module's server (the Sandbox CRD it installs reaches no other test's)."""
    server = process_node_server(pods)
    yield server
    server.stop()


def calls_tools_then_answers() -> Any:
    """A model step for any run: with no tool result yet, it lists the namespace's ConfigMaps
    through the MCP server and stores a memory; then it answers, naming the task."""

    async def step(request: dict[str, Any]) -> web.Response:
        messages = request["messages"]
        task = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        if not any(m["role"] == "tool" for m in messages):
            namespace = next(m for m in messages if m["role"] == "system")["content"].rsplit(" ", 1)[-1].rstrip(".")
            listing = json.dumps({"kind": "configmaps", "namespace": namespace})
            return await tool_calls(("list_objects", listing), ("memory_store", json.dumps({"text": f"asked: {task}"})))(request)
        [listed, _] = [m["content"] for m in messages if m["role"] == "tool"]
        return await answer(f"{task}: {'inventory' in listed.splitlines()}", 100, 20)(request)

    return step


@pytest.fixture
async def model() -> AsyncIterator[FakeModel]:
    fake = await FakeModel([calls_tools_then_answers()] * 20).start()
    yield fake
    await fake.stop()


async def test_the_platform_does_its_work_with_every_program_a_process(
    client: kubeloop.APIClient, namespace: str, model: FakeModel, pods: pathlib.Path, unused_tcp_port: int
) -> None:
    # The platform's clock is the machine's set ahead to ten seconds before a minute: the
    # schedule, made at once, fires then.
    now = datetime.now(UTC)
    ahead = now.replace(second=50, microsecond=0) - now
    firing = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    await kubeloop.crd.install_crds(client, *module_crds(AGENT_SANDBOX))
    manager = kubeloop.Manager(client)
    options = WebhookOptions("unused", bind_address=f"127.0.0.1:{unused_tcp_port}", namespace=namespace)
    agentplatform.setup(
        manager,
        webhook_options=options,
        channel_settings=ChannelSettings(inbound_url=f"http://127.0.0.1:{unused_tcp_port}"),
        clock=lambda: datetime.now(UTC) + ahead,
    )
    AGENT_SANDBOX.setup(manager)
    async with manager:
        schedule = {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "AgentSchedule",
                    "metadata": {"name": "hourly", "namespace": namespace},
                    "spec": {"agentRef": "ops", "schedule": "* * * * *", "task": "report the cluster"}}  # fmt: skip
        await client.create(schedule)
        # mcp-kubernetes acts as the account reader, which may read ConfigMaps.
        reader = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader", "namespace": namespace}}
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "reader", "namespace": namespace},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}  # fmt: skip
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "reader", "namespace": namespace},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
                   "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}]}  # fmt: skip
        inventory = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "inventory", "namespace": namespace}}
        server = {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "MCPServer", "metadata": {"name": "k8s", "namespace": namespace},
                  "spec": {"image": MCP_KUBERNETES_IMAGE, "port": 8090, "serviceAccountName": "reader"}}  # fmt: skip
        hook = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hook", "namespace": namespace},
                "stringData": {"WEBHOOK_SIGNING_KEY": "k"}}  # fmt: skip
        for obj in (reader, role, binding, inventory, server, hook, runtime(f"{namespace}-rt", RUNNER_IMAGE, pricing=PRICES)):
            await client.create(obj)
        ops = agent("ops", namespace, f"{namespace}-rt", mcpServerRefs=["k8s"],
                    memory={"enabled": True, "persistent": True},
                    channels=[{"type": "webhook", "secretRef": {"name": "hook"}}])  # fmt: skip
        ops["spec"]["model"] = {"provider": "openai", "name": "fake-model", "baseURL": model.url,
                                "authSecretRef": {"name": "llm", "key": "token"}}  # fmt: skip
        await client.create(ops)
        await client.create(agent_run("job-run", namespace, "ops", task="count the configmaps"))
        await client.create(agent_run("sandbox-run", namespace, "ops", task="look in a sandbox", backend="sandbox"))

        # A run in a Job, and one in a Sandbox: the MCP tool's answer and the memory server's.
        for name, task in (("job-run", "count the configmaps"), ("sandbox-run", "look in a sandbox")):
            run = await finished(client, name, namespace, timeout=90)
            assert run.status is not None and (run.status.phase, run.status.result) == ("Succeeded", f"{task}: True"), run.status
            assert run.status.usage is not None and run.status.usage.tool_calls == 2 and run.status.usage.total_tokens > 0
            assert run.status.cost_estimate is not None and run.status.cost_estimate.endswith("USD")
        sandboxed = await client.get(AgentRun, "sandbox-run", namespace=namespace)
        assert sandboxed.status is not None and sandboxed.status.sandbox_name == "sandbox-run"
        memory = await client.list(kinds.Pod, namespace=namespace, label_selector="app.kubernetes.io/name=memory-server")
        address = memory.items[0]["status"]["podIP"]
        async with aiohttp.ClientSession() as http, http.get(f"http://{address}:8080/v1/memories") as listed:
            stored = {(item["text"], item["source"]) for item in (await listed.json())["items"]}
        assert {("asked: count the configmaps", "run job-run"), ("asked: look in a sandbox", "run sandbox-run")} <= stored

        # A chat message through the channel's program: the reply comes back in the answer.
        async def channel_connected() -> str:
            found = await client.get(Agent, "ops", namespace=namespace)
            assert [c.phase for c in (found.status.channels if found.status else None) or ()] == ["Connected"]
            endpoints = await client.get(kinds.Endpoints, "ops-channel-webhook", namespace=namespace)
            return str(endpoints["subsets"][0]["addresses"][0]["ip"])

        channel = await eventually(channel_connected, timeout=60)
        body = json.dumps({"text": "is the inventory there?", "user": "alice"}).encode()
        headers = {"X-Signature-256": signature("k", body), "X-Delivery-ID": "m-1", "Content-Type": "application/json"}
        async with aiohttp.ClientSession() as http, http.post(f"http://{channel}:8080/messages", data=body, headers=headers) as posted:
            said = await posted.json()
        assert (posted.status, said["reply"]) == (200, "is the inventory there?: True"), said

        # The schedule fired at the minute, its run answered.
        async def fired() -> AgentSchedule:
            found = await client.get(AgentSchedule, "hourly", namespace=namespace)
            assert found.status is not None and found.status.last_successful_time == firing.strftime("%Y-%m-%dT%H:%M:%SZ")
            return found

        await eventually(fired, timeout=90)
        scheduled = [r for r in (await client.list(AgentRun, namespace=namespace)).items
                     if (r.metadata.labels or {}).get("agents.kubeloop.dev/schedule") == "hourly"]  # fmt: skip
        assert [r.status.result for r in scheduled if r.status] == ["report the cluster: True"]

        # Gone with what made them: no process of their pods is left.
        assert pod_processes(pods)
        await client.delete(Agent, "ops", namespace=namespace)
        await client.delete(MCPServer, "k8s", namespace=namespace)

        async def no_processes() -> None:
            assert pod_processes(pods) == []

        await eventually(no_processes, timeout=90)
