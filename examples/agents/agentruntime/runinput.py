"""What a run's pod is given, read the way the operator lays it out: the input ConfigMap at
``/etc/agent`` (``system-prompt``, ``task``, ``model.json``, skills under ``skills/<pack>/``),
the agent's memory at ``/memory/MEMORY.md``, the model's key in the file ``MODEL_API_KEY_FILE``
names, and the limits in the environment."""

from __future__ import annotations

import fnmatch
import json
import os
import pathlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import kubeloop
from agentruntime.skilltools import CommandTool

CONFIG_DIR = "/etc/agent"
MEMORY_FILE = "/memory/MEMORY.md"
TERMINATION_LOG = "/dev/termination-log"
#: How many model turns a run takes without a limit of its own.
DEFAULT_MAX_TURNS = 10
DEFAULT_CALL_TIMEOUT_SECONDS = 120
DEFAULT_MAX_RETRIES = 4
#: Where providers that need no base URL in the Agent serve (OpenAI's is the SDK's default).
PROVIDER_BASE_URLS = {
    "ollama": "http://localhost:11434/v1",
    "vllm": "http://localhost:8000/v1",
    "llamacpp": "http://localhost:8080/v1",
    "lmstudio": "http://localhost:1234/v1",
}
#: Providers that serve without a key (the SDK still sends one).
KEYLESS_PROVIDERS = frozenset(PROVIDER_BASE_URLS)


