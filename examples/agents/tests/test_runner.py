"""The agent runner for real: AgentRuns on a server whose node runs the runner's image as a
process (``python -m agentruntime``), the runner talking through the ``openai`` SDK to a test
double of a model provider (``fakemodel``, scripted per run: the one party a test cannot
reach). Each run ends as its model and limits make it: an answer with its usage, tools run and
their results sent back, a 429 waited out for its Retry-After; or Failed with its own reason
(the provider refusing the key, an unknown model, a model that cannot be reached, a malformed
tool call, a turn limit, a token budget, no key at all, the run's time). The transcript is the
pod's log, and holds no key. An agent with persistent memory runs its memory server as a process
too, and its runs store and search there, through the Service's name; an agent's MCP server
(``mcp-kubernetes``, a process as well) gives its runs tools through the ``mcp`` SDK, which
read the cluster as the server's own ServiceAccount and no further."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import agentplatform
import aiohttp
import openai
import pytest
from agentobjects import agent, agent_run, finished, process_node_server, ready, runtime
from agentplatform.api.v1alpha1 import AgentRun
from fakemodel import FakeModel, Step, answer, refuse, stall, tool_calls
from remotemcp import RemoteMCP

import kubeloop
from kubeloop import kinds
from kubeloop.testing import ServerThread

RUNNER_IMAGE = "ghcr.io/kubeloop/agent-python:0.1"
MCP_KUBERNETES_IMAGE = "ghcr.io/kubeloop/mcp-kubernetes:0.1"
KEY = "sk-test-key-never-logged"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """This module's server: its node runs the platform's images as processes."""
    server = process_node_server(tmp_path_factory.mktemp("pods"))
    yield server
    server.stop()


@pytest.fixture
async def models() -> AsyncIterator[list[FakeModel]]:
    started: list[FakeModel] = []
    yield started
    for model in started:
        await model.stop()


async def run_with(
    client: kubeloop.APIClient, namespace: str, models: list[FakeModel], name: str, script: list[Step],
    *, model: dict[str, Any] | None = None, agent_spec: dict[str, Any] | None = None,
    runtime_spec: dict[str, Any] | None = None, **run_spec: Any,
) -> FakeModel:  # fmt: skip
    """An agent of its own (``<name>-agent``) whose model is a fake speaking ``script``, and a
    run of it (``name``)."""
    fake = await FakeModel(script).start()
    models.append(fake)
    retries = [{"name": "MODEL_MAX_RETRIES", "value": "2"}]
    await client.create(runtime(f"{namespace}-{name}", RUNNER_IMAGE, env=retries, **(runtime_spec or {})))
    spec = agent(f"{name}-agent", namespace, f"{namespace}-{name}", **(agent_spec or {}))
    spec["spec"]["model"] = {"provider": "openai", "name": "fake-model", "baseURL": fake.url,
                             "authSecretRef": {"name": "key", "key": "token"}, **(model or {})}  # fmt: skip
    await client.create(spec)
    await client.create(agent_run(name, namespace, f"{name}-agent", **run_spec))
    return fake


async def transcript(client: kubeloop.APIClient, run: str, namespace: str) -> list[dict[str, Any]]:
    pods = await client.list(kinds.Pod, namespace=namespace, label_selector=f"batch.kubernetes.io/job-name={run}")
    pod = pods.items[0]["metadata"]["name"]
    _, log = await client.request("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}/log", accept="text/plain")
    assert KEY not in log.decode()
    return [json.loads(line) for line in log.decode().splitlines()]


async def with_key(client: kubeloop.APIClient, namespace: str, token: str = KEY, name: str = "key") -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
              "stringData": {"token": token}}  # fmt: skip
    await client.create(secret)


async def test_runs_answer_run_tools_and_wait_out_a_429(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str, models: list[FakeModel]
) -> None:
    await with_key(client, namespace)
    prices = {"pricing": {"inputPerMillion": "2.50", "outputPerMillion": "10"}}
    plain = await run_with(client, namespace, models, "plain", [answer("3 nodes, all Ready", 20, 5)], runtime_spec=prices)
    tools = await run_with(client, namespace, models, "tools", [
        tool_calls(("memory_store", '{"text": "the cluster has 3 nodes"}'), ("memory_search", '{"query": "nodes"}')),
        answer("I noted it"),
    ], agent_spec={"memory": {"enabled": True}})  # fmt: skip
    limited = await run_with(client, namespace, models, "limited", [
        refuse(429, "slow down", {"retry-after": "1"}), answer("after the wait"),
    ])  # fmt: skip
    runs = {name: await finished(client, name, namespace, timeout=60) for name in ("plain", "tools", "limited")}
    for run in runs.values():
        assert run.status is not None and run.status.phase == "Succeeded", run.status

    status = runs["plain"].status
    assert status is not None and status.result == "3 nodes, all Ready" and status.usage is not None
    assert status.usage.model_dump() == {"promptTokens": 20, "completionTokens": 5, "totalTokens": 25,
                                         "turns": 1, "toolCalls": 0, "model": "fake-model"}  # fmt: skip
    assert status.cost_estimate == "0.000100 USD"  # 20 tokens at 2.50 and 5 at 10 per million
    sent = plain.requests[0]
    assert sent.authorization == f"Bearer {KEY}" and sent.body["model"] == "fake-model"
    assert [m["role"] for m in sent.body["messages"]] == ["system", "user"]
    # The agent's prompt, then where it runs (its namespace, from the downward API).
    assert sent.body["messages"][0]["content"] == (
        f"You answer questions about Kubernetes.\n\nYou are the agent plain-agent in the Kubernetes namespace {namespace}."
    )
    assert sent.body["messages"][1]["content"] == "summarise the cluster"
    lines = await transcript(client, "plain", namespace)
    assert [line["event"] for line in lines] == ["start", "model", "end"]

    # Two tool calls in one turn, their results sent back; what was stored reaches the memory.
    status = runs["tools"].status
    assert status is not None and status.result == "I noted it" and status.usage is not None
    assert (status.usage.turns, status.usage.tool_calls, status.usage.total_tokens) == (2, 2, 65)
    returned = [m for m in tools.requests[1].body["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in returned] == ["stored", "the cluster has 3 nodes"]
    memory = await client.get(kinds.ConfigMap, "tools-agent-memory", namespace=namespace)
    assert "the cluster has 3 nodes" in memory["data"]["MEMORY.md"]
    events = [line["event"] for line in await transcript(client, "tools", namespace)]
    assert events == ["start", "model", "tool", "tool", "model", "end"]

    # The 429's Retry-After was waited out before the call was made again.
    status = runs["limited"].status
    assert status is not None and status.result == "after the wait"
    first, second = limited.requests
    assert second.arrived - first.arrived >= 1.0


async def test_runs_that_cannot_answer_fail_with_their_own_reason(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str, models: list[FakeModel]
) -> None:
    await with_key(client, namespace)
    refused = await run_with(client, namespace, models, "refused", [refuse(401, "Incorrect API key provided")])
    await run_with(client, namespace, models, "unknown", [refuse(404, "The model does not exist")])
    await run_with(client, namespace, models, "malformed", [tool_calls(("memory_search", "{not json"))])
    await run_with(client, namespace, models, "undeclared", [tool_calls(("rm_rf", "{}"))])
    await run_with(client, namespace, models, "looping", [tool_calls(("memory_search", '{"query": "x"}'))] * 2,
                   agent_spec={"maxTurns": 2})  # fmt: skip  (the agent's limit)
    await run_with(client, namespace, models, "costly", [tool_calls(("memory_search", '{"query": "x"}'))],
                   maxTokens=30)  # fmt: skip
    await run_with(client, namespace, models, "unreachable", [], model={"baseURL": "http://127.0.0.1:9/v1"})
    await run_with(client, namespace, models, "failing-tool", [tool_calls(("memory_search", '{"query": "  "}'))])
    expected = {
        "refused": ("ModelRefused", "Incorrect API key provided"),
        "unknown": ("UnknownModel", "The model does not exist"),
        "malformed": ("MalformedToolCall", "not JSON"),
        "undeclared": ("MalformedToolCall", "'rm_rf', which is not one of its tools"),
        "looping": ("TurnLimitReached", "within 2 turns"),
        "costly": ("BudgetExceeded", "40 tokens, over its budget of 30"),
        "unreachable": ("ModelUnreachable", "cannot be reached at http://127.0.0.1:9/v1"),
        "failing-tool": ("ToolFailed", "memory_search: the argument 'query'"),
    }
    for name, (reason, words) in expected.items():
        run = await finished(client, name, namespace, timeout=60)
        assert run.status is not None and (run.status.phase, run.status.reason) == ("Failed", reason), run.status
        assert words in (run.status.message or ""), run.status
        assert not run.status.result
    assert len(refused.requests) == 1  # a refused key is not tried again
    looping = await client.get(AgentRun, "looping", namespace=namespace)
    assert looping.status is not None and looping.status.usage is not None and looping.status.usage.turns == 2


async def test_a_run_without_a_key_or_time_enough_fails_saying_so(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str, models: list[FakeModel]
) -> None:
    await with_key(client, namespace)
    await with_key(client, namespace, token="", name="empty")
    await run_with(client, namespace, models, "keyless", [answer("never")],
                   model={"authSecretRef": {"name": "empty", "key": "token"}})  # fmt: skip
    released = asyncio.Event()
    try:
        await run_with(client, namespace, models, "slow", [stall(released, answer("too late"))], timeoutSeconds=4)
        keyless = await finished(client, "keyless", namespace, timeout=60)
        assert keyless.status is not None and (keyless.status.phase, keyless.status.reason) == ("Failed", "NoCredentials")
        slow = await finished(client, "slow", namespace, timeout=60)
        assert slow.status is not None and (slow.status.phase, slow.status.reason) == ("Failed", "TimedOut")
    finally:
        released.set()


async def test_a_run_stores_and_finds_in_its_agents_memory_server(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str, models: list[FakeModel]
) -> None:
    await with_key(client, namespace)
    fake = await run_with(client, namespace, models, "remembers", [
        tool_calls(("memory_store", '{"text": "the on-call engineer is Ada"}')),
        tool_calls(("memory_search", '{"query": "who is on-call"}')),
        answer("Ada is on call"),
    ], agent_spec={"memory": {"enabled": True, "persistent": True}})  # fmt: skip
    run = await finished(client, "remembers", namespace, timeout=60)
    assert run.status is not None
    assert (run.status.phase, run.status.result) == ("Succeeded", "Ada is on call"), run.status.message
    found = [m for m in fake.requests[2].body["messages"] if m["role"] == "tool"]
    assert found[-1]["content"] == "the on-call engineer is Ada"  # from the memory server
    # In the server's database on the claim, marked with the run; not in the memory file.
    pods = await client.list(kinds.Pod, namespace=namespace, label_selector="app.kubernetes.io/name=memory-server")
    address = pods.items[0]["status"]["podIP"]
    async with aiohttp.ClientSession() as http, http.get(f"http://{address}:8080/v1/memories") as listed:
        items = (await listed.json())["items"]
    assert [(item["text"], item["source"]) for item in items] == [("the on-call engineer is Ada", "run remembers")]
    memory_file = await client.get(kinds.ConfigMap, "remembers-agent-memory", namespace=namespace)
    assert "Ada" not in memory_file["data"]["MEMORY.md"]


async def test_runs_call_their_agents_mcp_server_which_reads_only_what_its_account_may(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str, models: list[FakeModel]
) -> None:
    await with_key(client, namespace)
    # The account mcp-kubernetes acts as: it may read ConfigMaps, and nothing else.
    reader = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader", "namespace": namespace}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "reader", "namespace": namespace},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "reader", "namespace": namespace},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
               "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}]}
    inventory = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "inventory", "namespace": namespace}}
    server = {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "MCPServer", "metadata": {"name": "k8s", "namespace": namespace},
              "spec": {"image": MCP_KUBERNETES_IMAGE, "port": 8090, "serviceAccountName": "reader",
                       "denyTools": ["namespace_*"]}}  # fmt: skip  (the server's own filter)
    for obj in (reader, role, binding, inventory, server):
        await client.create(obj)
    tools = {"mcpServerRefs": ["k8s"]}
    listing = json.dumps({"kind": "configmaps", "namespace": namespace})
    inspects = await run_with(client, namespace, models, "inspects", [
        tool_calls(("list_objects", listing)), answer("there is an inventory"),
    ], agent_spec=tools)  # fmt: skip
    pods = json.dumps({"kind": "pods", "namespace": namespace})
    await run_with(client, namespace, models, "pries", [tool_calls(("list_objects", pods))], agent_spec=tools)
    secret = json.dumps({"kind": "secret", "name": "key", "namespace": namespace})
    await run_with(client, namespace, models, "peeks", [tool_calls(("get_object", secret))], agent_spec=tools)
    # An agent that allows some tools and denies others: only those are offered, or can be called.
    narrowed = await run_with(client, namespace, models, "narrowed", [tool_calls(("get_object", secret))],
                              agent_spec={**tools, "allowTools": ["list_*", "memory_*"], "denyTools": ["memory_store"]})  # fmt: skip

    run = await finished(client, "inspects", namespace, timeout=60)
    assert run.status is not None and (run.status.phase, run.status.result) == ("Succeeded", "there is an inventory")
    offered = {tool["function"]["name"] for tool in inspects.requests[0].body["tools"]}
    own = {"k8s_list_objects", "k8s_get_object", "k8s_namespace_events", "memory_search", "memory_store"}
    assert offered == {"list_objects", "get_object"} | own  # not namespace_events: its server denies it
    [listed] = [m["content"] for m in inspects.requests[1].body["messages"] if m["role"] == "tool"]
    assert "inventory" in listed.splitlines() and "kube-root-ca.crt" in listed.splitlines()
    failed = await finished(client, "narrowed", namespace, timeout=60)
    assert {tool["function"]["name"] for tool in narrowed.requests[0].body["tools"]} == {"list_objects", "memory_search"}
    assert failed.status is not None and failed.status.reason == "MalformedToolCall", failed.status
    assert "'get_object', which is not one of its tools" in (failed.status.message or "")
    for name, words in (("pries", "403"), ("peeks", "Secrets are not read")):
        failed = await finished(client, name, namespace, timeout=60)
        assert failed.status is not None and (failed.status.phase, failed.status.reason) == ("Failed", "ToolFailed")
        assert words in (failed.status.message or ""), failed.status


async def test_runs_reach_mcp_servers_at_a_url_with_the_header_from_their_secret(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str, models: list[FakeModel]
) -> None:
    """MCPServers that run elsewhere (``remotemcp``: the SDK's server in this process, standing in
    for a hosted tool service), over streamable HTTP and SSE: the runner sends the header its
    Secret holds, and nothing of it reaches the run's input or transcript. A wrong one is
    refused at once (MCPRefused), not waited on."""
    await with_key(client, namespace)
    remote = await RemoteMCP("Bearer remote-s3cret").start()
    try:
        for name, token in (("mcp-token", "Bearer remote-s3cret"), ("guessed-token", "Bearer guess")):
            await client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
                                 "stringData": {"token": token}})  # fmt: skip
        for name, url, secret in (("hosted", remote.url, "mcp-token"), ("hosted-sse", remote.sse_url, "mcp-token"),
                                  ("guessing", remote.url, "guessed-token")):  # fmt: skip
            header = {"name": "Authorization", "secretKeyRef": {"name": secret, "key": "token"}}
            await client.create({"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "MCPServer",
                                 "metadata": {"name": name, "namespace": namespace},
                                 "spec": {"url": url, "headers": [header]}})  # fmt: skip
        asked = {}
        for run, server in (("asks-remote", "hosted"), ("asks-sse", "hosted-sse")):
            asked[run] = await run_with(client, namespace, models, run, [
                tool_calls(("deploy_status", '{"service": "shop"}')), answer("shop is at v42"),
            ], agent_spec={"mcpServerRefs": [server]})  # fmt: skip
        await run_with(client, namespace, models, "guesses", [answer("never asked")],
                       agent_spec={"mcpServerRefs": ["guessing"]})  # fmt: skip

        for run, fake in asked.items():
            done = await finished(client, run, namespace, timeout=60)
            assert done.status is not None and (done.status.phase, done.status.result) == ("Succeeded", "shop is at v42"), done.status
            assert [m["content"] for m in fake.requests[1].body["messages"] if m["role"] == "tool"] == ["shop: deployed at v42"]
            lines = await transcript(client, run, namespace)
            assert [line["name"] for line in lines if line["event"] == "tool"] == ["deploy_status"]
            assert "remote-s3cret" not in json.dumps(lines)
            snapshot = await client.get(kinds.ConfigMap, f"{run}-input", namespace=namespace)
            assert "remote-s3cret" not in json.dumps(snapshot)
        refused = await finished(client, "guesses", namespace, timeout=60)
        assert refused.status is not None and (refused.status.phase, refused.status.reason) == ("Failed", "MCPRefused")
        assert refused.status.message == (
            f"the MCP server at {remote.url} refused the run (401 Unauthorized), with the headers Authorization"
        )
        assert "Bearer guess" in remote.seen and set(remote.seen) <= {"Bearer remote-s3cret", "Bearer guess"}
    finally:
        await remote.stop()


async def test_runs_offer_their_skills_tools_and_run_them_in_the_pod(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str, models: list[FakeModel]
) -> None:
    """A skill pack's skill declares tools: commands the runner runs in the run's pod, the model's
    arguments on stdin. One answers, one fails (ToolFailed, in its own words), one outlives its
    time (killed, ToolFailed)."""
    await with_key(client, namespace)
    echo = {"name": "echo_arguments", "description": "Says back what it was given.",
            "parameters": {"type": "object", "properties": {"service": {"type": "string"}}, "required": ["service"]},
            "command": ["sh", "-c", "cat"]}  # fmt: skip
    broken = {"name": "check_disk", "command": ["sh", "-c", "echo 'disk /var is full' >&2; exit 3"]}
    slow = {"name": "wait_forever", "command": ["sleep", "600"], "timeoutSeconds": 1}
    pack = {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "SkillPack",
            "metadata": {"name": "ops", "namespace": namespace},
            "spec": {"skills": [{"name": "triage", "text": "Echo first.", "tools": [echo, broken, slow]}]}}  # fmt: skip
    await client.create(pack)
    skilled = {"skillPackRefs": ["ops"]}
    arguments = json.dumps({"service": "shop"})
    asks = await run_with(client, namespace, models, "echoes", [
        tool_calls(("echo_arguments", arguments)), answer("it echoed"),
    ], agent_spec=skilled)  # fmt: skip
    await run_with(client, namespace, models, "breaks", [tool_calls(("check_disk", "{}"))], agent_spec=skilled)
    await run_with(client, namespace, models, "waits", [tool_calls(("wait_forever", "{}"))], agent_spec=skilled)

    # The operator writes the pack's ConfigMap as it reconciles the pack; a run that offered the
    # pack's tools (below) had it mounted, so it is there by then.
    run = await finished(client, "echoes", namespace, timeout=60)
    config = await client.get(kinds.ConfigMap, "skillpack-ops", namespace=namespace)
    assert [tool["name"] for tool in json.loads(config["data"][".tools.json"])] == [
        "echo_arguments", "check_disk", "wait_forever",
    ]  # fmt: skip
    assert run.status is not None and (run.status.phase, run.status.result) == ("Succeeded", "it echoed"), run.status
    offered = {tool["function"]["name"]: tool["function"] for tool in asks.requests[0].body["tools"]}
    assert offered["echo_arguments"]["parameters"] == echo["parameters"]
    assert {"check_disk", "wait_forever"} <= offered.keys()
    assert "Echo first." in asks.requests[0].body["messages"][0]["content"]
    assert [m["content"] for m in asks.requests[1].body["messages"] if m["role"] == "tool"] == [arguments]
    for name, message in (("breaks", "check_disk: sh exited with 3: disk /var is full"),
                          ("waits", "wait_forever: sleep did not finish within 1 s: killed")):  # fmt: skip
        failed = await finished(client, name, namespace, timeout=60)
        assert failed.status is not None and (failed.status.phase, failed.status.reason) == ("Failed", "ToolFailed")
        assert failed.status.message == message, failed.status


async def test_the_official_openai_client_talks_to_an_agent_that_answers_with_its_tools(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str, models: list[FakeModel]
) -> None:
    """Server mode: the Agent's Deployment runs the same image as its runs, which serves the agent
    as an OpenAI-compatible endpoint: its callers' key, its rate limit, its tools."""
    await with_key(client, namespace)
    await with_key(client, namespace, token="let-me-in", name="callers")
    fake = await FakeModel([
        tool_calls(("memory_store", '{"text": "a caller came"}')), answer("hello from the agent", 30, 10),
    ]).start()  # fmt: skip
    models.append(fake)
    await client.create(runtime(f"{namespace}-served", RUNNER_IMAGE, port=8085))
    spec = agent("served", namespace, f"{namespace}-served",
                 endpoint={"authSecretRef": {"name": "callers", "key": "token"}, "rateLimitPerMinute": 2})  # fmt: skip
    spec["spec"]["model"] = {"provider": "openai", "name": "fake-model", "baseURL": fake.url,
                             "authSecretRef": {"name": "key", "key": "token"}}  # fmt: skip
    await client.create(spec)
    await ready(client, "served", namespace)  # its server listens
    pods = await client.list(kinds.Pod, namespace=namespace, label_selector="app.kubernetes.io/instance=served")
    base_url = f"http://{pods.items[0]['status']['podIP']}:8085/v1"

    async with openai.AsyncOpenAI(base_url=base_url, api_key="let-me-in", max_retries=0) as caller:
        listed = await caller.models.list()
        assert [model.id for model in listed.data] == ["served"]
        answered = await caller.chat.completions.create(
            model="served", messages=[{"role": "user", "content": "note that I came"}]
        )
        assert answered.choices[0].message.content == "hello from the agent"
        assert answered.usage is not None and answered.usage.total_tokens == 40 + 40  # both turns
        sent = fake.requests[0].body["messages"]
        assert sent[0]["role"] == "system" and sent[-1] == {"role": "user", "content": "note that I came"}
        assert [m["content"] for m in fake.requests[1].body["messages"] if m["role"] == "tool"] == ["stored"]
        with pytest.raises(openai.BadRequestError, match="messages"):
            await caller.chat.completions.create(model="served", messages=[])
        with pytest.raises(openai.RateLimitError):  # two a minute: the answer and the bad request
            await caller.chat.completions.create(model="served", messages=[{"role": "user", "content": "again"}])
    async with openai.AsyncOpenAI(base_url=base_url, api_key="wrong", max_retries=0) as stranger:
        with pytest.raises(openai.AuthenticationError):
            await stranger.chat.completions.create(model="served", messages=[{"role": "user", "content": "hi"}])


