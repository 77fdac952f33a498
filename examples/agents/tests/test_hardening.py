"""The platform's pods hardened, and runs cleaned up, on the simulating server: an agent's and a
run's pods run under Kubernetes' restricted security context (uid 1000, seccomp RuntimeDefault,
a read-only root filesystem with a writable /tmp, no privilege escalation, no capability) unless
their ServingRuntime loosens it, and carry its image pull secrets; a run's Job carries
ttlSecondsAfterFinished (300 s unless the run says), for the cluster's TTL controller; an agent keeps at most
runHistoryLimit finished runs, the newest, and never touches one still running; a converged
agent on such a runtime writes nothing; the server's PodSecurity admission, enforcing restricted
in a namespace, admits the agent's, channel's, memory server's and run's pods and refuses a loosened runtime's; an agent that asks for a NetworkPolicy gets one letting
in only its channels and the operator, letting out only DNS, its MCP servers and its model's
port, and loses it when it stops asking."""

from __future__ import annotations

from typing import Any

import agentplatform
from agentobjects import agent, agent_run, assert_writes_nothing, condition, finished, ready, runtime
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


async def test_the_platforms_pods_are_admitted_where_restricted_is_enforced(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    """The server's PodSecurity admission is the judge: in a namespace enforcing the restricted
    standard the agent's, its channel's, its memory server's and its run's pods are all made; an agent on a runtime that
    loosens the context is not, and its ReplicaSet's FailedCreate event says why."""
    await client.patch(
        kinds.Namespace,
        namespace,
        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
    )
    await client.create(runtime(f"{namespace}-rt"))
    await client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hook", "namespace": namespace},
                         "stringData": {"WEBHOOK_SIGNING_KEY": "k"}})  # fmt: skip
    channels = [{"type": "webhook", "secretRef": {"name": "hook"}}]  # its program runs: a process
    memory = {"enabled": True, "maxBytes": 4096, "persistent": True, "storage": "1Gi"}
    await client.create(agent("locked", namespace, f"{namespace}-rt", channels=channels, memory=memory))
    await ready(client, "locked", namespace)

    async def connected() -> None:
        found = await client.get(Agent, "locked", namespace=namespace)
        assert found.status is not None and [c.phase for c in found.status.channels or ()] == ["Connected"]

    await eventually(connected, timeout=20)

    async def memory_served() -> None:  # the memory server's pod, on its claim, admitted too
        found = await client.get(Agent, "locked", namespace=namespace)
        assert found.status is not None and found.status.memory_ready is True, found.status

    await eventually(memory_served, timeout=20)
    await client.create(agent_run("task", namespace, "locked"))
    run = await finished(client, "task", namespace)
    assert run.status is not None and run.status.phase == "Succeeded", run.status

    loose = runtime(f"{namespace}-root", podSecurityContext={"runAsUser": 0, "runAsNonRoot": False})
    await client.create(loose)
    await client.create(agent("root", namespace, f"{namespace}-root"))

    async def refused() -> str:
        events = await client.list(kinds.Event, namespace=namespace, field_selector="reason=FailedCreate")
        messages = [
            str(e["message"]) for e in events.items if e["involvedObject"]["name"].startswith("root-")
        ]
        assert messages, "no FailedCreate yet"
        return messages[0]

    message = await eventually(refused, timeout=20)
    assert 'is forbidden: violates PodSecurity "restricted:latest": ' in message
    assert "runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false)" in message
    assert "runAsUser=0 (pod must not set runAsUser=0)" in message

    async def reported() -> None:  # the agent's Ready says why, in the server's words
        found = await client.get(Agent, "root", namespace=namespace)
        assert condition(found, "Ready") == ("False", "DeploymentNotReady")
        assert found.status is not None
        (ready_condition,) = [c for c in found.status.conditions or () if c.type == "Ready"]
        assert ready_condition.message.startswith('0 of 1 replicas available: pods "root-'), (
            ready_condition.message
        )
        assert 'violates PodSecurity "restricted:latest"' in ready_condition.message

    await eventually(reported, timeout=20)


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


