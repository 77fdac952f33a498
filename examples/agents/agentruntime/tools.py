"""The tools a run offers its model: each a name, a JSON schema for its arguments, and what
it does. A tool's failure is a :class:`ToolError`; the runner ends the run with ToolFailed.

The memory tools work on the agent's ``MEMORY.md`` (mounted read-only; the runner's
termination message carries what the run stores, and the operator appends it): entries are
the text between ``<!-- run NAME -->`` / ``<!-- seed -->`` markers. An agent with persistent
memory has a memory server instead (``MEMORY_URL``): the same tools search and store there.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

#: The most of a search's answer the model gets.
SEARCH_RESULTS = 5
#: How long a memory server that is not ready is tried again.
RETRY_SECONDS = 15.0
_MARKER = re.compile(r"^<!-- (?:run [^>]*|seed) -->$", re.MULTILINE)
_WORD = re.compile(r"\w+")


class ToolError(Exception):
    """A tool could not do what it was asked (the message says why)."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any]], Awaitable[str]]

    def spec(self) -> dict[str, Any]:
        """The tool as Chat Completions declares it."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass
class Memory:
    """The agent's memory as a run sees it: what it had (``known``) and what the run stores."""

    known: str
    stored: list[str] = field(default_factory=list)

    def entries(self) -> list[str]:
        pieces = _MARKER.split(self.known)
        return [piece.strip() for piece in [*pieces, *self.stored] if piece.strip()]

    def search(self, query: str) -> list[str]:
        """Entries sharing words with ``query``, most shared first (ties: newest first)."""
        wanted = {word.lower() for word in _WORD.findall(query)}
        if not wanted:
            raise ToolError("the query has no words to search for")
        scored = []
        for position, entry in enumerate(self.entries()):
            words = [word.lower() for word in _WORD.findall(entry)]
            score = sum(1 for word in words if word in wanted)
            if score:
                scored.append((score, position, entry))
        scored.sort(key=lambda found: (-found[0], -found[1]))
        return [entry for _, _, entry in scored[:SEARCH_RESULTS]]

    def tools(self) -> list[Tool]:
        async def search(arguments: dict[str, Any]) -> str:
            found = self.search(_text(arguments, "query"))
            return "\n---\n".join(found) if found else "nothing in memory matches"

        async def store(arguments: dict[str, Any]) -> str:
            self.stored.append(_text(arguments, "text").strip())
            return "stored"

        return memory_tools(search, store)


class MemoryServer:
    """The agent's memory server (``agentruntime.memoryserver``) at ``url``; what a run stores
    is written there at once, marked with the run's name. Reached as any URL of the pod is (the
    proxy its environment names, on kubeloop's process node)."""

    def __init__(self, url: str, run: str) -> None:
        self.url = url.rstrip("/")
        self.run = run
        self._session: aiohttp.ClientSession | None = None

    async def _call(self, method: str, path: str, **options: Any) -> Any:
        """The server's answer; a server that cannot be reached or is not ready (502-504: its
        Service has no ready endpoint yet, it restarts) is tried again for RETRY_SECONDS."""
        if self._session is None:
            self._session = aiohttp.ClientSession(trust_env=True, timeout=aiohttp.ClientTimeout(total=30))
        loop = asyncio.get_running_loop()
        deadline, delay = loop.time() + RETRY_SECONDS, 0.1
        while True:
            try:
                async with self._session.request(method, self.url + path, **options) as answer:
                    text = await answer.text()
                    if answer.status < 400:
                        return json.loads(text)
                    failure = f"the memory server answered {answer.status}: {text[:200].strip()}"
                    if answer.status not in (502, 503, 504):
                        raise ToolError(failure)
            except (aiohttp.ClientError, TimeoutError) as exc:
                failure = f"the memory server at {self.url} cannot be reached: {exc or type(exc).__name__}"
            if loop.time() + delay > deadline:
                raise ToolError(failure)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    def tools(self) -> list[Tool]:
        async def search(arguments: dict[str, Any]) -> str:
            query = _text(arguments, "query")
            found = await self._call("GET", "/v1/memories/search", params={"q": query, "limit": SEARCH_RESULTS})
            texts = [str(item.get("text")) for item in found.get("items") or ()]
            return "\n---\n".join(texts) if texts else "nothing in memory matches"

        async def store(arguments: dict[str, Any]) -> str:
            text = _text(arguments, "text").strip()
            await self._call("POST", "/v1/memories", json={"text": text, "source": f"run {self.run}"})
            return "stored"

        return memory_tools(search, store)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def memory_tools(
    search: Callable[[dict[str, Any]], Awaitable[str]], store: Callable[[dict[str, Any]], Awaitable[str]]
) -> list[Tool]:
    """``memory_search`` and ``memory_store``, doing what ``search`` and ``store`` do."""
    text_argument = {"type": "object", "additionalProperties": False}
    return [
        Tool(
            "memory_search",
            "Search the agent's memory (what earlier runs stored) for entries about a topic.",
            {**text_argument, "properties": {"query": {"type": "string"}}, "required": ["query"]},
            search,
        ),
        Tool(
            "memory_store",
            "Store a fact in the agent's memory for later runs.",
            {**text_argument, "properties": {"text": {"type": "string"}}, "required": ["text"]},
            store,
        ),
    ]


def _text(arguments: dict[str, Any], name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"the argument {name!r} must be a non-empty string")
    return value


def kubernetes_tools(client: Any) -> list[Tool]:
    """Read-only Kubernetes tools acting as the pod's ServiceAccount (``client``: a
    ``kubeloop.APIClient`` with its credentials): a run's own Role is what limits them."""
    from agentruntime import kubernetesreads as reads

    async def refused_as_error(read: Awaitable[str]) -> str:
        try:
            return await read
        except reads.ReadRefused as refused:
            raise ToolError(str(refused)) from None

    async def list_objects(arguments: dict[str, Any]) -> str:
        return await refused_as_error(
            reads.list_objects(client, _text(arguments, "kind"), str(arguments.get("namespace") or ""))
        )

    async def get_object(arguments: dict[str, Any]) -> str:
        kind, name = _text(arguments, "kind"), _text(arguments, "name")
        return await refused_as_error(reads.get_object(client, kind, name, str(arguments.get("namespace") or "")))

    async def events(arguments: dict[str, Any]) -> str:
        limit = arguments.get("limit", 20)
        return await refused_as_error(
            reads.namespace_events(client, _text(arguments, "namespace"), limit if isinstance(limit, int) else 20)
        )

    def schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": False, "properties": properties, "required": required}

    text = {"type": "string"}
    return [
        Tool("k8s_list_objects", "List the objects of a kind (pods, deployments, configmaps, jobs, events...) "
             "in a namespace, as this run may see them.", schema({"kind": text, "namespace": text}, ["kind"]), list_objects),
        Tool("k8s_get_object", "Read one object of a kind by name, as JSON, as this run may see it.",
             schema({"kind": text, "name": text, "namespace": text}, ["kind", "name"]), get_object),
        Tool("k8s_namespace_events", "The latest events of a namespace, newest first.",
             schema({"namespace": text, "limit": {"type": "integer"}}, ["namespace"]), events),
    ]  # fmt: skip
