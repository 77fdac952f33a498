"""An Agent's memory: ``MEMORY.md`` in the owned ConfigMap ``<agent>-memory``, mounted read-only
at ``/memory`` in the agent's pods and in its runs' pods.

The ConfigMap is made once, with the memory seed of the persona pack that made the agent (its
``agents.kubeloop.dev/memory-seed`` annotation) if any; it goes when the agent's memory is
turned off. A run that succeeds may leave something to remember: its termination message is
then ``{"result": ..., "memory": ...}`` (:class:`.runreport.RunReport`), and :meth:`AgentMemory.remember`
appends it as an entry marked with the run's name, drops the oldest entries past ``maxBytes``
(:func:`appended`), and writes with the ConfigMap's resourceVersion, reading again and retrying
on a Conflict, so no update is lost to another run's. An entry already there (a retried
reconcile) is not written twice. ``agentplatform_memory_bytes{namespace,agent}`` is the size.

``persistent: true`` adds a memory server of the agent's own: a PersistentVolumeClaim, a
Deployment (Recreate: one writer of the volume) and a Service ``<agent>-memory``, whose URL the
agent's pods get as ``MEMORY_URL``; the agent says whether it is ready (``status.memoryReady``)
and its runs wait, reason MemoryNotReady, until it is.
"""

from __future__ import annotations

import contextlib
import os
import re

from prometheus_client import Gauge

import kubeloop
from kubeloop import kinds

from ..api.v1alpha1 import GROUP, Agent
from .builders import (
    TMP_MOUNT,
    TMP_VOLUME,
    deployment_ready,
    http_port,
    labels,
    named,
    no_api_account,
    restricted_container,
    restricted_pod,
    run_as_own_account,
    service_url,
    set_deployment,
    set_service,
)

MEMORY_KEY = "MEMORY.md"
MEMORY_PORT = 8080
#: The persistent memory server's image (``AGENTS_MEMORY_SERVER_IMAGE`` overrides it).
MEMORY_SERVER_IMAGE = "ghcr.io/kubeloop-dev/agent-memory-server:0.1.0"
SEED_ANNOTATION = f"{GROUP}/memory-seed"
#: Each entry starts with its marker line: ``<!-- run NAME -->``, or ``<!-- seed -->``.
_MARKER = re.compile(r"^<!-- (?:run \S+|seed) -->$", re.MULTILINE)
#: Writes lost to other writers before this one gives up (the run is reconciled again).
ATTEMPTS = 10


def _memory_of(config_map: kubeloop.Obj, agent: str) -> bool:
    """Whether ``config_map`` is the memory Agent ``agent`` controls."""
    return any(
        ref.get("controller") and ref.get("kind") == "Agent" and ref.get("name") == agent
        for ref in config_map["metadata"].get("ownerReferences") or ()
    )


def memory_config_map(agent: str) -> str:
    return f"{agent}-memory"


def memory_server(agent: str) -> str:
    """The persistent memory server's Deployment, Service and PersistentVolumeClaim."""
    return f"{agent}-memory"


def memory_url(agent: str, namespace: str) -> str:
    return service_url(memory_server(agent), namespace, MEMORY_PORT)


def _entries(memory: str) -> list[str]:
    """The memory cut before each marker (text before the first, if any, is an entry too)."""
    starts = [match.start() for match in _MARKER.finditer(memory)]
    cuts = [0, *starts] if not starts or starts[0] != 0 else starts
    return [
        memory[start:end]
        for start, end in zip(cuts, [*cuts[1:], len(memory)], strict=True)
        if memory[start:end]
    ]