class InputError(Exception):
    """What the pod was given cannot make a run; ``reason`` names it for the AgentRun."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Skill:
    pack: str
    name: str
    text: str


@dataclass(frozen=True)
class RunInput:
    run: str
    agent: str
    system_prompt: str
    task: str
    provider: str
    model: str
    base_url: str | None
    api_key: str | None
    skills: tuple[Skill, ...]
    memory: str
    #: The agent's memory server (persistent memory), else None: its memory file is the memory.
    memory_url: str | None
    #: The URLs of the agent's MCP servers.
    mcp_servers: tuple[str, ...]
    max_turns: int
    max_tokens: int | None
    timeout_seconds: float | None
    #: Each model call's own limit, and how many times a 429, a 5xx or a dropped connection is
    #: tried again (with back-off, honouring Retry-After).
    call_timeout_seconds: float
    max_retries: int
    #: Which tools the model may be offered (names or shell-style patterns; none: all), and
    #: which never (these win).
    allow_tools: tuple[str, ...] = ()
    deny_tools: tuple[str, ...] = ()
    #: Each MCP server's own filters (URL → ``{"allow": [...], "deny": [...]}``).
    mcp_filters: Mapping[str, Mapping[str, Sequence[str]]] = field(default_factory=dict)
    #: The headers requests to an MCP server carry (URL → header → value), read from the files
    #: ``MCP_HEADERS`` names. Secrets: never logged.
    mcp_headers: Mapping[str, Mapping[str, str]] = field(default_factory=dict, repr=False)
    #: The namespace the pod runs in (the downward API's ``metadata.namespace``), told to the model.
    namespace: str = ""
    #: The tools the skills declare (commands run in the pod), as their packs list them.
    skill_tools: tuple[CommandTool, ...] = ()

    @classmethod
    def load(cls, environ: Mapping[str, str] = os.environ, *, task: bool = True) -> RunInput:
        """Read the run's input (without ``task``: an agent's, which serves conversations);
        InputError when something it cannot do without is missing."""
        config = pathlib.Path(kubeloop.container_path(CONFIG_DIR))
        task_file = environ.get("TASK_FILE", f"{CONFIG_DIR}/task")
        given_task = _read(task_file) if task else ""
        if task and (given_task is None or not given_task.strip()):
            raise InputError("NoTask", f"the run's task is not in {task_file}")
        model = _model(config / "model.json")
        provider = environ.get("MODEL_PROVIDER") or str(model.get("provider") or "openai")
        name = environ.get("MODEL_NAME") or str(model.get("name") or "")
        if not name:
            raise InputError("NoModel", "no model is named (MODEL_NAME, model.json)")
        base_url = environ.get("MODEL_BASE_URL") or model.get("baseURL") or PROVIDER_BASE_URLS.get(provider)
        key_file = environ.get("MODEL_API_KEY_FILE")
        api_key = (_read(key_file) or "").strip() or None if key_file else None
        if api_key is None and provider not in KEYLESS_PROVIDERS:
            where = f"the file {key_file}" if key_file else "no key file (MODEL_API_KEY_FILE)"
            raise InputError("NoCredentials", f"the model's key is missing: {where}")
        return cls(
            run=environ.get("AGENT_RUN", ""),
            agent=environ.get("AGENT_NAME", ""),
            system_prompt=_read(environ.get("SYSTEM_PROMPT_FILE", f"{CONFIG_DIR}/system-prompt")) or "",
            task=given_task or "",
            provider=provider,
            model=name,
            base_url=str(base_url) if base_url else None,
            api_key=api_key,
            skills=_skills(config / "skills"),
            skill_tools=_skill_tools(config / "skills"),
            memory=_read(MEMORY_FILE) or "",
            memory_url=environ.get("MEMORY_URL") or None,
            mcp_servers=_names(environ, "MCP_SERVERS"),
            allow_tools=_names(environ, "AGENT_ALLOW_TOOLS"),
            deny_tools=_names(environ, "AGENT_DENY_TOOLS"),
            mcp_filters=_filters(environ.get("MCP_TOOL_FILTERS", "")),
            mcp_headers=_headers(environ.get("MCP_HEADERS", "")),
            namespace=environ.get("POD_NAMESPACE", ""),
            max_turns=_positive(environ, "AGENT_MAX_TURNS") or DEFAULT_MAX_TURNS,
            max_tokens=_positive(environ, "AGENT_MAX_TOKENS"),
            timeout_seconds=_positive(environ, "RUN_TIMEOUT_SECONDS"),
            call_timeout_seconds=_positive(environ, "MODEL_TIMEOUT_SECONDS") or DEFAULT_CALL_TIMEOUT_SECONDS,
            max_retries=_count(environ, "MODEL_MAX_RETRIES", DEFAULT_MAX_RETRIES),
        )

    def offers(self, tool: str) -> bool:
        """Whether the model may be offered ``tool`` (the agent's allowTools, then denyTools)."""
        return passes(tool, self.allow_tools, self.deny_tools)

    def instructions(self) -> str:
        """The system prompt the model gets: the agent's, then its skills, then where it runs."""
        parts = [self.system_prompt.strip()] if self.system_prompt.strip() else []
        for skill in self.skills:
            parts.append(f"## Skill: {skill.name} ({skill.pack})\n{skill.text.strip()}")
        if self.namespace:
            who = f"the agent {self.agent}" if self.agent else "an agent"
            parts.append(f"You are {who} in the Kubernetes namespace {self.namespace}.")
        return "\n\n".join(parts)


def _read(path: str) -> str | None:
    try:
        return pathlib.Path(kubeloop.container_path(path)).read_text()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def _model(path: pathlib.Path) -> dict[str, object]:
    try:
        found = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise InputError("InvalidInput", f"model.json is not JSON: {exc}") from None
    return found if isinstance(found, dict) else {}


def _skills(folder: pathlib.Path) -> tuple[Skill, ...]:
    """Each pack's skills (a file per skill; the links a ConfigMap volume makes are skipped)."""
    if not folder.is_dir():
        return ()
    found = []
    for pack in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for skill in sorted(s for s in pack.iterdir() if s.is_file() and not s.name.startswith(".")):
            found.append(Skill(pack.name, skill.name, skill.read_text()))
    return tuple(found)


#: Where a pack's ConfigMap lists its skills' tools.
SKILL_TOOLS_FILE = ".tools.json"


def _skill_tools(folder: pathlib.Path) -> tuple[CommandTool, ...]:
    """Each pack's skills' tools, from the pack's ``.tools.json`` (packs in order)."""
    if not folder.is_dir():
        return ()
    found: list[CommandTool] = []
    for pack in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        listing = pack / SKILL_TOOLS_FILE
        if not listing.is_file():
            continue
        try:
            declared = json.loads(listing.read_text())
            found.extend(
                CommandTool(
                    pack=pack.name,
                    skill=str(tool["skill"]),
                    name=str(tool["name"]),
                    description=str(tool.get("description") or ""),
                    parameters=dict(tool.get("parameters") or {"type": "object", "properties": {}}),
                    command=tuple(str(part) for part in tool["command"]),
                    timeout_seconds=float(tool.get("timeoutSeconds") or 30),
                )
                for tool in declared
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise InputError("InvalidInput", f"the tools of skill pack {pack.name} cannot be read: {exc!r}") from None
    return tuple(found)


def _filters(text: str) -> dict[str, dict[str, list[str]]]:
    if not text.strip():
        return {}
    try:
        found = json.loads(text)
    except ValueError as exc:
        raise InputError("InvalidInput", f"MCP_TOOL_FILTERS is not JSON: {exc}") from None
    if not isinstance(found, dict):
        raise InputError("InvalidInput", "MCP_TOOL_FILTERS is not a JSON object")
    return {
        str(url): {key: [str(n) for n in names] for key, names in dict(lists).items() if isinstance(names, list)}
        for url, lists in found.items()
        if isinstance(lists, dict)
    }


def _headers(text: str) -> dict[str, dict[str, str]]:
    """URL → header → value, from ``MCP_HEADERS`` (URL → header → the file holding its value)."""
    if not text.strip():
        return {}
    try:
        found = json.loads(text)
    except ValueError as exc:
        raise InputError("InvalidInput", f"MCP_HEADERS is not JSON: {exc}") from None
    if not isinstance(found, dict) or not all(isinstance(files, dict) for files in found.values()):
        raise InputError("InvalidInput", "MCP_HEADERS is not a JSON object of objects (URL → header → file)")
    headers: dict[str, dict[str, str]] = {}
    for url, files in found.items():
        headers[str(url)] = {}
        for header, path in files.items():
            value = _read(str(path))
            if value is None:
                raise InputError("InvalidInput", f"the {header} header of the MCP server at {url} is not in {path}")
            headers[str(url)][str(header)] = value.strip()
    return headers


def passes(tool: str, allow: Sequence[str], deny: Sequence[str]) -> bool:
    """Whether ``tool`` is allowed (no ``allow``: every tool) and not denied (patterns)."""
    allowed = not allow or any(fnmatch.fnmatchcase(tool, p) for p in allow)
    return allowed and not any(fnmatch.fnmatchcase(tool, p) for p in deny)


def _names(environ: Mapping[str, str], name: str) -> tuple[str, ...]:
    """A comma-separated list from the environment."""
    return tuple(part.strip() for part in environ.get(name, "").split(",") if part.strip())


def _count(environ: Mapping[str, str], name: str, default: int) -> int:
    """A whole number of at least 0 from the environment (``default`` without it)."""
    value = environ.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit():
        raise InputError("InvalidInput", f"{name}={value!r} is not a whole number of at least 0")
    return int(value)


def _positive(environ: Mapping[str, str], name: str) -> int | None:
    value = environ.get(name, "").strip()
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        raise InputError("InvalidInput", f"{name}={value!r} is not a whole number") from None
    if number < 1:
        raise InputError("InvalidInput", f"{name}={value!r} is not positive")
    return number
