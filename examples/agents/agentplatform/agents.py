"""Agent → ``<agent>-config`` ConfigMap, a Deployment running its ServingRuntime, and a ClusterIP
Service, all owned; status with the runtime, the config hash, the URL and two conditions.

- RuntimeResolved: True (Resolved), or False (RuntimeNotFound, RuntimeDisabled). An unresolved
  runtime is reported and nothing is changed: running workloads stay as they are, and the agent
  is not retried (the runtime's watch wakes it when the runtime comes back).
- Ready: DeploymentReady once every replica of the current template is available, else
  DeploymentNotReady; or Invalid when the API server refuses what the agent and its runtime make
  (an environment variable name a pod may not have, say): its message is the server's, a Warning
  Event says it once, and the agent is not retried until it or what it uses changes.

The Deployment's pod template carries a hash of everything it was built from (the runtime's and
the agent's specs, the skill packs' contents, the MCP servers' URLs): editing any of them rolls
the pods of exactly the agents that use it. ServingRuntimes, SkillPacks and MCPServers are
mapped to their agents through field indexes of the cache. A finalizer deletes the agent's
AgentRuns and AgentSchedules before the agent goes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import kubeloop
from kubeloop import kinds

from .api import (
    GROUP,
    Agent,
    AgentRun,
    AgentSchedule,
    AgentSpec,
    MCPServer,
    ServingRuntime,
    ServingRuntimeSpec,
    SkillPack,
)
from .common import (
    CONFIG_HASH,
    config_hash,
    config_map_volume,
    deployment_ready,
    env_list,
    http_port,
    labels,
    named,
    service_url,
    set_deployment,
    set_service,
    write_status,
)
from .indexes import AGENT_INDEX, MCP_INDEX, RUNTIME_INDEX, SKILLS_INDEX
from .mcpservers import url_of
from .skillpacks import config_map_name

FINALIZER = f"{GROUP}/runs"
CONFIG_DIR = "/etc/agent"


def config_map_of(agent: str) -> str:
    return f"{agent}-config"


class AgentReconciler:
    """Reconciles Agents (``reconcile`` is what the controller calls, and tests may call it too)."""

    def __init__(self, manager: kubeloop.Manager) -> None:
        self.manager = manager
        self.client = manager.client
        self.recorder = manager.event_recorder("agent")

    def setup(self) -> None:
        manager = self.manager
        builder = kubeloop.Builder(manager).named("agent").for_(Agent)
        builder.owns(kinds.ConfigMap).owns(kinds.Deployment).owns(kinds.Service)
        builder.watches(ServingRuntime, kubeloop.handler.EnqueueRequestsFromMapFunc(self._agents_of_runtime))
        builder.watches(
            SkillPack, kubeloop.handler.EnqueueRequestsFromMapFunc(self._agents_using(SKILLS_INDEX))
        )
        builder.watches(MCPServer, kubeloop.handler.EnqueueRequestsFromMapFunc(self._agents_using(MCP_INDEX)))
        builder.complete(self.reconcile)
        for kind in (AgentRun, AgentSchedule):  # the finalizer deletes the agent's runs and schedules
            manager.permissions.allow(kind, "list", "delete")

    async def _agents_of_runtime(self, runtime: kubeloop.Obj) -> list[kubeloop.Request]:
        agents = await self.client.list(
            Agent, field_selector=f"{RUNTIME_INDEX}={runtime['metadata']['name']}"
        )
        return [kubeloop.Request(a.metadata.namespace or "", a.metadata.name or "") for a in agents]

    def _agents_using(self, index: str) -> Callable[[kubeloop.Obj], Awaitable[list[kubeloop.Request]]]:
        async def agents(obj: kubeloop.Obj) -> list[kubeloop.Request]:
            meta = obj["metadata"]
            found = await self.client.list(
                Agent, namespace=meta["namespace"], field_selector=f"{index}={meta['name']}"
            )
            return [kubeloop.Request(a.metadata.namespace or "", a.metadata.name or "") for a in found]

        return agents

    # ------------------------------------------------------------------ reconcile

    async def reconcile(self, request: kubeloop.Request) -> None:
        try:
            agent = await self.client.get(Agent, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return  # what it owned goes with it
        if agent.metadata.deletion_timestamp is not None:
            await self._finalize(agent)
            return
        if not kubeloop.contains_finalizer(agent, FINALIZER):
            # The update's own event brings the agent back with the finalizer in the cache. Going
            # on here would make that event a second reconcile right after this one, reading the
            # cache before this one's status write is in it (and saying a refusal twice).
            kubeloop.add_finalizer(agent, FINALIZER)
            await self.client.update(agent)
            return

        runtime, reason, message = await resolve_runtime(self.client, agent.spec.runtime_ref)
        conditions = [c.to_dict() for c in (agent.status.conditions if agent.status else None) or ()]
        generation = agent.metadata.generation
        resolved = runtime is not None
        kubeloop.set_status_condition(
            conditions,
            "RuntimeResolved",
            "True" if resolved else "False",
            reason,
            message,
            observed_generation=generation,
        )
        status: dict[str, Any] = {"observedGeneration": generation}
        if runtime is None:
            if self._transitioned(agent, "RuntimeResolved", "False"):
                self.recorder.event(agent, kubeloop.WARNING, reason, message)
            deployment = await self._current_deployment(request)
        else:
            status["runtimeName"] = runtime.metadata.name
            status["url"] = service_url(request.name, request.namespace, runtime.spec.port)
            packs, mcp_urls = await resolve_tools(self.client, request.namespace, agent.spec)
            digest = config_hash(runtime.spec.to_dict(), agent.spec.to_dict(), packs, mcp_urls)
            status["configHash"] = digest
            last = kubeloop.find_status_condition(conditions, "Ready") or {}
            if last.get("reason") == "Invalid" and agent.status and agent.status.config_hash == digest:
                return  # refused, and nothing it was made from has changed since
            try:
                deployment = await self._converge(agent, runtime, packs, mcp_urls, digest)
            except kubeloop.errors.Invalid as refused:  # the user's to fix: reported, not retried
                self.recorder.event(agent, kubeloop.WARNING, "Invalid", str(refused))
                kubeloop.set_status_condition(
                    conditions, "Ready", "False", "Invalid", str(refused), observed_generation=generation
                )
                status["conditions"] = conditions
                await write_status(self.client, agent, status)
                return
        ready, ready_replicas, why = deployment_ready(deployment)
        kubeloop.set_status_condition(
            conditions,
            "Ready",
            "True" if ready else "False",
            "DeploymentReady" if ready else "DeploymentNotReady",
            why,
            observed_generation=generation,
        )
        status["readyReplicas"] = ready_replicas
        status["conditions"] = conditions
        await write_status(self.client, agent, status)

    @staticmethod
    def _transitioned(agent: Agent, condition: str, status: str) -> bool:
        for existing in (agent.status.conditions if agent.status else None) or ():
            if existing.type == condition:
                return existing.status != status
        return True

    async def _current_deployment(self, request: kubeloop.Request) -> kubeloop.Obj | None:
        try:
            return await self.client.get(kinds.Deployment, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return None

    async def _converge(
        self,
        agent: Agent,
        runtime: ServingRuntime,
        packs: dict[str, dict[str, str]],
        mcp_urls: list[str],
        digest: str,
    ) -> kubeloop.Obj:
        """Write the ConfigMap, Deployment and Service (built from ``digest``'s parts); the
        Deployment."""
        name, namespace = agent.metadata.name or "", agent.metadata.namespace or ""
        config_data = agent_config(agent.spec)
        selector = labels("agent", name)

        def config_map(obj: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(agent, obj)
            obj["metadata"]["labels"] = selector
            obj["data"] = config_data

        container, volumes = agent_pod(
            name,
            agent.spec,
            runtime.spec,
            config_map=config_map_of(name),
            skill_packs=packs,
            mcp_urls=mcp_urls,
        )

        def deployment(obj: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(agent, obj)
            obj["metadata"]["labels"] = selector
            annotations = {CONFIG_HASH: digest}
            set_deployment(
                obj,
                replicas=agent.spec.replicas,
                selector=selector,
                annotations=annotations,
                container=container,
                volumes=volumes,
            )

        def service(obj: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(agent, obj)
            obj["metadata"]["labels"] = selector
            set_service(obj, selector, runtime.spec.port)

        client = self.client
        await kubeloop.create_or_update(
            client, named(kinds.ConfigMap, config_map_of(name), namespace), config_map
        )
        _, made = await kubeloop.create_or_update(
            client, named(kinds.Deployment, name, namespace), deployment
        )
        await kubeloop.create_or_update(client, named(kinds.Service, name, namespace), service)
        return made

    async def _finalize(self, agent: Agent) -> None:
        """Delete the agent's runs and schedules, then let it go."""
        if not kubeloop.contains_finalizer(agent, FINALIZER):
            return
        name, namespace = agent.metadata.name or "", agent.metadata.namespace or ""
        for kind in (AgentSchedule, AgentRun):
            for obj in await self.client.list(
                kind, namespace=namespace, field_selector=f"{AGENT_INDEX}={name}"
            ):
                with contextlib.suppress(kubeloop.errors.NotFound):
                    await self.client.delete(obj)
        kubeloop.remove_finalizer(agent, FINALIZER)
        await self.client.update(agent)


async def resolve_runtime(client: kubeloop.Client, name: str) -> tuple[ServingRuntime | None, str, str]:
    """The ServingRuntime ``name`` if it exists and is enabled; the reason and message either way."""
    try:
        runtime = await client.get(ServingRuntime, name)
    except kubeloop.errors.NotFound:
        return None, "RuntimeNotFound", f"ServingRuntime {name} does not exist"
    if runtime.spec.disabled:
        return None, "RuntimeDisabled", f"ServingRuntime {name} is disabled"
    return runtime, "Resolved", f"ServingRuntime {name}"


async def resolve_tools(
    client: kubeloop.Client, namespace: str, spec: AgentSpec
) -> tuple[dict[str, dict[str, str]], list[str]]:
    """The skill packs an agent lists that exist (name → skills) and its MCP servers' URLs.
    Missing ones are left out: their watches wake the agent when they appear."""
    packs: dict[str, dict[str, str]] = {}
    for pack_name in sorted(spec.skill_pack_refs):
        try:
            pack = await client.get(SkillPack, pack_name, namespace=namespace)
        except kubeloop.errors.NotFound:
            continue
        packs[pack_name] = {skill.name: skill.text for skill in pack.spec.skills}
    urls = []
    for server_name in sorted(spec.mcp_server_refs):
        try:
            urls.append(url_of(await client.get(MCPServer, server_name, namespace=namespace)))
        except kubeloop.errors.NotFound:
            continue
    return packs, urls


def agent_config(spec: AgentSpec) -> dict[str, str]:
    """What an agent's pods read from /etc/agent: the system prompt and the model (no secret)."""
    model = spec.model.to_dict()
    model.pop("authSecretRef", None)
    return {"system-prompt": spec.system_prompt, "model.json": json.dumps(model, sort_keys=True)}


def skills_volume(pack: str) -> str:
    """The pod volume of skill pack ``pack``: a DNS label (a pack's name may hold dots and be
    longer than 63 characters), distinct for distinct packs."""
    readable = "".join(c if c.isalnum() else "-" for c in pack[:40]).strip("-")
    return f"skills-{readable}-{hashlib.sha256(pack.encode()).hexdigest()[:8]}"


def agent_pod(
    name: str,
    spec: AgentSpec,
    runtime: ServingRuntimeSpec,
    *,
    config_map: str,
    skill_packs: Iterable[str],
    mcp_urls: list[str],
    env: Iterable[dict[str, Any]] = (),
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The container and volumes of a pod serving agent ``name`` (an Agent's Deployment or an
    AgentRun's Job): ``config_map`` mounted at /etc/agent, each skill pack under skills/.

    The environment is the runtime's, then the platform's (model, prompt file, MCP servers,
    ``env``), then the agent's: a later one wins by name; sorted, so the template is stable."""
    platform_env: list[dict[str, Any]] = [
        {"name": "AGENT_NAME", "value": name},
        {"name": "MODEL_PROVIDER", "value": spec.model.provider},
        {"name": "MODEL_NAME", "value": spec.model.name},
        {"name": "SYSTEM_PROMPT_FILE", "value": f"{CONFIG_DIR}/system-prompt"},
        *env,
    ]
    if spec.model.base_url:
        platform_env.append({"name": "MODEL_BASE_URL", "value": spec.model.base_url})
    secret = spec.model.auth_secret_ref
    if secret is not None:
        key_ref = {"name": secret.name, "key": secret.key}
        platform_env.append({"name": "MODEL_API_KEY", "valueFrom": {"secretKeyRef": key_ref}})
    if mcp_urls:
        platform_env.append({"name": "MCP_SERVERS", "value": ",".join(mcp_urls)})
    runtime_env = [var.to_dict() for var in runtime.env or ()]
    agent_env = [var.to_dict() for var in spec.env or ()]
    mounts = [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}]
    volumes = [config_map_volume("config", config_map)]
    for pack_name in skill_packs:
        volume = skills_volume(pack_name)
        mounts.append({"name": volume, "mountPath": f"{CONFIG_DIR}/skills/{pack_name}", "readOnly": True})
        volumes.append(config_map_volume(volume, config_map_name(pack_name)))
    container = {
        "name": "agent",
        "image": runtime.image,
        "command": runtime.command,
        "args": runtime.args,
        "ports": http_port(runtime.port),
        "env": env_list(runtime_env, platform_env, agent_env),
        "resources": runtime.resources.to_dict() if runtime.resources else None,
        "volumeMounts": mounts,
    }
    return container, volumes


def setup(manager: kubeloop.Manager) -> AgentReconciler:
    reconciler = AgentReconciler(manager)
    reconciler.setup()
    return reconciler