async def test_a_run_reads_kubernetes_as_its_own_account_and_no_further(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str, models: list[FakeModel]
) -> None:
    """The runner's own Kubernetes tools act as the run's ServiceAccount: its Role lets it read
    its own input, and nothing else."""
    await with_key(client, namespace)
    own_input = json.dumps({"kind": "configmap", "name": "reader-input", "namespace": namespace})
    reader = await run_with(client, namespace, models, "reader", [
        tool_calls(("k8s_get_object", own_input)), answer("read it"),
    ])  # fmt: skip
    others = json.dumps({"kind": "configmaps", "namespace": namespace})
    await run_with(client, namespace, models, "nosy", [tool_calls(("k8s_list_objects", others))])
    run = await finished(client, "reader", namespace, timeout=60)
    assert run.status is not None and run.status.phase == "Succeeded", run.status
    [read] = [m["content"] for m in reader.requests[1].body["messages"] if m["role"] == "tool"]
    assert json.loads(read)["data"]["task"] == "summarise the cluster"  # its own snapshot, read as itself
    nosy = await finished(client, "nosy", namespace, timeout=60)
    assert nosy.status is not None and (nosy.status.phase, nosy.status.reason) == ("Failed", "ToolFailed")
    assert "403" in (nosy.status.message or ""), nosy.status
