"""The agent platform operator (examples/agents) end to end on the embedded server with workload
simulation: an Agent becomes Ready with every object it owns; a runtime edit rolls the pods of
exactly its agents; a deleted runtime is reported and its agents' workloads left running until
it comes back; a skill pack or MCP server wakes exactly the agents that use it; a deleted agent
takes its objects, runs and schedules; a second reconcile of a converged agent, skill pack or
MCP server writes nothing."""

from __future__ import annotations

import json

import agentplatform
import pytest
from agentobjects import agent, assert_writes_nothing, condition, exists, pod_hash, ready, runtime
from agentplatform.api.v1alpha1 import Agent, AgentRun, AgentSchedule, MCPServer, ServingRuntime, SkillPack
from agentplatform.controllers.builders import CONFIG_HASH, skills_volume

import kubeloop
from kubeloop import kinds
from kubeloop.testing import eventually


async def test_an_agent_becomes_ready_with_everything_it_owns(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    await client.create(runtime(f"{namespace}-rt", port=9000))
    await client.create(agent("helper", namespace, f"{namespace}-rt"))
    found = await ready(client, "helper", namespace)
    assert found.status is not None
    assert found.status.runtime_name == f"{namespace}-rt"
    assert found.status.url == f"http://helper.{namespace}.svc.cluster.local:9000"
    assert found.status.ready_replicas == 1 and found.status.observed_generation == 1
    assert condition(found, "RuntimeResolved") == ("True", "Resolved")
    assert "agents.kubeloop.dev/runs" in (found.metadata.finalizers or [])

    deployment = await client.get(kinds.Deployment, "helper", namespace=namespace)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "ghcr.io/example/agent:1"
    assert container["ports"] == [{"name": "http", "containerPort": 9000, "protocol": "TCP"}]
    env = {var["name"]: var for var in container["env"]}
    assert [var["name"] for var in container["env"]] == sorted(env)  # sorted: a stable template
    assert env["LOG_LEVEL"]["value"] == "debug"  # the agent's value wins over the runtime's
    # The model's key is a file, in no variable a tool the agent runs would inherit.
    assert [var["name"] for var in container["env"] if "valueFrom" in var] == ["POD_IP", "POD_NAMESPACE"]  # the downward API's
    assert env["MODEL_API_KEY_FILE"]["value"] == "/var/run/secrets/agents.kubeloop.dev/model/api-key"
    pod = deployment["spec"]["template"]["spec"]
    (credentials,) = [volume for volume in pod["volumes"] if volume["name"] == "model-credentials"]
    assert credentials["secret"] == {
        "secretName": "llm", "items": [{"key": "token", "path": "api-key"}], "defaultMode": 420
    }  # fmt: skip
    mount = {
        "name": "model-credentials",
        "mountPath": "/var/run/secrets/agents.kubeloop.dev/model",
        "readOnly": True,
    }
    assert mount in container["volumeMounts"]
    # Its own account, which holds no token: the pods reach no API.
    assert (pod["serviceAccountName"], pod["automountServiceAccountToken"]) == ("helper", False)
    account = await client.get(kinds.ServiceAccount, "helper", namespace=namespace)
    assert account["automountServiceAccountToken"] is False
    assert deployment["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH] == found.status.config_hash
    config = await client.get(kinds.ConfigMap, "helper-config", namespace=namespace)
    assert config["data"]["system-prompt"] == "You answer questions about Kubernetes."
    service = await client.get(kinds.Service, "helper", namespace=namespace)
    assert service["spec"]["ports"][0]["port"] == 9000
    for owned in (deployment, config, service, account):
        (ref,) = owned["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["controller"]) == ("Agent", "helper", True)


async def test_a_second_reconcile_of_a_converged_agent_writes_nothing(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("steady", namespace, f"{namespace}-rt", replicas=2))
    await ready(client, "steady", namespace)
    await assert_writes_nothing(platform.agents, kubeloop.Request(namespace, "steady"))


async def test_a_runtime_edit_rolls_exactly_its_agents(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    first, second = f"{namespace}-a", f"{namespace}-b"
    await client.create(runtime(first))
    await client.create(runtime(second))
    await client.create(agent("uses-a", namespace, first))
    await client.create(agent("also-a", namespace, first))
    await client.create(agent("uses-b", namespace, second))
    for name in ("uses-a", "also-a", "uses-b"):
        await ready(client, name, namespace)
    before = {name: await pod_hash(client, name, namespace) for name in ("uses-a", "also-a", "uses-b")}
    await client.patch(ServingRuntime, first, {"spec": {"image": "ghcr.io/example/agent:2"}})

    async def rolled() -> None:
        for name in ("uses-a", "also-a"):
            assert await pod_hash(client, name, namespace) != before[name]
            deployment = await client.get(kinds.Deployment, name, namespace=namespace)
            assert (
                deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "ghcr.io/example/agent:2"
            )

    await eventually(rolled, timeout=20)
    for name in ("uses-a", "also-a"):
        await ready(client, name, namespace)
    assert await pod_hash(client, "uses-b", namespace) == before["uses-b"]


async def test_an_unresolved_runtime_is_reported_and_running_pods_are_left_alone(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    name = f"{namespace}-rt"
    await client.create(runtime(name))
    await client.create(agent("patient", namespace, name))
    await ready(client, "patient", namespace)
    running = await pod_hash(client, "patient", namespace)

    await client.delete(ServingRuntime, name)

    async def unresolved(reason: str) -> None:
        found = await client.get(Agent, "patient", namespace=namespace)
        assert condition(found, "RuntimeResolved") == ("False", reason)

    await eventually(lambda: unresolved("RuntimeNotFound"), timeout=20)
    assert await pod_hash(client, "patient", namespace) == running
    assert condition(await client.get(Agent, "patient", namespace=namespace), "Ready")[0] == "True"

    await client.create(runtime(name, disabled=True))
    await eventually(lambda: unresolved("RuntimeDisabled"), timeout=20)
    await client.patch(ServingRuntime, name, {"spec": {"disabled": False}})

    async def resolved() -> None:
        found = await client.get(Agent, "patient", namespace=namespace)
        assert condition(found, "RuntimeResolved") == ("True", "Resolved")

    await eventually(resolved, timeout=20)
    assert await pod_hash(client, "patient", namespace) == running  # the same runtime spec again


async def test_skill_packs_and_mcp_servers_wake_the_agents_that_use_them(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(
        agent("skilled", namespace, f"{namespace}-rt", skillPackRefs=["k8s"], mcpServerRefs=["tools"])
    )
    await client.create(agent("plain", namespace, f"{namespace}-rt"))
    await ready(client, "skilled", namespace)
    await ready(client, "plain", namespace)
    plain = await pod_hash(client, "plain", namespace)
    before = await pod_hash(client, "skilled", namespace)

    pack = {
        "apiVersion": "agents.kubeloop.dev/v1alpha1",
        "kind": "SkillPack",
        "metadata": {"name": "k8s", "namespace": namespace},
        "spec": {"skills": [{"name": "debug-pods", "text": "Read the events first."}]},
    }
    await client.create(pack)
    server = {
        "apiVersion": "agents.kubeloop.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": "tools", "namespace": namespace},
        "spec": {"image": "ghcr.io/example/mcp:1", "port": 3000},
    }
    await client.create(server)

    async def mounted() -> None:
        deployment = await client.get(kinds.Deployment, "skilled", namespace=namespace)
        pod = deployment["spec"]["template"]["spec"]
        volume = {"name": skills_volume("k8s"), "configMap": {"name": "skillpack-k8s", "defaultMode": 420}}
        assert volume in pod["volumes"]
        env = {var["name"]: var.get("value") for var in pod["containers"][0]["env"]}
        assert env["MCP_SERVERS"] == f"http://tools.{namespace}.svc.cluster.local:3000/mcp"

    await eventually(mounted, timeout=20)
    skills = await client.get(kinds.ConfigMap, "skillpack-k8s", namespace=namespace)
    assert skills["data"] == {"debug-pods": "Read the events first."}
    # The MCP server's pods run as its own account, with no token: they reach no API. (Its
    # controller makes the account, then the Deployment, on its own schedule: waited for.)
    mcp = await eventually(lambda: client.get(kinds.Deployment, "tools", namespace=namespace))
    tools = mcp["spec"]["template"]["spec"]
    assert (tools["serviceAccountName"], tools["automountServiceAccountToken"]) == ("tools", False)
    account = await client.get(kinds.ServiceAccount, "tools", namespace=namespace)
    assert account["automountServiceAccountToken"] is False
    assert account["metadata"]["ownerReferences"][0]["kind"] == "MCPServer"
    assert tools["containers"][0]["image"] == "ghcr.io/example/mcp:1"
    assert await pod_hash(client, "skilled", namespace) != before
    assert await pod_hash(client, "plain", namespace) == plain

    # Converged, the pack and the server are left alone by another pass.
    async def served() -> None:
        found = await client.get(MCPServer, "tools", namespace=namespace)
        assert found.status is not None and found.status.ready_replicas == 1

    await eventually(served, timeout=20)
    for reconciler, name in ((platform.skill_packs, "k8s"), (platform.mcp_servers, "tools")):
        await assert_writes_nothing(reconciler, kubeloop.Request(namespace, name))


async def test_a_deleted_agent_takes_its_objects_runs_and_schedules(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("leaving", namespace, f"{namespace}-rt"))
    await client.create(agent("staying", namespace, f"{namespace}-rt"))
    await ready(client, "leaving", namespace)
    group = "agents.kubeloop.dev/v1alpha1"
    for target in ("leaving", "staying"):
        await client.create(
            {
                "apiVersion": group,
                "kind": "AgentRun",
                "metadata": {"name": f"{target}-run", "namespace": namespace},
                "spec": {"agentRef": target, "task": "summarise the cluster"},
            }
        )
        await client.create(
            {
                "apiVersion": group,
                "kind": "AgentSchedule",
                "metadata": {"name": f"{target}-nightly", "namespace": namespace},
                "spec": {"agentRef": target, "schedule": "0 3 * * *", "task": "report"},
            }
        )
    await client.delete(Agent, "leaving", namespace=namespace)

    async def gone() -> None:
        assert [a.metadata.name for a in await client.list(Agent, namespace=namespace)] == ["staying"]
        assert [r.metadata.name for r in await client.list(AgentRun, namespace=namespace)] == ["staying-run"]
        schedules = await client.list(AgentSchedule, namespace=namespace)
        assert [s.metadata.name for s in schedules] == ["staying-nightly"]
        for kind, name in (
            (kinds.Deployment, "leaving"),
            (kinds.Service, "leaving"),
            (kinds.ConfigMap, "leaving-config"),
        ):
            assert not await exists(client, kind, name, namespace), (kind, name)

    await eventually(gone, timeout=20)


async def test_an_mcp_server_at_a_url_runs_nothing_and_its_header_reaches_pods_as_a_file(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    """A server that runs elsewhere: what its image made goes, its URL is its status, and the
    agents that use it get the URL and, as a file from the Secret, the header its requests carry."""
    server = {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "MCPServer",
              "metadata": {"name": "tools", "namespace": namespace}, "spec": {"image": "ghcr.io/example/mcp:1"}}  # fmt: skip
    await client.create(server)
    await eventually(lambda: client.get(kinds.Deployment, "tools", namespace=namespace))
    url = "https://mcp.example.com:9443/mcp"
    header = {"name": "Authorization", "secretKeyRef": {"name": "mcp-token", "key": "token"}}
    await client.create(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "mcp-token", "namespace": namespace},
         "stringData": {"token": "Bearer never-in-a-spec"}}
    )  # fmt: skip
    await client.patch(MCPServer, "tools", {"spec": {"image": None, "url": url, "headers": [header]}}, namespace=namespace)

    async def remote() -> None:
        found = await client.get(MCPServer, "tools", namespace=namespace)
        assert found.status is not None and (found.status.url, found.status.ready_replicas) == (url, None)
        for kind in (kinds.Deployment, kinds.Service, kinds.ServiceAccount):
            assert not await exists(client, kind, "tools", namespace), kind

    await eventually(remote, timeout=20)
    await assert_writes_nothing(platform.mcp_servers, kubeloop.Request(namespace, "tools"))

    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("caller", namespace, f"{namespace}-rt", mcpServerRefs=["tools"]))
    await ready(client, "caller", namespace)
    pod = (await client.get(kinds.Deployment, "caller", namespace=namespace))["spec"]["template"]["spec"]
    env = {var["name"]: var for var in pod["containers"][0]["env"]}
    assert env["MCP_SERVERS"]["value"] == url
    where = "/var/run/secrets/agents.kubeloop.dev/mcp-headers"
    assert json.loads(env["MCP_HEADERS"]["value"]) == {url: {"Authorization": f"{where}/0/Authorization"}}
    [volume] = [v for v in pod["volumes"] if v["name"] == "mcp-headers"]
    sources = [{"secret": {"name": "mcp-token", "items": [{"key": "token", "path": "0/Authorization"}]}}]
    assert volume["projected"]["sources"] == sources
    assert {"name": "mcp-headers", "mountPath": where, "readOnly": True} in pod["containers"][0]["volumeMounts"]
    assert not any("mcp-token" in json.dumps(var) for var in env.values())  # a file, never a variable

    # Exactly one of image and url; what only a server run here has; a URL that is one.
    refused = [
        ({"image": "ghcr.io/example/mcp:1", "url": url}, "spec: Invalid value: \"object\": exactly one of image"),
        ({}, "spec: Invalid value: \"object\": exactly one of image"),
        ({"url": url, "serviceAccountName": "reader"}, "env and serviceAccountName are for a server the platform runs"),
        ({"url": "ftp://mcp.example.com/mcp"}, "spec.url: Invalid value: \"ftp://mcp.example.com/mcp\""),
        ({"url": "https://a.example.com/x,y"}, "spec.url: Invalid value"),
        ({"url": url, "headers": [{**header, "name": "Bad Header"}]}, "spec.headers[0].name: Invalid value"),
    ]
    for spec, message in refused:
        bad = {**server, "metadata": {"name": "bad", "namespace": namespace}, "spec": spec}
        with pytest.raises(kubeloop.errors.Invalid) as invalid:
            await client.create(bad)
        assert message in invalid.value.message, (spec, invalid.value.message)


async def test_a_skill_packs_tools_are_listed_beside_its_skills_and_checked_at_the_api(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    tool = {"name": "disk_usage", "command": ["df", "-h"]}
    pack = {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "SkillPack",
            "metadata": {"name": "ops", "namespace": namespace},
            "spec": {"skills": [{"name": "disks", "text": "Look at the disks.", "tools": [tool]}]}}  # fmt: skip
    await client.create(pack)

    async def listed() -> None:
        found = await client.get(SkillPack, "ops", namespace=namespace)
        assert found.status is not None and (found.status.skills, found.status.tools) == (1, 1)
        config = await client.get(kinds.ConfigMap, "skillpack-ops", namespace=namespace)
        parameters = {"type": "object", "properties": {}}
        assert json.loads(config["data"][".tools.json"]) == [
            {"skill": "disks", "name": "disk_usage", "description": "", "parameters": parameters,
             "command": ["df", "-h"], "timeoutSeconds": 30}
        ]  # fmt: skip

    await eventually(listed, timeout=20)
    refused = [
        ({"name": ".tools.json", "text": "x"}, "spec.skills[0].name: Invalid value"),
        ({"name": "s", "text": "x", "tools": [{**tool, "parameters": {"type": "string"}}]},
         "spec.skills[0].tools[0].parameters: Invalid value: \"object\": a tool's parameters are an object's JSON schema"),
        ({"name": "s", "text": "x", "tools": [{**tool, "name": "no spaces"}]}, "spec.skills[0].tools[0].name: Invalid value"),
        ({"name": "s", "text": "x", "tools": [{**tool, "command": []}]}, "spec.skills[0].tools[0].command"),
    ]  # fmt: skip
    for skill, message in refused:
        bad = {**pack, "metadata": {"name": "bad", "namespace": namespace}, "spec": {"skills": [skill]}}
        with pytest.raises(kubeloop.errors.Invalid) as invalid:
            await client.create(bad)
        assert message in invalid.value.message, (skill, invalid.value.message)


async def test_names_the_platform_cannot_use_are_refused_at_the_api(
    client: kubeloop.APIClient, namespace: str
) -> None:
    """An Agent names a Service (a DNS-1035 label), a run a Job whose pods carry it as a label, a
    schedule its runs: names that would fail later, in the operator, are refused when applied."""
    for name in ("a" * 64, "1st", "with.dot"):
        with pytest.raises(kubeloop.errors.Invalid, match="an Agent's name must be at most 63 characters"):
            await client.create(agent(name, namespace, "rt"))
    await client.create(agent("a" * 63, namespace, "rt"))
    schedule = {
        "apiVersion": "agents.kubeloop.dev/v1alpha1",
        "kind": "AgentSchedule",
        "metadata": {"name": "s" * 53, "namespace": namespace},
        "spec": {"agentRef": "a", "schedule": "0 * * * *", "task": "t"},
    }
    with pytest.raises(
        kubeloop.errors.Invalid, match="an AgentSchedule's name must be at most 52 characters"
    ):
        await client.create(schedule)
    schedule["metadata"]["name"] = "s" * 52
    await client.create(schedule)


async def test_a_runtime_the_server_refuses_marks_its_agent_until_it_is_fixed(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    """A runtime whose environment variable name no pod may have: the Deployment is refused, the
    agent's Ready is False with reason Invalid and the server's message naming the field, and
    nothing is retried; fixing the runtime makes the agent Ready."""
    rt = f"{namespace}-rt"
    await client.create(runtime(rt, env=[{"name": "LOG=LEVEL", "value": "info"}]))
    await client.create(agent("strict", namespace, rt))

    async def refused() -> str:
        found = await client.get(Agent, "strict", namespace=namespace)
        assert condition(found, "Ready") == ("False", "Invalid"), found.status
        return next(
            c.message for c in (found.status.conditions if found.status else None) or () if c.type == "Ready"
        )

    message = await eventually(refused, timeout=20)
    assert message.startswith('Deployment.apps "strict" is invalid: spec.template.spec.containers[0].env[')
    assert "a valid environment variable name must consist only of printable ASCII characters" in message
    assert platform.agents.manager.controllers["agent"].results.get("error", 0) == 0
    await client.patch(ServingRuntime, rt, {"spec": {"env": [{"name": "LOG_LEVEL", "value": "info"}]}})
    await ready(client, "strict", namespace)
