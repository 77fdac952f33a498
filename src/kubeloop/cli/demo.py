"""``kubeloop demo``: the agent platform operator on the embedded server, shown live.

It starts the embedded API server with its node (pods of the images installed packages declare
run as local processes: the platform's agent runner, agent server, MCP server, memory server,
channel programs and scripted model once ``examples/agents`` is installed; others are
simulated), installs the operator's CRDs, runs its manager, applies the samples
(``examples/agents/config/samples``: a scripted model, a runtime, a skill pack, an MCP server,
three agents, a persona pack, a schedule firing every minute, one run and an AgentPolicy) into
the namespace ``demo`` with the operator's admission webhooks installed and its policies
enforced, posts one delivery to the operator's run webhook (as a chat bot would) and two signed
chat messages to triage's webhook channel, whose program (a process of the channel's Deployment)
posts them to the operator's inbound endpoint (one becomes a run whose reply and memory show,
one the channel's rule refuses), asks for an agent the policy refuses and prints why, runs a task in a Sandbox when agent-sandbox's controller (``examples/agent_sandbox``)
is beside the operator (its CRD installed, its controller on the same manager), and shows a live
view: the objects with their conditions and phases, each run's tokens, tool calls and cost, each
controller's reconciles and queue depth, and the latest events. The kubeconfig's path, a
``kubectl logs`` of a run's transcript and a curl command for the webhook are printed, so
kubectl and curl can be used beside it.

The agents' model is the samples' scripted one unless the environment names a real provider
(:class:`DemoModel`: ``OPENAI_API_KEY``, ``AGENTS_MODEL_BASE_URL``, ``AGENTS_MODEL``).

``--once`` waits until everything has converged (every agent and MCP server ready for its
current generation, the packs observed, the sample and webhook runs finished, the schedules
planned),
prints the view once and exits 0; or exits 1 naming what did not converge in ``--timeout``,
or as soon as all that is left is Agents refused for a reason only a user can change.
SIGTERM ends it as Ctrl-C does: the server stops its pods' processes on the way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import hmac
import inspect
import os
import pathlib
import secrets
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import aiohttp
import orjson
import yaml
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kubeloop import errors, kinds
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.object import Obj
from kubeloop.api.timestamps import parse_time
from kubeloop.cli.operatorview import ViewWriter
from kubeloop.client.config import load_config
from kubeloop.client.crdinstall import install_crds
from kubeloop.client.rest import APIClient
from kubeloop.manager.manager import Manager
from kubeloop.manager.operatortarget import load_target, module_crds
from kubeloop.manager.webhookconfigurations import install_webhook_configurations
from kubeloop.webhook.server import WebhookServer

NAMESPACE = "demo"
FIELD_MANAGER = "kubeloop-demo"
GROUP, VERSION = "agents.kubeloop.dev", "v1alpha1"
RUNTIME = GroupVersionKind(GROUP, VERSION, "ServingRuntime")
SKILL_PACK = GroupVersionKind(GROUP, VERSION, "SkillPack")
MCP_SERVER = GroupVersionKind(GROUP, VERSION, "MCPServer")
AGENT = GroupVersionKind(GROUP, VERSION, "Agent")
RUN = GroupVersionKind(GROUP, VERSION, "AgentRun")
SCHEDULE = GroupVersionKind(GROUP, VERSION, "AgentSchedule")
PERSONA_PACK = GroupVersionKind(GROUP, VERSION, "PersonaPack")
EVENT = kinds.Event
#: The delivery the demo posts to the run webhook, as a chat bot would.
DELIVERY_ID = "demo-1"
DELIVERY = {"agent": "writer", "task": "Draft the release notes for 0.1.", "namespace": NAMESPACE}
#: The chat messages the demo posts to triage's channel: one its rule takes, one it refuses.
CHAT = ("triage", "webhook")
#: Where the webhook channel's program listens, and the key it checks posts are signed with.
CHANNEL_PORT = 8080
SIGNING_KEY = "WEBHOOK_SIGNING_KEY"
CHAT_MESSAGES = (
    ("demo-chat-1", {"text": "@triage why is checkout slow?", "user": "alice", "thread": "C-1"}),
    ("demo-chat-2", {"text": "@triage delete the namespace", "user": "mallory", "thread": "C-2"}),
)
#: What the demo asks for that the samples' AgentPolicy does not allow.
ROGUE_AGENT: Obj = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "Agent",
    "metadata": {"name": "rogue", "namespace": NAMESPACE},
    "spec": {"runtimeRef": "python-agent", "model": {"provider": "unknown-llm", "name": "x"}},
}
#: The run the demo makes in a Sandbox (``backend: sandbox``) when agent-sandbox's controller
#: (``examples/agent_sandbox``, beside the operator) runs with it.
SANDBOXED_RUN: Obj = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "AgentRun",
    "metadata": {"name": "isolated-tests"},
    "spec": {
        "agentRef": "writer",
        "task": "Draft a changelog entry for running tests in a sandbox.",
        "backend": "sandbox",
    },
}
#: The samples' kinds that start runs: applied once the model serves.
WORK_KINDS = ("AgentRun", "AgentSchedule")
#: The samples' scripted model (``00-model.yaml``): its Deployment and Service are named so.
SCRIPTED_MODEL = "scripted-model"
#: The model a real provider is asked for unless ``AGENTS_MODEL`` names another.
DEFAULT_REAL_MODEL = "gpt-4o-mini"
#: The Secret the samples' agents take their model's key from.
CREDENTIALS = "llm-credentials"


@dataclass(frozen=True)
class DemoModel:
    """The model the demo's agents call: the samples' scripted one, or a real provider named by
    the environment (``OPENAI_API_KEY``; ``AGENTS_MODEL_BASE_URL`` for any OpenAI-compatible
    server, e.g. a local Ollama's ``http://localhost:11434/v1``; ``AGENTS_MODEL`` its name)."""

    name: str
    base_url: str | None = None
    api_key: str | None = None

    @property
    def scripted(self) -> bool:
        return self.api_key is None and self.base_url is None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> DemoModel:
        base_url = environ.get("AGENTS_MODEL_BASE_URL") or None
        api_key = environ.get("OPENAI_API_KEY") or None
        if base_url is None and api_key is None:
            return cls("scripted")
        return cls(environ.get("AGENTS_MODEL") or DEFAULT_REAL_MODEL, base_url, api_key or "unused")

    def describe(self) -> str:
        if self.scripted:
            return (
                f"scripted model (Service {SCRIPTED_MODEL}: replies that call the MCP and memory tools;"
                " set OPENAI_API_KEY or AGENTS_MODEL_BASE_URL for a real one)"
            )
        return f"{self.name} at {self.base_url or 'https://api.openai.com/v1'}"

    def applied_to(self, samples: list[Obj]) -> list[Obj]:
        """``samples`` with every agent's model this one (the scripted model's objects dropped and
        the key in the credentials Secret when it is a real one)."""
        if self.scripted:
            return samples
        model: dict[str, Any] = {
            "provider": "openai",
            "name": self.name,
            "authSecretRef": {"name": CREDENTIALS, "key": "token"},
        }
        if self.base_url:
            model["baseURL"] = self.base_url
        kept: list[Obj] = []
        for obj in samples:
            kind, name = obj.get("kind"), obj["metadata"]["name"]
            if kind in ("Deployment", "Service") and name == SCRIPTED_MODEL:
                continue
            obj = copy.deepcopy(obj)
            if kind == "Agent":
                obj["spec"]["model"] = dict(model)
            elif kind == "PersonaPack":
                for member in obj["spec"].get("agents") or ():
                    member["spec"]["model"] = dict(model)
            elif kind == "Secret" and name == CREDENTIALS:
                obj["stringData"] = {"token": self.api_key}
            kept.append(obj)
        return kept


CONFIG_MAP = kinds.ConfigMap
ENDPOINTS = kinds.Endpoints
DEPLOYMENT = kinds.Deployment
MUTATING = kinds.MutatingWebhookConfiguration
VALIDATING = kinds.ValidatingWebhookConfiguration
NAMESPACE_KIND = kinds.Namespace


def default_operator() -> pathlib.Path:
    """``examples/agents`` of the source tree kubeloop runs from (or of the current directory)."""
    for root in (pathlib.Path(__file__).resolve().parents[3], pathlib.Path.cwd()):
        candidate = root / "examples" / "agents"
        if (candidate / "main.py").exists():
            return candidate
    raise SystemExit("kubeloop demo: examples/agents not found; run it from a kubeloop checkout (make demo)")


def agent_sandbox_beside(operator: pathlib.Path) -> tuple[pathlib.Path, ModuleType] | None:
    """``agent_sandbox`` beside the operator's folder (agent-sandbox's Sandbox controller) and its
    module, if it is there."""
    folder = operator.parent / "agent_sandbox"
    if not (folder / "main.py").exists():
        return None
    module, _ = load_target(str(folder))
    return folder, module


def load_samples(folder: pathlib.Path) -> list[Obj]:
    """The objects of the YAML files in ``folder``, in file-name order (its ``kustomization.yaml``,
    which lists them for ``kubectl apply -k``, aside)."""
    objects: list[Obj] = []
    for path in sorted(folder.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        objects.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return objects


@dataclass
class State:
    """What the view shows: the platform's objects in the demo namespace and the events."""

    runtimes: list[Obj] = field(default_factory=list)
    skill_packs: list[Obj] = field(default_factory=list)
    mcp_servers: list[Obj] = field(default_factory=list)
    agents: list[Obj] = field(default_factory=list)
    runs: list[Obj] = field(default_factory=list)
    schedules: list[Obj] = field(default_factory=list)
    persona_packs: list[Obj] = field(default_factory=list)
    events: list[Obj] = field(default_factory=list)
    #: Agent name → the size of its MEMORY.md.
    memory: dict[str, int] = field(default_factory=dict)

    def version(self) -> tuple[object, ...]:
        """What changes when anything the view shows of the objects does (their
        resourceVersions, the memories' sizes): a piped view is printed again only then."""
        objects = (
            self.runtimes, self.skill_packs, self.mcp_servers, self.agents, self.runs,
            self.schedules, self.persona_packs, self.events,
        )  # fmt: skip
        versions = tuple(
            (o["metadata"].get("uid"), o["metadata"].get("resourceVersion")) for os_ in objects for o in os_
        )
        return (versions, tuple(sorted(self.memory.items())))

    @classmethod
    async def read(cls, client: APIClient) -> State:
        async def items(kind: GroupVersionKind, namespace: str | None = NAMESPACE) -> list[Obj]:
            found = await client.list(kind, namespace=namespace)
            return sorted(found.items, key=lambda obj: str(obj["metadata"]["name"]))

        return cls(
            runtimes=await items(RUNTIME, None),
            skill_packs=await items(SKILL_PACK),
            mcp_servers=await items(MCP_SERVER),
            agents=await items(AGENT),
            runs=await items(RUN),
            schedules=await items(SCHEDULE),
            persona_packs=await items(PERSONA_PACK),
            events=await items(EVENT),
            memory={
                str(config["metadata"]["labels"]["app.kubernetes.io/instance"]): len(
                    str((config.get("data") or {}).get("MEMORY.md", "")).encode()
                )
                for config in (
                    await client.list(
                        CONFIG_MAP, namespace=NAMESPACE, label_selector="app.kubernetes.io/name=memory"
                    )
                ).items
            },
        )

    def not_converged(self, sample_runs: Iterable[str]) -> list[str]:
        """What has not converged yet (nothing: all has)."""
        waiting = [why for agent in self.agents if (why := _agent_waiting(agent)) is not None]
        for agent in self.agents:
            for channel in (agent.get("status") or {}).get("channels") or ():
                if channel.get("phase") != "Connected":
                    waiting.append(f"Agent {_name(agent)}: {channel['type']} channel {channel.get('phase')}")
        for server in self.mcp_servers:
            status = server.get("status") or {}
            remote = bool(server["spec"].get("url"))  # runs elsewhere: nothing here to be ready
            if not _observed(server) or (
                not remote and status.get("readyReplicas") != server["spec"].get("replicas", 1)
            ):
                waiting.append(f"MCPServer {_name(server)}: {status.get('readyReplicas') or 0} ready")
        for pack in (*self.skill_packs, *self.persona_packs):
            if not _observed(pack):
                waiting.append(f"{pack['kind']} {_name(pack)}: not reconciled yet")
        names = {_name(agent) for agent in self.agents}
        for pack in self.persona_packs:
            missing = [name for name in (pack.get("status") or {}).get("agents") or () if name not in names]
            if missing:
                waiting.append(f"PersonaPack {_name(pack)}: agents {', '.join(missing)} not made yet")
        runs = {_name(run): run for run in self.runs}
        for name in sample_runs:
            phase = ((runs.get(name) or {}).get("status") or {}).get("phase")
            if phase not in ("Succeeded", "Failed"):
                waiting.append(f"AgentRun {name}: {phase or 'not started'}")
        for schedule in self.schedules:
            status = schedule.get("status") or {}
            if not schedule["spec"].get("suspend") and not status.get("nextScheduleTime"):
                waiting.append(f"AgentSchedule {_name(schedule)}: not planned yet")
        return waiting


    def refused(self) -> list[str]:
        """Agents refused for a reason only a user can change (``REFUSED_REASONS``), worded as
        :meth:`not_converged` words them: when nothing else is waiting, waiting longer is futile."""
        return [
            why
            for agent in self.agents
            if _observed(agent)
            and _condition(agent, "Ready").get("reason") in REFUSED_REASONS
            and (why := _agent_waiting(agent)) is not None
        ]


#: An Agent's Ready reasons that no reconcile changes: an object of its names it does not control
#: (NameConflict), an object of it the server refused (Invalid).
REFUSED_REASONS = frozenset({"NameConflict", "Invalid"})


def _agent_waiting(agent: Obj) -> str | None:
    """Why an Agent is not ready yet (None: it is)."""
    ready, resolved = _condition(agent, "Ready"), _condition(agent, "RuntimeResolved")
    if _observed(agent) and ready.get("status") == "True":
        return None
    why = resolved if resolved.get("status") == "False" else ready
    return f"Agent {_name(agent)}: {why.get('message') or 'not reconciled yet'}"


def _name(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


def _observed(obj: Obj) -> bool:
    observed = (obj.get("status") or {}).get("observedGeneration")
    return observed is not None and observed == obj["metadata"].get("generation")


def _condition(obj: Obj, kind: str) -> dict[str, Any]:
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind:
            return dict(condition)
    return {}


def _age(stamp: Any, now: datetime) -> str:
    moment = parse_time(stamp)
    if moment is None:
        return "-"
    seconds = max(0, int((now - moment).total_seconds()))
    return f"{seconds}s" if seconds < 120 else f"{seconds // 60}m"


def _trigger(run: Obj) -> str:
    labels = run["metadata"].get("labels") or {}
    if f"{GROUP}/schedule" in labels:
        return f"schedule {labels[f'{GROUP}/schedule']}"
    trigger = (run.get("spec") or {}).get("trigger")
    if trigger:
        return f"{trigger['channel']} chat, {trigger['user']}"
    return str(labels.get(f"{GROUP}/trigger") or "kubectl")


def _status_text(value: str, good: tuple[str, ...], bad: tuple[str, ...]) -> Text:
    style = "green" if value in good else "red" if value in bad else "yellow"
    return Text(value, style=style)


def show(console: Console, view: RenderableType) -> None:
    """Print ``view``; to a file or pipe at the width its content needs (a terminal's width is
    not there to cut it at, and rich would otherwise cut it at 80 columns)."""
    if console.is_terminal:
        console.print(view)
        return
    width = console.measure(view, options=console.options.update(width=10_000)).maximum
    previous = console.width
    console.width = max(width, previous)  # print(width=) is capped at the console's own
    try:
        console.print(view)
    finally:
        console.width = previous


def render(state: State, manager: Manager, *, header: str) -> Group:
    """The live view of ``state`` and ``manager``'s controllers."""
    now = datetime.now(UTC)
    agents = Table(title="Agents", title_justify="left", expand=True)
    for column in ("name", "runtime", "model", "ready", "replicas", "runtime resolved", "channels", "memory"):
        agents.add_column(column)
    for agent in state.agents:
        ready, resolved = _condition(agent, "Ready"), _condition(agent, "RuntimeResolved")
        status = agent.get("status") or {}
        agents.add_row(
            _name(agent),
            agent["spec"]["runtimeRef"],
            f"{agent['spec']['model']['provider']}/{agent['spec']['model']['name']}",
            _status_text(str(ready.get("reason") or "-"), ("DeploymentReady",), ()),
            f"{status.get('readyReplicas', 0)}/{agent['spec'].get('replicas', 1)}",
            _status_text(
                str(resolved.get("reason") or "-"), ("Resolved",), ("RuntimeNotFound", "RuntimeDisabled")
            ),
            ", ".join(f"{c['type']} {c.get('phase')}" for c in status.get("channels") or ()) or "-",
            f"{state.memory[_name(agent)]} B" if _name(agent) in state.memory else "-",
        )

    runs = Table(title="Runs", title_justify="left", expand=True)
    for column in (
        "name",
        "agent",
        "from",
        "phase",
        "reason",
        "age",
        "tokens",
        "tool calls",
        "cost",
        "result",
    ):
        runs.add_column(column, overflow="fold" if column == "result" else "ellipsis")
    for run in state.runs:
        status = run.get("status") or {}
        usage = status.get("usage") or {}
        sandboxed = run["spec"].get("backend") == "sandbox"
        runs.add_row(
            _name(run),
            run["spec"]["agentRef"] + (" (sandbox)" if sandboxed else ""),
            _trigger(run),
            _status_text(str(status.get("phase") or "-"), ("Succeeded",), ("Failed",)),
            str(status.get("reason") or "-"),
            _age(run["metadata"].get("creationTimestamp"), now),
            str(usage.get("totalTokens", "-")),
            str(usage.get("toolCalls", "-")),
            str(status.get("costEstimate") or "-"),
            str(status.get("reply") or status.get("result") or status.get("message") or ""),
        )

    platform = Table(title="Schedules, tools and packs", title_justify="left", expand=True)
    for column in ("kind", "name", "state"):
        platform.add_column(column)
    for schedule in state.schedules:
        status = schedule.get("status") or {}
        active = ", ".join(status.get("active") or ()) or "none"
        platform.add_row(
            "AgentSchedule",
            _name(schedule),
            f"{schedule['spec']['schedule']!r} active: {active}; last {status.get('lastScheduleTime', '-')};"
            f" next {status.get('nextScheduleTime', '-')}",
        )
    for server in state.mcp_servers:
        status = server.get("status") or {}
        serving = "remote" if server["spec"].get("url") else f"{status.get('readyReplicas', 0)} ready"
        platform.add_row("MCPServer", _name(server), f"{serving} at {status.get('url', '-')}")
    for pack in state.skill_packs:
        platform.add_row("SkillPack", _name(pack), f"{(pack.get('status') or {}).get('skills', 0)} skills")
    for pack in state.persona_packs:
        status = pack.get("status") or {}
        made = [*(status.get("agents") or ()), *(status.get("schedules") or ())]
        platform.add_row("PersonaPack", _name(pack), "made " + (", ".join(made) or "nothing yet"))
    for runtime in state.runtimes:
        disabled = " (disabled)" if runtime["spec"].get("disabled") else ""
        platform.add_row("ServingRuntime", _name(runtime), f"{runtime['spec']['image']}{disabled}")

    controllers = Table(title="Controllers", title_justify="left", expand=True)
    for column in ("controller", "reconciles", "errors", "queue", "busy workers"):
        controllers.add_column(column)
    for name, controller in sorted(manager.controllers.items()):
        controllers.add_row(
            name,
            str(sum(controller.results.values())),
            str(controller.results.get("error", 0)),
            str(len(controller.queue)),
            str(controller.active_workers),
        )

    events = Table(title="Latest events", title_justify="left", expand=True)
    for column in ("age", "type", "reason", "object", "message"):
        events.add_column(column, overflow="fold" if column == "message" else "ellipsis")
    latest = sorted(
        state.events, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""), reverse=True
    )
    for event in latest[:8]:
        involved = event.get("involvedObject") or {}
        events.add_row(
            _age(event.get("lastTimestamp") or event.get("eventTime"), now),
            _status_text(str(event.get("type") or ""), ("Normal",), ("Warning",)),
            str(event.get("reason") or ""),
            f"{involved.get('kind')}/{involved.get('name')}",
            str(event.get("message") or ""),
        )
    return Group(Text(header, style="bold"), agents, runs, platform, controllers, events)


async def run_demo(
    *,
    once: bool,
    data_dir: pathlib.Path | None,
    port: int,
    timeout: float = 30.0,
    operator: pathlib.Path | None = None,
    webhook_port: int = 0,
    console: Console | None = None,
) -> int:
    from kubeloop.apiserver.server import APIServer, ServerOptions

    console = console or Console()
    if not console.is_terminal:
        console.soft_wrap = True  # a file or pipe: lines as long as they are, not cut at 80 columns
    operator = operator or default_operator()
    module, attribute = load_target(str(operator))
    setup = getattr(module, attribute)
    model = DemoModel.from_environment(os.environ)
    samples = model.applied_to(load_samples(operator / "config" / "samples"))
    sample_runs = [_name(obj) for obj in samples if obj.get("kind") == "AgentRun"]
    started = time.monotonic()
    options = ServerOptions(memory=data_dir is None, data_dir=data_dir, port=port, simulate=True)
    async with APIServer(options) as server:
        kubeconfig = server.kubeconfig_path
        console.print(f"[bold]kubeloop demo[/]: embedded API server at {server.url}")
        console.print(f"  kubeconfig: {kubeconfig}")
        console.print(f"  try: kubectl --kubeconfig {kubeconfig} get agents,agentruns,all -n {NAMESPACE}")
        console.print(f"  model: {model.describe()}")
        async with APIClient(load_config(str(kubeconfig))) as client:
            installed = await install_crds(client, *module_crds(module))
            console.print(f"  installed {len(installed)} CRDs from {operator}")
            manager = Manager(client, webhook_server=WebhookServer(port=0))
            agent_sandbox = agent_sandbox_beside(operator)
            if agent_sandbox is not None:  # a cluster with agent-sandbox: its CRD and controller
                folder, sandbox_module = agent_sandbox
                await install_crds(client, *module_crds(sandbox_module))
                sandbox_module.setup(manager)
                console.print(f"  installed agent-sandbox from {folder}: the Sandbox CRD and its controller")
            token = secrets.token_urlsafe(12)
            options_type = getattr(module, "WebhookOptions", None)
            extra: dict[str, Any] = {}
            if "enforce_policies" in inspect.signature(setup).parameters:
                extra["enforce_policies"] = True
            if options_type is None:  # an operator without the run webhook
                platform = setup(manager, **extra)
            else:
                # Its port chosen now: the channels' programs (processes) post to it.
                webhook_port = webhook_port or _free_port()
                settings_type = getattr(module, "ChannelSettings", None)
                if settings_type is not None and "channel_settings" in inspect.signature(setup).parameters:
                    extra["channel_settings"] = settings_type(inbound_url=f"http://127.0.0.1:{webhook_port}")
                options = options_type(token, bind_address=f"127.0.0.1:{webhook_port}", namespace=NAMESPACE)
                platform = setup(manager, webhook_options=options, **extra)
            webhook = getattr(platform, "webhook", None)
            await _forget_earlier_webhooks(client)
            async with manager:
                if manager.webhook_server.webhooks:  # the operator's admission webhooks, called from now on
                    installed_hooks = await install_webhook_configurations(client, manager.webhook_server)
                    console.print(
                        f"  installed {len(installed_hooks)} webhook configuration(s) of the operator"
                    )
                # The work (runs, schedules) once the model serves: a run started before would
                # spend its retries on a Service with no endpoint yet.
                work = [obj for obj in samples if obj.get("kind") in WORK_KINDS]
                await _apply(client, [obj for obj in samples if obj.get("kind") not in WORK_KINDS])
                if model.scripted and await _serving(client, SCRIPTED_MODEL, started + timeout) is None:
                    console.print(f"  [red]the scripted model is not serving after {timeout:g}s[/]")
                await _apply(client, work)
                console.print(f"  applied {len(samples)} sample objects into namespace {NAMESPACE}")
                if agent_sandbox is not None:
                    await client.apply(SANDBOXED_RUN, field_manager=FIELD_MANAGER, namespace=NAMESPACE)
                    sample_runs.append(_name(SANDBOXED_RUN))
                    console.print(
                        f"  asked for AgentRun {_name(SANDBOXED_RUN)} with backend: sandbox: "
                        "its pod runs in a Sandbox of agent-sandbox"
                    )
                if extra:
                    console.print(f"  {await _refused_by_policy(client)}", soft_wrap=True)
                first_run = next(iter(sample_runs), None)
                if first_run is not None:
                    console.print(
                        f"  try: kubectl --kubeconfig {kubeconfig} logs job/{first_run} -n {NAMESPACE}"
                        " (a run's transcript: each model turn and tool call)"
                    )
                header = f"kubeloop demo — {server.url} — kubeconfig {kubeconfig} — model: {model.describe()}"
                if webhook is not None:
                    await asyncio.wait_for(webhook.serving.wait(), timeout)
                    url = f"http://127.0.0.1:{webhook.port}/runs"
                    run = await _post_delivery(url, token)
                    sample_runs.append(run)
                    console.print(f"  posted delivery {DELIVERY_ID} to the run webhook {url}: AgentRun {run}")
                    for line in await _chat(client, _signing_key(samples), sample_runs, started + timeout):
                        console.print(f"  {line}", soft_wrap=True)
                    example = orjson.dumps({"agent": "triage", "task": "Is the ingress healthy?"}).decode()
                    # The last line written here on the loop: the view is written by a thread.
                    console.print(
                        f"  try: curl -X POST {url} -H 'Authorization: Bearer {token}'"
                        f" -H 'X-Delivery-ID: my-1' -d '{example}'",
                        soft_wrap=True,
                    )
                    header += f" — webhook {url}"
                if once:
                    return await _converge(client, manager, sample_runs, started, timeout, console)
                header += " — Ctrl-C to stop"
                # The view is written by a thread of its own: a terminal or pipe that stops
                # reading holds up the view alone, not the server and the operator sharing this
                # loop, nor the way out (see ViewWriter).
                if not console.is_terminal:  # piped or logged: the view again when it changed
                    snapshots = ViewWriter(lambda view: show(console, view))
                    shown: tuple[object, ...] | None = None
                    while True:
                        state = await State.read(client)
                        if state.version() != shown:
                            shown = state.version()
                            snapshots.show(render(state, manager, header=header))
                        await asyncio.sleep(1)
                with Live(console=console, refresh_per_second=4, screen=False) as live:
                    redraws = ViewWriter(live.update)
                    while True:
                        redraws.show(render(await State.read(client), manager, header=header))
                        await asyncio.sleep(0.5)
    return 0  # not reached: the live view runs until cancelled


async def _post_delivery(url: str, token: str) -> str:
    """Post the demo's delivery to the run webhook; the name of the run it starts."""
    headers = {"Authorization": f"Bearer {token}", "X-Delivery-ID": DELIVERY_ID}
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, json=DELIVERY, headers=headers) as answer,
    ):
        body = await answer.json()
        if answer.status not in (200, 202):
            raise RuntimeError(f"the run webhook refused the demo's delivery: {answer.status} {body}")
        return str(body["run"])