async def test_a_channel_run_stays_until_its_reply_could_be_read(
    client: kubeloop.APIClient, namespace: str
) -> None:
    """With runHistoryLimit 0 a finished run goes at once, but a channel's run stays
    reply_retention_seconds after it finished, so the channel can read its reply; then it goes."""
    manager = kubeloop.Manager(client)
    agentplatform.setup(manager, channel_settings=agentplatform.ChannelSettings(reply_retention_seconds=4))
    async with manager:
        await client.create(runtime(f"{namespace}-rt"))
        await client.create(agent("terse", namespace, f"{namespace}-rt", runHistoryLimit=0))
        await ready(client, "terse", namespace)
        trigger = {"channel": "slack", "user": "alice", "thread": "T-1"}
        await client.create(agent_run("chat", namespace, "terse", trigger=trigger))
        await client.create(agent_run("plain", namespace, "terse"))

        async def names() -> list[str]:
            return sorted(run.metadata.name or "" for run in await client.list(AgentRun, namespace=namespace))

        async def plain_gone() -> None:
            assert await names() == ["chat"]  # the later event: the plain run pruned, the chat kept

        await eventually(plain_gone, timeout=20)
        chat = await client.get(AgentRun, "chat", namespace=namespace)
        assert chat.status is not None and chat.status.phase == "Succeeded" and chat.status.reply

        async def chat_gone() -> None:
            assert await names() == []

        await eventually(chat_gone, timeout=20)  # woken when its retention ends


async def test_an_agent_asks_for_a_network_policy_and_gives_it_up(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    await client.create(runtime(f"{namespace}-rt", port=9000))
    await client.create(
        {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "MCPServer",
         "metadata": {"name": "tools", "namespace": namespace}, "spec": {"image": "example.com/tools:1", "port": 7000}}
    )  # fmt: skip
    await client.create(
        {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "MCPServer",
         "metadata": {"name": "remote", "namespace": namespace}, "spec": {"url": "https://mcp.example.com:9443/mcp"}}
    )  # fmt: skip
    fenced = agent("fenced", namespace, f"{namespace}-rt", networkPolicy=True, mcpServerRefs=["tools", "remote"])
    fenced["spec"]["model"]["baseURL"] = "https://llm.example.com:8443/v1"
    await client.create(fenced)
    await ready(client, "fenced", namespace)
    policy = await client.get(kinds.NetworkPolicy, "fenced", namespace=namespace)
    spec = policy["spec"]
    # What it selects: the agent's pods and its runs' pods (a Job's and a Sandbox's share the
    # template), not its MCP server's.
    await client.create(agent_run("fenced-run", namespace, "fenced"))
    run_job = await eventually(lambda: client.get(kinds.Job, "fenced-run", namespace=namespace))
    selected = spec["podSelector"]["matchLabels"].items()
    for workload, chosen in (
        (await client.get(kinds.Deployment, "fenced", namespace=namespace), True),
        (run_job, True),
        (await client.get(kinds.Deployment, "tools", namespace=namespace), False),
    ):
        assert (selected <= workload["spec"]["template"]["metadata"]["labels"].items()) is chosen, workload
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    [ingress] = spec["ingress"]
    assert ingress["ports"] == [{"protocol": "TCP", "port": 9000}]
    sources = ingress["from"]
    assert {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "channel", "app.kubernetes.io/instance": "fenced",
            "app.kubernetes.io/managed-by": "kubeloop-agents"}}} in sources  # fmt: skip
    assert any("namespaceSelector" in source for source in sources)
    dns, remote, tools, api_server, model = spec["egress"]
    assert {"protocol": "UDP", "port": 53} in dns["ports"]
    assert remote == {"ports": [{"protocol": "TCP", "port": 9443}]}  # at a URL: wherever it resolves
    assert tools["ports"] == [{"protocol": "TCP", "port": 7000}]
    assert tools["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "tools"
    # Its runs read the cluster as their own accounts: the API server where its EndpointSlice says.
    endpoints = await client.get(kinds.EndpointSlice, "kubernetes", namespace="default")
    [address] = endpoints["endpoints"][0]["addresses"]
    assert api_server == {"to": [{"ipBlock": {"cidr": f"{address}/32"}}],
                          "ports": [{"protocol": "TCP", "port": endpoints["ports"][0]["port"]}]}  # fmt: skip
    assert model == {"ports": [{"protocol": "TCP", "port": 8443}]}
    # Converged once its run has ended too (a run ending is news to its agent: it may prune).
    await finished(client, "fenced-run", namespace)
    await assert_writes_nothing(platform.agents, kubeloop.Request(namespace, "fenced"))

    await client.patch(Agent, "fenced", {"spec": {"networkPolicy": False}}, namespace=namespace)

    async def gone() -> None:
        assert not (await client.list(kinds.NetworkPolicy, namespace=namespace)).items

    await eventually(gone)