def appended(memory: str, run: str | None, text: str, max_bytes: int) -> str | None:
    """``memory`` with ``run``'s entry (None: the seed's) added last, the oldest entries dropped
    until it fits in ``max_bytes`` (and the newest cut from its start if it alone does not);
    None when that entry is there already."""
    marker = f"<!-- run {run} -->" if run is not None else "<!-- seed -->"
    if re.search(rf"^{re.escape(marker)}$", memory, re.MULTILINE):
        return None
    head = f"{marker}\n"
    text = _MARKER.sub(lambda line: " " + line.group(0), text.strip())  # a marker in the text is not one
    body = f"{text}\n".encode()
    room = max_bytes - len(head.encode())
    if len(body) > room:  # the entry alone is too long: keep the end of its text, whole characters
        body = body[len(body) - room :].decode("utf-8", "ignore").encode()
    entries = [*_entries(memory), head + body.decode()]
    while len(entries) > 1 and sum(len(entry.encode()) for entry in entries) > max_bytes:
        entries.pop(0)
    return "".join(entries)


class AgentMemory:
    """Keeps agents' memory ConfigMaps."""

    def __init__(self, manager: kubeloop.Manager, image: str | None = None) -> None:
        self.client = manager.client
        self.image = image or os.environ.get("AGENTS_MEMORY_SERVER_IMAGE") or MEMORY_SERVER_IMAGE
        #: The memory is read past the cache before each append: it must be the latest.
        self.reader = manager.api_reader
        self.size = Gauge(
            "agentplatform_memory_bytes",
            "The size of each agent's MEMORY.md.",
            ["namespace", "agent"],
            registry=manager.metrics.registry,
        )
        manager.permissions.allow(kinds.ConfigMap, "get", "list", "watch", "create", "update", "delete")
        for kind in (kinds.PersistentVolumeClaim, kinds.ServiceAccount):
            manager.permissions.allow(kind, "get", "list", "watch", "create", "update", "delete")

    async def reconcile(self, agent: Agent) -> tuple[str | None, bool | None]:
        """Make the agent's memory ConfigMap if it has memory (delete it if not), and its memory
        server if it is persistent; the ConfigMap's name, and whether the server is ready (None:
        no server)."""
        config_map = await self._config_map(agent)
        return config_map, await self._server(agent)

    async def _server(self, agent: Agent) -> bool | None:
        name, namespace = agent.metadata.name or "", agent.metadata.namespace or ""
        memory = agent.spec.memory
        own = memory_server(name)
        if memory is None or not memory.enabled or not memory.persistent:
            for kind in (kinds.Deployment, kinds.Service, kinds.ServiceAccount, kinds.PersistentVolumeClaim):
                with contextlib.suppress(kubeloop.errors.NotFound):
                    found = await self.client.get(kind, own, namespace=namespace)
                    if kubeloop.is_controlled_by(found, agent):
                        await self.client.delete(found)
            return None
        selector = labels("memory-server", name)

        def owned(obj: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(agent, obj)
            obj["metadata"]["labels"] = selector

        storage = memory.storage

        def claim(obj: kubeloop.Obj) -> None:
            owned(obj)
            spec = obj.setdefault("spec", {})
            if "resources" not in spec:  # a claim's size is set when it is made (a resize needs more)
                spec["accessModes"] = ["ReadWriteOnce"]
                spec["resources"] = {"requests": {"storage": storage}}

        container = {
            "name": "memory",
            "image": self.image,
            "ports": http_port(MEMORY_PORT),
            "env": [
                {"name": "DATA_DIR", "value": "/data"},
                # The address it listens on (a process node's pods share the machine's ports).
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
            ],
            "readinessProbe": {
                "httpGet": {"path": "/healthz", "port": MEMORY_PORT, "scheme": "HTTP"},
                "periodSeconds": 2, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3,
            },
            "volumeMounts": [{"name": "data", "mountPath": "/data"}, dict(TMP_MOUNT)],
            "securityContext": restricted_container(),
        }

        def deployment(obj: kubeloop.Obj) -> None:
            owned(obj)
            volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": own}}, dict(TMP_VOLUME)]
            set_deployment(
                obj, replicas=1, selector=selector, annotations={}, container=container, volumes=volumes
            )
            obj["spec"]["strategy"] = {"type": "Recreate"}  # one writer of the volume at a time
            pod = obj["spec"]["template"]["spec"]
            pod["securityContext"] = restricted_pod()
            run_as_own_account(pod, own)

        def account(obj: kubeloop.Obj) -> None:
            owned(obj)
            no_api_account(obj)

        def service(obj: kubeloop.Obj) -> None:
            owned(obj)
            set_service(obj, selector, MEMORY_PORT)

        mine = {"controlled_by": agent}  # a name someone else took first is theirs: left alone
        await kubeloop.create_or_update(
            self.client, named(kinds.PersistentVolumeClaim, own, namespace), claim, **mine
        )
        await kubeloop.create_or_update(
            self.client, named(kinds.ServiceAccount, own, namespace), account, **mine
        )
        _, made = await kubeloop.create_or_update(
            self.client, named(kinds.Deployment, own, namespace), deployment, **mine
        )
        await kubeloop.create_or_update(self.client, named(kinds.Service, own, namespace), service, **mine)
        return deployment_ready(made)[0]

    async def _config_map(self, agent: Agent) -> str | None:
        name, namespace = agent.metadata.name or "", agent.metadata.namespace or ""
        config_map = memory_config_map(name)
        memory = agent.spec.memory
        if memory is None or not memory.enabled:
            try:
                found = await self.client.get(kinds.ConfigMap, config_map, namespace=namespace)
            except kubeloop.errors.NotFound:
                return None
            if kubeloop.is_controlled_by(found, agent):
                await self.client.delete(found)
                self.size.remove(namespace, name)
            return None
        try:
            found = await self.client.get(kinds.ConfigMap, config_map, namespace=namespace)
        except kubeloop.errors.NotFound:
            seed = (agent.metadata.annotations or {}).get(SEED_ANNOTATION, "")
            made = named(kinds.ConfigMap, config_map, namespace)
            made["metadata"]["labels"] = labels("memory", name)
            made["data"] = {
                MEMORY_KEY: (appended("", None, seed, memory.max_bytes) or "") if seed.strip() else ""
            }
            kubeloop.set_controller_reference(agent, made)
            try:
                found = await self.client.create(made)
            except kubeloop.errors.AlreadyExists:  # made by an earlier pass the cache has not shown
                found = await self.reader.get(kinds.ConfigMap, config_map, namespace=namespace)
        if not kubeloop.is_controlled_by(found, agent):  # someone else's ConfigMap of that name
            raise kubeloop.NotControlledError("ConfigMap", config_map, f"Agent {name}")
        self.size.labels(namespace, name).set(
            len(str((found.get("data") or {}).get(MEMORY_KEY, "")).encode())
        )
        return config_map

    async def remember(self, namespace: str, agent: str, run: str, text: str, max_bytes: int) -> bool:
        """Append ``run``'s entry to the agent's memory; whether it was written (not when the
        memory is gone, or holds the entry already)."""
        config_map = memory_config_map(agent)
        for _ in range(ATTEMPTS):
            try:
                found = await self.reader.get(kinds.ConfigMap, config_map, namespace=namespace)
            except kubeloop.errors.NotFound:
                return False
            if not _memory_of(found, agent):  # someone else's ConfigMap of that name: not written
                return False
            data = dict(found.get("data") or {})
            updated = appended(str(data.get(MEMORY_KEY, "")), run, text, max_bytes)
            if updated is None:
                return False
            found["data"] = {**data, MEMORY_KEY: updated}
            try:
                await self.client.update(found)  # with its resourceVersion: a lost race is a Conflict
            except kubeloop.errors.Conflict:
                continue
            self.size.labels(namespace, agent).set(len(updated.encode()))
            return True
        raise kubeloop.errors.Conflict(
            f"ConfigMap {namespace}/{config_map} kept changing: {ATTEMPTS} writes lost"
        )
