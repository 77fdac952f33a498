"""Agent → ``<agent>-config`` ConfigMap, a Deployment running its ServingRuntime, and a ClusterIP
Service, all owned, its channels' objects (``channels``) and its memory (``memory``); status
with the runtime, the config hash, the URL, the channels and three conditions (PolicyCompliant
says whether the namespace's AgentPolicies allow what it uses: an agent made before a policy is
reported, not broken). Finished runs past ``runHistoryLimit`` are deleted, the oldest first (a
channel's run only once its reply has had ``reply_retention_seconds`` to be read). With ``networkPolicy``, a NetworkPolicy of the
agent's name lets its pods (its Deployment's and its runs', which carry ``agents.kubeloop.dev/agent``)
be reached only from its channels and the operator's namespace, and reach only DNS, its MCP
servers and its model endpoint's port.

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
import dataclasses
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import kubeloop
from kubeloop import kinds

from ..api.v1alpha1 import (
    GROUP,
    Agent,
    AgentPolicy,
    AgentRun,
    AgentSchedule,
    MCPServer,
    ServingRuntime,
    SkillPack,
)
from .builders import (
    AGENT_LABEL,
    CONFIG_HASH,
    AgentTools,
    agent_config,
    agent_pod,
    config_hash,
    config_map_of,
    deployment_ready,
    labels,
    mcp_server_peer,
    model_port,
    named,
    network_policy_spec,
    no_api_account,
    resolve_runtime,
    resolve_tools,
    run_as_own_account,
    serve_endpoint,
    service_url,
    set_deployment,
    set_pod_extras,
    set_service,
    write_status,
)
from .channels import AgentChannels, ChannelSettings, InboundTrust
from .deliveries import DeliveryLedger
from .indexes import AGENT_INDEX, MCP_INDEX, RUNTIME_INDEX, SKILLS_INDEX
from .memory import MEMORY_PORT, AgentMemory, memory_url
from .policy import PlatformImages, compliance

#: How often an agent with a NetworkPolicy reads the API server's addresses again.
API_SERVER_RECHECK_SECONDS = 600.0
FINALIZER = f"{GROUP}/runs"
FINISHED_PHASES = ("Succeeded", "Failed")


def _persistent(agent: Agent) -> bool:
    memory = agent.spec.memory
    return memory is not None and memory.enabled and memory.persistent


def _ended(old: kubeloop.Obj, new: kubeloop.Obj) -> bool:
    """A run's update that finished it."""
    phase = (new.get("status") or {}).get("phase")
    return phase in FINISHED_PHASES and (old.get("status") or {}).get("phase") != phase


