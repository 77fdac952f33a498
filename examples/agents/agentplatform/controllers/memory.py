"""An Agent's memory: ``MEMORY.md`` in the owned ConfigMap ``<agent>-memory``, mounted read-only
at ``/memory`` in the agent's pods and in its runs' pods.

The ConfigMap is made once, with the memory seed of the persona pack that made the agent (its
``agents.kubeloop.dev/memory-seed`` annotation) if any; it goes when the agent's memory is
turned off. A run that succeeds may leave something to remember: its termination message is
then ``{"result": ..., "memory": ...}`` (:func:`parse_result`), and :meth:`AgentMemory.remember`
appends it as an entry marked with the run's name, drops the oldest entries past ``maxBytes``
(:func:`appended`), and writes with the ConfigMap's resourceVersion, reading again and retrying
on a Conflict, so no update is lost to another run's. An entry already there (a retried
reconcile) is not written twice. ``agentplatform_memory_bytes{namespace,agent}`` is the size.
"""

from __future__ import annotations

import json
import re

from prometheus_client import Gauge

import kubeloop
from kubeloop import kinds

from ..api.v1alpha1 import GROUP, Agent
from .builders import labels, named

MEMORY_KEY = "MEMORY.md"
SEED_ANNOTATION = f"{GROUP}/memory-seed"
#: Each entry starts with its marker line: ``<!-- run NAME -->``, or ``<!-- seed -->``.
_MARKER = re.compile(r"^<!-- (?:run \S+|seed) -->$", re.MULTILINE)
#: Writes lost to other writers before this one gives up (the run is reconciled again).
ATTEMPTS = 10


def memory_config_map(agent: str) -> str:
    return f"{agent}-memory"


def parse_result(message: str) -> tuple[str, str | None]:
    """A run's answer and what it asks to remember: a termination message that is the JSON
    object ``{"result": str, "memory": str}`` is split; any other message is the answer."""
    try:
        document = json.loads(message)
    except ValueError:
        return message, None
    if not isinstance(document, dict) or not isinstance(document.get("result"), str):
        return message, None
    memory = document.get("memory")
    return document["result"], memory if isinstance(memory, str) and memory.strip() else None


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

    def __init__(self, manager: kubeloop.Manager) -> None:
        self.client = manager.client
        #: The memory is read past the cache before each append: it must be the latest.
        self.reader = manager.api_reader
        self.size = Gauge(
            "agentplatform_memory_bytes",
            "The size of each agent's MEMORY.md.",
            ["namespace", "agent"],
            registry=manager.metrics.registry,
        )
        manager.permissions.allow(kinds.ConfigMap, "get", "list", "watch", "create", "update", "delete")

    async def reconcile(self, agent: Agent) -> str | None:
        """Make the agent's memory ConfigMap if it has memory (delete it if not); its name."""
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
