"""Agent → ``<agent>-config`` ConfigMap, a Deployment running its ServingRuntime, and a ClusterIP
Service, all owned; status with the runtime, the config hash, the URL and two conditions.

- RuntimeResolved: True (Resolved), or False (RuntimeNotFound, RuntimeDisabled). An unresolved
  runtime is reported and nothing is changed: running workloads stay as they are, and the agent
  is not retried (the runtime's watch wakes it when the runtime comes back).
- Ready: DeploymentReady once every replica of the current template is available, else
  DeploymentNotReady.

The Deployment's pod template carries a hash of everything it was built from (the runtime's and
the agent's specs, the skill packs' contents, the MCP servers' URLs): editing any of them rolls
the pods of exactly the agents that use it. ServingRuntimes, SkillPacks and MCPServers are
mapped to their agents through field indexes of the cache. A finalizer deletes the agent's
AgentRuns and AgentSchedules before the agent goes.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

import kubeloop
from kubeloop import kinds

from .api import GROUP, Agent, AgentRun, AgentSchedule, MCPServer, ServingRuntime, SkillPack
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
from .mcpservers import url_of
from .skillpacks import config_map_name

FINALIZER = f"{GROUP}/runs"
RUNTIME_INDEX = "spec.runtimeRef"
SKILLS_INDEX = "spec.skillPackRefs"
MCP_INDEX = "spec.mcpServerRefs"
AGENT_INDEX = "spec.agentRef"
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
        manager.add_index(Agent, RUNTIME_INDEX, lambda a: [str(a["spec"].get("runtimeRef", ""))])
        manager.add_index(Agent, SKILLS_INDEX, lambda a: a["spec"].get("skillPackRefs") or [])
        manager.add_index(Agent, MCP_INDEX, lambda a: a["spec"].get("mcpServerRefs") or [])
        for kind in (AgentRun, AgentSchedule):
            manager.add_index(kind, AGENT_INDEX, lambda o: [str(o["spec"].get("agentRef", ""))])
        builder = kubeloop.Builder(manager).named("agent").for_(Agent)
        builder.owns(kinds.ConfigMap).owns(kinds.Deployment).owns(kinds.Service)
        builder.watches(ServingRuntime, kubeloop.handler.EnqueueRequestsFromMapFunc(self._agents_of_runtime))
        builder.watches(
            SkillPack, kubeloop.handler.EnqueueRequestsFromMapFunc(self._agents_using(SKILLS_INDEX))
        )
        builder.watches(MCPServer, kubeloop.handler.EnqueueRequestsFromMapFunc(self._agents_using(MCP_INDEX)))
        builder.complete(self.reconcile)

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
            kubeloop.add_finalizer(agent, FINALIZER)
            agent = await self.client.update(agent)

        runtime, reason, message = await self._runtime(agent)
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
            status["configHash"], deployment = await self._converge(agent, runtime)
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

    async def _runtime(self, agent: Agent) -> tuple[ServingRuntime | None, str, str]:
        name = agent.spec.runtime_ref
        try:
            runtime = await self.client.get(ServingRuntime, name)
        except kubeloop.errors.NotFound:
            return None, "RuntimeNotFound", f"ServingRuntime {name} does not exist"
        if runtime.spec.disabled:
            return None, "RuntimeDisabled", f"ServingRuntime {name} is disabled"
        return runtime, "Resolved", f"ServingRuntime {name}"

    async def _current_deployment(self, request: kubeloop.Request) -> kubeloop.Obj | None:
        try:
            return await self.client.get(kinds.Deployment, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return None

    async def _converge(self, agent: Agent, runtime: ServingRuntime) -> tuple[str, kubeloop.Obj]:
        """Write the ConfigMap, Deployment and Service; the config hash and the Deployment."""
        name, namespace = agent.metadata.name or "", agent.metadata.namespace or ""
        packs: dict[str, dict[str, str]] = {}
        for pack_name in sorted(agent.spec.skill_pack_refs):
            try:
                pack = await self.client.get(SkillPack, pack_name, namespace=namespace)
            except kubeloop.errors.NotFound:
                continue  # mounted once it exists (its watch wakes this agent)
            packs[pack_name] = {skill.name: skill.text for skill in pack.spec.skills}
        mcp_urls = []
        for server_name in sorted(agent.spec.mcp_server_refs):
            try:
                mcp_urls.append(url_of(await self.client.get(MCPServer, server_name, namespace=namespace)))
            except kubeloop.errors.NotFound:
                continue
        model = agent.spec.model.to_dict()
        model.pop("authSecretRef", None)
        config_data = {
            "system-prompt": agent.spec.system_prompt,
            "model.json": json.dumps(model, sort_keys=True),
        }
        digest = config_hash(runtime.spec.to_dict(), agent.spec.to_dict(), packs, mcp_urls)
        selector = labels("agent", name)

        def config_map(obj: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(agent, obj)
            obj["metadata"]["labels"] = selector
            obj["data"] = config_data

        platform_env: list[dict[str, Any]] = [
            {"name": "AGENT_NAME", "value": name},
            {"name": "MODEL_PROVIDER", "value": agent.spec.model.provider},
            {"name": "MODEL_NAME", "value": agent.spec.model.name},
            {"name": "SYSTEM_PROMPT_FILE", "value": f"{CONFIG_DIR}/system-prompt"},
        ]
        if agent.spec.model.base_url:
            platform_env.append({"name": "MODEL_BASE_URL", "value": agent.spec.model.base_url})
        secret = agent.spec.model.auth_secret_ref
        if secret is not None:
            key_ref = {"name": secret.name, "key": secret.key}
            platform_env.append({"name": "MODEL_API_KEY", "valueFrom": {"secretKeyRef": key_ref}})
        if mcp_urls:
            platform_env.append({"name": "MCP_SERVERS", "value": ",".join(mcp_urls)})
        runtime_env = [var.to_dict() for var in runtime.spec.env or ()]
        agent_env = [var.to_dict() for var in agent.spec.env or ()]
        mounts = [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}]
        volumes = [config_map_volume("config", config_map_of(name))]
        for pack_name in packs:
            volume = f"skills-{pack_name}"[:63].rstrip("-.")
            mounts.append({"name": volume, "mountPath": f"{CONFIG_DIR}/skills/{pack_name}", "readOnly": True})
            volumes.append(config_map_volume(volume, config_map_name(pack_name)))
        container = {
            "name": "agent",
            "image": runtime.spec.image,
            "command": runtime.spec.command,
            "args": runtime.spec.args,
            "ports": http_port(runtime.spec.port),
            "env": env_list(runtime_env, platform_env, agent_env),
            "resources": runtime.spec.resources.to_dict() if runtime.spec.resources else None,
            "volumeMounts": mounts,
        }

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
        return digest, made

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


def setup(manager: kubeloop.Manager) -> AgentReconciler:
    reconciler = AgentReconciler(manager)
    reconciler.setup()
    return reconciler