async def _forget_earlier_webhooks(client: APIClient) -> None:
    """Delete the webhook configurations an earlier demo on the same ``--data-dir`` installed:
    they call a port its process served, and would refuse every write (failing closed) until
    this demo's replace them."""
    for kind in (MUTATING, VALIDATING):
        for configuration in (await client.list(kind)).items:
            if any(
                "url" in (webhook.get("clientConfig") or {})
                for webhook in configuration.get("webhooks") or ()
            ):
                with contextlib.suppress(errors.NotFound):
                    await client.delete(configuration)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _signing_key(samples: list[Obj]) -> str:
    """The key the samples give triage's webhook channel to check posts with (in its Secret)."""
    agent_name, kind = CHAT
    agent = next(o for o in samples if o.get("kind") == "Agent" and _name(o) == agent_name)
    channel = next(c for c in agent["spec"].get("channels") or () if c.get("type") == kind)
    secret = next(
        o for o in samples if o.get("kind") == "Secret" and _name(o) == channel["secretRef"]["name"]
    )
    return str((secret.get("stringData") or {})[SIGNING_KEY])


async def _chat(client: APIClient, key: str, sample_runs: list[str], deadline: float) -> list[str]:
    """Post the demo's chat messages to triage's webhook channel, as a chat's bot would: to its
    program's ``/messages`` (a process of the channel's Deployment), signed with the channel's key.
    What became of each (a run taken, added to ``sample_runs``)."""
    agent, kind = CHAT
    service = f"{agent}-channel-{kind}"
    said: list[str] = []
    async with aiohttp.ClientSession() as session:
        for delivery, message in CHAT_MESSAGES:
            body = orjson.dumps(message)
            signature = "sha256=" + hmac.new(key.encode(), body, hashlib.sha256).hexdigest()
            headers = {
                "X-Signature-256": signature,
                "X-Delivery-ID": delivery,
                "Content-Type": "application/json",
            }
            found: dict[str, Any] | None = None
            # Posted again until its pod answers (the delivery id makes a second post of a
            # message no second run), once its Deployment has rolled out: on a data dir an
            # earlier demo left, the earlier pod posts to that demo's inbound port.
            while found is None:
                address = (
                    await _serving(client, service, deadline)
                    if await _rolled_out(client, service, deadline)
                    else None
                )
                if address is None:
                    return [*said, f"chat: the {kind} channel of {agent} is not serving; no message posted"]
                url = f"http://{address}:{CHANNEL_PORT}/messages?wait=0"  # the reply: in the run's status
                try:
                    async with session.post(url, data=body, headers=headers) as answer:
                        found = await answer.json()
                except (aiohttp.ClientError, ValueError):
                    if time.monotonic() >= deadline:
                        return [
                            *said,
                            f"chat: the {kind} channel of {agent} did not answer; no message posted",
                        ]
                    await asyncio.sleep(0.2)
            who = f"{message['user']} on {agent}'s {kind} channel ({message['text']!r})"
            if found.get("accepted"):
                sample_runs.append(str(found["run"]))
                said.append(f"chat: {who} became AgentRun {found['run']}; its reply will be in its status")
            else:
                said.append(f"chat: {who} was refused: {found.get('reason') or found.get('error')}")
    return said


