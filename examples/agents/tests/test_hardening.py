"""The platform's pods hardened, and runs cleaned up, on the simulating server: an agent's and a
run's pods run under Kubernetes' restricted security context (uid 1000, seccomp RuntimeDefault,
a read-only root filesystem with a writable /tmp, no privilege escalation, no capability) unless
their ServingRuntime loosens it, and carry its image pull secrets; a run's Job carries
ttlSecondsAfterFinished (300 s unless the run says), for the cluster's TTL controller; an agent keeps at most
runHistoryLimit finished runs, the newest, and never touches one still running; a converged
agent on such a runtime writes nothing; an agent that asks for a NetworkPolicy gets one letting
in only its channels and the operator, letting out only DNS, its MCP servers and its model's
port, and loses it when it stops asking."""

from __future__ import annotations

from typing import Any

import agentplatform
from agentobjects import agent, agent_run, assert_writes_nothing, finished, ready, runtime
from agentplatform.api.v1alpha1 import Agent, AgentRun

import kubeloop
from kubeloop import kinds
from kubeloop.testing import eventually

RESTRICTED_POD = {
    "runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}  # fmt: skip
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}  # fmt: skip


def pod_of(workload: kubeloop.Obj) -> dict[str, Any]:
    return dict(workload["spec"]["template"]["spec"])


async def test_agent_and_run_pods_are_restricted_with_a_writable_tmp(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("locked", namespace, f"{namespace}-rt"))
    await ready(client, "locked", namespace)
    await client.create(agent_run("task", namespace, "locked"))
    await client.create(agent_run("short", namespace, "locked", ttlSecondsAfterFinished=30))
    await finished(client, "task", namespace)
    await finished(client, "short", namespace)
    deployment = await client.get(kinds.Deployment, "locked", namespace=namespace)
    job = await client.get(kinds.Job, "task", namespace=namespace)
    for pod in (pod_of(deployment), pod_of(job)):
        assert pod["securityContext"] == RESTRICTED_POD
        [container] = pod["containers"]
        assert container["securityContext"] == RESTRICTED_CONTAINER
        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
        assert {"name": "tmp", "emptyDir": {}} in pod["volumes"]
        assert "imagePullSecrets" not in pod
    assert job["spec"]["ttlSecondsAfterFinished"] == 300
    assert (await client.get(kinds.Job, "short", namespace=namespace))["spec"][
        "ttlSecondsAfterFinished"
    ] == 30


async def test_a_runtime_loosens_the_security_context_and_names_pull_secrets(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    loose = runtime(
        f"{namespace}-rt",
        imagePullSecrets=[{"name": "registry"}],
        podSecurityContext={"runAsUser": 0, "runAsNonRoot": False},
        securityContext={"readOnlyRootFilesystem": False, "capabilities": {"add": ["NET_BIND_SERVICE"]}},
    )
    await client.create(loose)
    await client.create(agent("root", namespace, f"{namespace}-rt"))
    await ready(client, "root", namespace)
    await client.create(agent_run("work", namespace, "root"))
    await finished(client, "work", namespace)
    deployment = await client.get(kinds.Deployment, "root", namespace=namespace)
    job = await client.get(kinds.Job, "work", namespace=namespace)
    for pod in (pod_of(deployment), pod_of(job)):
        assert pod["securityContext"] == {"runAsUser": 0, "runAsNonRoot": False}
        assert pod["containers"][0]["securityContext"] == loose["spec"]["securityContext"]
        assert pod["imagePullSecrets"] == [{"name": "registry"}]
    await assert_writes_nothing(platform.agents, kubeloop.Request(namespace, "root"))


async def test_an_agent_keeps_its_newest_finished_runs_up_to_its_limit(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("busy", namespace, f"{namespace}-rt", runHistoryLimit=2))
    await ready(client, "busy", namespace)
    for index in range(4):  # one after another: completion times in this order
        await client.create(agent_run(f"run-{index}", namespace, "busy"))
        await finished(client, f"run-{index}", namespace)
    long = {"kubeloop.dev/duration": "600"}
    await client.create(agent_run("still-running", namespace, "busy", annotations=long))

    async def pruned() -> None:
        names = sorted(run.metadata.name or "" for run in await client.list(AgentRun, namespace=namespace))
        assert names == ["run-2", "run-3", "still-running"], names

    await eventually(pruned)


async def test_an_agent_asks_for_a_network_policy_and_gives_it_up(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    await client.create(runtime(f"{namespace}-rt", port=9000))
    await client.create(
        {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "MCPServer",
         "metadata": {"name": "tools", "namespace": namespace}, "spec": {"image": "example.com/tools:1", "port": 7000}}
    )  # fmt: skip
    fenced = agent("fenced", namespace, f"{namespace}-rt", networkPolicy=True, mcpServerRefs=["tools"])
    fenced["spec"]["model"]["baseURL"] = "https://llm.example.com:8443/v1"
    await client.create(fenced)
    await ready(client, "fenced", namespace)
    policy = await client.get(kinds.NetworkPolicy, "fenced", namespace=namespace)
    spec = policy["spec"]
    assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "fenced"
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    [ingress] = spec["ingress"]
    assert ingress["ports"] == [{"protocol": "TCP", "port": 9000}]
    sources = ingress["from"]
    assert {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "channel", "app.kubernetes.io/instance": "fenced",
            "app.kubernetes.io/managed-by": "kubeloop-agents"}}} in sources  # fmt: skip
    assert any("namespaceSelector" in source for source in sources)
    dns, tools, model = spec["egress"]
    assert {"protocol": "UDP", "port": 53} in dns["ports"]
    assert tools["ports"] == [{"protocol": "TCP", "port": 7000}]
    assert tools["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "tools"
    assert model == {"ports": [{"protocol": "TCP", "port": 8443}]}
    await assert_writes_nothing(platform.agents, kubeloop.Request(namespace, "fenced"))

    await client.patch(Agent, "fenced", {"spec": {"networkPolicy": False}}, namespace=namespace)

    async def gone() -> None:
        assert not (await client.list(kinds.NetworkPolicy, namespace=namespace)).items

    await eventually(gone)