class AgentReconciler:
    """Reconciles Agents (``reconcile`` is what the controller calls, and tests may call it too)."""

    def __init__(
        self,
        manager: kubeloop.Manager,
        memory: AgentMemory,
        channel_settings: ChannelSettings | None = None,
        ledger: DeliveryLedger | None = None,
        trust: InboundTrust | None = None,
    ) -> None:
        self.manager = manager
        #: Where the runs of deliveries are remembered once pruned.
        self.ledger = ledger or DeliveryLedger(manager.client)
        self.client = manager.client
        self.recorder = manager.event_recorder("agent")
        settings = channel_settings or ChannelSettings.from_env()
        self.channels = AgentChannels(manager, settings, trust or InboundTrust(settings.inbound_ca))
        self.memory = memory
        #: What AgentPolicies' allowedImages bound, besides the runtime's and MCP servers' images.
        self.platform_images = PlatformImages(self.channels.settings.images, memory.image)
        #: The operator's own namespace, whence its NetworkPolicies let it in.
        self.operator_namespace = manager.api_reader.config.namespace

    def setup(self) -> None:
        manager = self.manager
        builder = kubeloop.Builder(manager).named("agent").for_(Agent)
        builder.owns(kinds.ConfigMap).owns(kinds.Deployment).owns(kinds.Service)
        builder.owns(kinds.ServiceAccount).owns(kinds.Role).owns(kinds.RoleBinding)  # its and channels'
        builder.owns(kinds.NetworkPolicy)
        # A run made or deleted changes which runs the agent's channels may read; a run that
        # ends may put the agent's finished runs past its history limit.
        made_ended_or_deleted = kubeloop.predicate.Funcs(on_update=_ended)
        builder.watches(
            AgentRun, kubeloop.handler.EnqueueRequestsFromMapFunc(self._agent_of_run), made_ended_or_deleted
        )
        builder.watches(ServingRuntime, kubeloop.handler.EnqueueRequestsFromMapFunc(self._agents_of_runtime))
        builder.watches(AgentPolicy, kubeloop.handler.EnqueueRequestsFromMapFunc(self._agents_in_namespace))
        builder.watches(
            SkillPack, kubeloop.handler.EnqueueRequestsFromMapFunc(self._agents_using(SKILLS_INDEX))
        )
        builder.watches(MCPServer, kubeloop.handler.EnqueueRequestsFromMapFunc(self._agents_using(MCP_INDEX)))
        builder.complete(self.reconcile)
        for kind in (AgentRun, AgentSchedule):  # the finalizer deletes the agent's runs and schedules
            manager.permissions.allow(kind, "list", "delete")
        manager.permissions.allow(kinds.EndpointSlice, "get")  # the API server's, for NetworkPolicies

    async def _agents_in_namespace(self, policy: kubeloop.Obj) -> list[kubeloop.Request]:
        agents = await self.client.list(Agent, namespace=policy["metadata"]["namespace"])
        return [kubeloop.Request(a.metadata.namespace or "", a.metadata.name or "") for a in agents]

    @staticmethod
    async def _agent_of_run(run: kubeloop.Obj) -> list[kubeloop.Request]:
        return [kubeloop.Request(run["metadata"]["namespace"], str(run["spec"].get("agentRef", "")))]

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

    async def reconcile(self, request: kubeloop.Request) -> kubeloop.Result | None:
        try:
            agent = await self.client.get(Agent, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return None  # what it owned goes with it
        if agent.metadata.deletion_timestamp is not None:
            await self._finalize(agent)
            return None
        if not kubeloop.contains_finalizer(agent, FINALIZER):
            # The update's own event brings the agent back with the finalizer in the cache. Going
            # on here would make that event a second reconcile right after this one, reading the
            # cache before this one's status write is in it (and saying a refusal twice).
            kubeloop.add_finalizer(agent, FINALIZER)
            await self.client.update(agent)
            return None

        recheck = self.channels.settings.recheck_seconds
        try:
            prune_again = await self._prune_runs(agent)
            channels = await self.channels.reconcile(agent)
            memory, memory_ready = await self.memory.reconcile(agent)
        except kubeloop.errors.Invalid as refused:  # the user's to fix: reported, not retried
            await self._refused(agent, refused)
            return None
        except kubeloop.NotControlledError as conflict:  # someone else's object of its names
            await self._refused(agent, conflict, reason="NameConflict")
            return kubeloop.Result(requeue_after=recheck)  # no watch says when it goes
        if not await self._reconcile(request, agent, channels, memory, memory_ready):
            return kubeloop.Result(requeue_after=recheck)
        again = [prune_again] if prune_again is not None else []
        if agent.spec.network_policy:  # the API server's addresses may move: no watch says so
            again.append(API_SERVER_RECHECK_SECONDS)
        if self.channels.settings.pending(channels):  # a pod that cannot start changes no Deployment
            again.append(self.channels.settings.recheck_seconds)
        return kubeloop.Result(requeue_after=min(again)) if again else None

    async def _reconcile(
        self,
        request: kubeloop.Request,
        agent: Agent,
        channels: list[dict[str, Any]] | None,
        memory: str | None,
        memory_ready: bool | None,
    ) -> bool:
        """The agent's own objects and status; False when an object of its names is someone
        else's (Ready says so)."""
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
        kubeloop.set_status_condition(
            conditions,
            "PolicyCompliant",
            *await compliance(self.client, agent, self.platform_images),
            observed_generation=generation,
        )
        status: dict[str, Any] = {
            "observedGeneration": generation,
            "channels": channels,
            "memoryReady": memory_ready,
        }
        if runtime is None:
            if self._transitioned(agent, "RuntimeResolved", "False"):
                self.recorder.event(agent, kubeloop.WARNING, reason, message)
            deployment = await self._current_deployment(request)
        else:
            status["runtimeName"] = runtime.metadata.name
            status["url"] = service_url(request.name, request.namespace, runtime.spec.port)
            tools = await resolve_tools(self.client, request.namespace, agent.spec)
            digest = config_hash(runtime.spec.to_dict(), agent.spec.to_dict(), dataclasses.asdict(tools))
            status["configHash"] = digest
            last = kubeloop.find_status_condition(conditions, "Ready") or {}
            if last.get("reason") == "Invalid" and agent.status and agent.status.config_hash == digest:
                # Ready stays Invalid; what else changed (channels, memory, policy) is still said.
                unchanged = {"channels": channels, "memoryReady": memory_ready, "conditions": conditions}
                await write_status(self.client, agent, unchanged)
                return True  # refused, and nothing it was made from has changed since
            try:
                deployment = await self._converge(agent, runtime, tools, digest, memory)
            except (kubeloop.errors.Invalid, kubeloop.NotControlledError) as refused:
                # The user's to fix: reported; an Invalid is not retried, a conflict looked at again.
                why = "Invalid" if isinstance(refused, kubeloop.errors.Invalid) else "NameConflict"
                if last.get("reason") != why or last.get("message") != str(refused):
                    self.recorder.event(agent, kubeloop.WARNING, why, str(refused))
                kubeloop.set_status_condition(
                    conditions, "Ready", "False", why, str(refused), observed_generation=generation
                )
                status["conditions"] = conditions
                await write_status(self.client, agent, status)
                return why == "Invalid"
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
        return True

    async def _refused(self, agent: Agent, refused: Exception, *, reason: str = "Invalid") -> None:
        """Ready False with ``reason`` (Invalid: the server's message; NameConflict: an object of
        the agent's names that it does not control); a Warning Event when that is new."""
        conditions = [c.to_dict() for c in (agent.status.conditions if agent.status else None) or ()]
        last = kubeloop.find_status_condition(conditions, "Ready") or {}
        if last.get("reason") != reason or last.get("message") != str(refused):
            self.recorder.event(agent, kubeloop.WARNING, reason, str(refused))
        generation = agent.metadata.generation
        kubeloop.set_status_condition(
            conditions, "Ready", "False", reason, str(refused), observed_generation=generation
        )
        await write_status(self.client, agent, {"observedGeneration": generation, "conditions": conditions})

    async def _prune_runs(self, agent: Agent) -> float | None:
        """Delete the agent's oldest finished runs past its ``runHistoryLimit``, except a channel
        run whose reply its channel may not have read yet (``reply_retention_seconds`` after it
        finished); in how many seconds to look again for those (None: none are held)."""
        name, namespace = agent.metadata.name or "", agent.metadata.namespace or ""
        runs = await self.client.list(AgentRun, namespace=namespace, field_selector=f"{AGENT_INDEX}={name}")
        done = [run for run in runs if run.status and run.status.phase in FINISHED_PHASES]
        done.sort(
            key=lambda run: (str(run.status.completion_time if run.status else ""), run.metadata.name or "")
        )
        retention = self.channels.settings.reply_retention_seconds
        now = datetime.now(UTC)
        held: list[float] = []
        pruned = []
        for run in done[: max(0, len(done) - agent.spec.run_history_limit)]:
            finished = kubeloop.timestamps.parse_time(run.status.completion_time if run.status else None)
            if run.spec.trigger is not None and finished is not None:
                left = retention - (now - finished).total_seconds()
                if left > 0:
                    held.append(left)  # its reply may not be read yet
                    continue
            if run.metadata.deletion_timestamp is None:
                pruned.append(run)
        # Their deliveries are remembered before the runs (their record until now) go.
        await self.ledger.remember(agent, pruned)
        for run in pruned:
            with contextlib.suppress(kubeloop.errors.NotFound):
                await self.client.delete(run)
        return min(held) if held else None

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
        tools: AgentTools,
        digest: str,
        memory: str | None,
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
            tools=tools,
            memory=memory,
            env=[{"name": "MEMORY_URL", "value": memory_url(name, namespace)}] if _persistent(agent) else (),
        )
        serve_endpoint(container, volumes, agent.spec.endpoint, runtime.spec.port)

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
            obj["spec"]["template"]["metadata"]["labels"] = {**selector, AGENT_LABEL: name}
            pod = obj["spec"]["template"]["spec"]
            set_pod_extras(pod, runtime.spec)
            run_as_own_account(pod, name)

        def account(obj: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(agent, obj)
            obj["metadata"]["labels"] = selector
            no_api_account(obj)

        def service(obj: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(agent, obj)
            obj["metadata"]["labels"] = selector
            set_service(obj, selector, runtime.spec.port)

        client = self.client
        mine = {"controlled_by": agent}  # a name someone else took first is theirs: left alone
        await kubeloop.create_or_update(
            client, named(kinds.ConfigMap, config_map_of(name), namespace), config_map, **mine
        )
        await kubeloop.create_or_update(client, named(kinds.ServiceAccount, name, namespace), account, **mine)
        _, made = await kubeloop.create_or_update(
            client, named(kinds.Deployment, name, namespace), deployment, **mine
        )
        await kubeloop.create_or_update(client, named(kinds.Service, name, namespace), service, **mine)
        await self._network_policy(agent, runtime, selector)
        return made

    async def _network_policy(self, agent: Agent, runtime: ServingRuntime, selector: dict[str, str]) -> None:
        """The agent's NetworkPolicy when it asks for one (removed when it no longer does)."""
        name, namespace = agent.metadata.name or "", agent.metadata.namespace or ""
        if not agent.spec.network_policy:
            with contextlib.suppress(kubeloop.errors.NotFound):
                found = await self.client.get(kinds.NetworkPolicy, name, namespace=namespace)
                if kubeloop.is_controlled_by(found, agent):
                    await self.client.delete(found)
            return
        servers = []
        for server_name in sorted(agent.spec.mcp_server_refs):
            with contextlib.suppress(kubeloop.errors.NotFound):
                servers.append(await self.client.get(MCPServer, server_name, namespace=namespace))
        api_server = await self._api_server()
        if api_server is None:
            self.recorder.event(
                agent, kubeloop.WARNING, "APIServerUnknown",
                "the API server's addresses (EndpointSlice default/kubernetes) cannot be read:"
                " the NetworkPolicy lets the agent's runs reach no API server",
            )  # fmt: skip
        spec = network_policy_spec(
            {AGENT_LABEL: name},  # its Deployment's pods and its runs
            channels=labels("channel", name),
            operator_namespace=self.operator_namespace,
            port=runtime.spec.port,
            mcp_servers=[mcp_server_peer(server) for server in servers]
            + ([(labels("memory-server", name), MEMORY_PORT)] if _persistent(agent) else []),
            model_port=model_port(agent.spec.model.base_url),
            api_server=api_server,
        )

        def policy(obj: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(agent, obj)
            obj["metadata"]["labels"] = selector
            obj["spec"] = spec

        await kubeloop.create_or_update(
            self.client, named(kinds.NetworkPolicy, name, namespace), policy, controlled_by=agent
        )

    async def _api_server(self) -> tuple[list[str], int] | None:
        """The API server's addresses and port, as the ``kubernetes`` Service's EndpointSlice
        names them (read past the cache: one object, not every slice of the cluster); None when
        it cannot be read."""
        try:
            found = await self.manager.api_reader.get(kinds.EndpointSlice, "kubernetes", namespace="default")
        except (kubeloop.errors.NotFound, kubeloop.errors.Forbidden):
            return None
        addresses = sorted(
            {str(address) for endpoint in found.get("endpoints") or () for address in endpoint.get("addresses") or ()}
        )
        ports = [int(port["port"]) for port in found.get("ports") or () if port.get("port")]
        return (addresses, ports[0]) if addresses and ports else None

    async def _finalize(self, agent: Agent) -> None:
        """Delete the agent's runs and schedules, then let it go. They are listed from the
        server (their CRDs make spec.agentRef selectable), not the cache: a run made a moment
        before the agent was deleted may not be in the cache yet, and once the finalizer is
        gone nothing would delete it."""
        if not kubeloop.contains_finalizer(agent, FINALIZER):
            return
        name, namespace = agent.metadata.name or "", agent.metadata.namespace or ""
        for kind in (AgentSchedule, AgentRun):
            for obj in await self.manager.api_reader.list(
                kind, namespace=namespace, field_selector=f"{AGENT_INDEX}={name}"
            ):
                with contextlib.suppress(kubeloop.errors.NotFound):
                    await self.client.delete(obj)
        kubeloop.remove_finalizer(agent, FINALIZER)
        # Gone already: the pass before this one removed the finalizer and the server deleted
        # the Agent, whose DELETED event had not reached the cache this pass read from.
        await kubeloop.errors.ignore_not_found(self.client.update(agent))


def setup(
    manager: kubeloop.Manager,
    memory: AgentMemory,
    channel_settings: ChannelSettings | None = None,
    ledger: DeliveryLedger | None = None,
    trust: InboundTrust | None = None,
) -> AgentReconciler:
    reconciler = AgentReconciler(manager, memory, channel_settings, ledger, trust)
    reconciler.setup()
    return reconciler