async def _refused_by_policy(client: APIClient) -> str:
    """Ask for an agent the samples' AgentPolicy does not allow; what the webhook answered."""
    try:
        await client.create(ROGUE_AGENT)
    except errors.APIError as refused:
        return f"policy: Agent rogue refused: {refused}"
    await client.delete(AGENT, "rogue", namespace=NAMESPACE)
    return "policy: Agent rogue was allowed (no AgentPolicy forbids it)"


async def _rolled_out(client: APIClient, name: str, deadline: float) -> bool:
    """Wait until Deployment ``name`` runs its current template only, every replica available
    (False: not by ``deadline``)."""
    while True:
        with contextlib.suppress(errors.NotFound):
            found = await client.get(DEPLOYMENT, name, namespace=NAMESPACE)
            wanted, status = int(found["spec"].get("replicas", 1)), found.get("status") or {}
            if (
                int(status.get("observedGeneration") or 0) >= int(found["metadata"].get("generation") or 0)
                and int(status.get("updatedReplicas") or 0) == wanted
                and int(status.get("availableReplicas") or 0) == wanted
                and int(status.get("replicas") or 0) == wanted
            ):
                return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.2)


async def _serving(client: APIClient, service: str, deadline: float) -> str | None:
    """Wait until ``service`` has a ready endpoint (the scripted model's, which runs reach; the
    channel's, which the demo posts to); its address (None: not by ``deadline``)."""
    while True:
        with contextlib.suppress(errors.NotFound):
            endpoints = await client.get(ENDPOINTS, service, namespace=NAMESPACE)
            for subset in endpoints.get("subsets") or ():
                for address in subset.get("addresses") or ():
                    return str(address["ip"])
        if time.monotonic() >= deadline:
            return None
        await asyncio.sleep(0.2)


async def _apply(client: APIClient, samples: list[Obj]) -> None:
    await client.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        field_manager=FIELD_MANAGER,
    )
    for obj in samples:
        namespace = None if obj.get("kind") == "ServingRuntime" else NAMESPACE
        await client.apply(obj, field_manager=FIELD_MANAGER, force=True, namespace=namespace)


async def _converge(
    client: APIClient,
    manager: Manager,
    sample_runs: list[str],
    started: float,
    timeout: float,
    console: Console,
) -> int:
    deadline = started + timeout
    while True:
        state = await State.read(client)
        waiting = state.not_converged(sample_runs)
        took = time.monotonic() - started
        if not waiting:
            show(console, render(state, manager, header=f"kubeloop demo: converged in {took:.1f}s"))
            return 0
        # All else converged and what is left waits for a user: said now, not after the timeout.
        if time.monotonic() >= deadline or waiting == state.refused():
            show(console, render(state, manager, header=f"kubeloop demo: not converged after {took:.1f}s"))
            console.print("[red]kubeloop demo: did not converge:[/]")
            for reason in waiting:
                console.print(f"  - {reason}")
            return 1
        await asyncio.sleep(0.25)
