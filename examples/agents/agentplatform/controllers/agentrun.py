"""AgentRun → one task for an agent, run to completion as a Job.

When a run starts it snapshots its agent and runtime into ``<run>-input``, a ConfigMap holding
the task, the system prompt, the model and both specs: editing the agent or the runtime later
does not change a run that has started. The run gets a ServiceAccount, a Role that may read
only its input, its agent and the agent's skill packs, a RoleBinding, and a Job built from the
snapshot (backoffLimit 0, restartPolicy Never, activeDeadlineSeconds = timeoutSeconds); all of
them are owned by the run, so deleting it deletes them.

The phase follows the Job, through the watch on owned Jobs (nothing polls): Pending until its
pod is ready, Running, then Succeeded or Failed as the Job's Complete or Failed condition
says. The pod's termination message becomes ``status.result``; a run from a chat channel
(``spec.trigger``) also gets ``status.reply``, what its channel posts back: the answer, or why
the run failed. A termination message ``{"result": ..., "memory": ...}`` is split: the result is
``status.result``, and the memory is added to the agent's (``memory``), once. A run that has not finished
``timeoutSeconds`` after it started is failed (reason TimedOut) by a requeue at that moment,
and its Job is deleted with its pods. A run whose agent does not exist yet, or whose runtime
is missing or disabled, waits in Pending with the reason in ``status.message``; the agent's
watch wakes it. A run whose input or Job the API server refuses (a snapshot over a ConfigMap's
1 MiB, an environment variable name a pod may not have) fails at once with reason Invalid and
the server's message.

Every object of the run's name is used only if the run controls it. An input ConfigMap, a
ServiceAccount, a Role, a RoleBinding, a Job or a Sandbox of that name that someone else made —
a tenant who may create ConfigMaps but not pods could otherwise plant ``<run>-input`` with an
image and a securityContext of their choosing, or have a run act as a ServiceAccount it does not
own — fails the run at once with reason NameConflict, naming the object. The snapshot is read
only from the ConfigMap the operator wrote.

Annotations under ``kubeloop.dev/`` of the agent (as the run started) and of the run (which win)
are given to its pod. The embedded server's
workload simulation reads them (``kubeloop.dev/outcome: Failed``, ``kubeloop.dev/duration``,
``kubeloop.dev/termination-message``), so a demo or a test can choose how a run ends.
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import Counter, Histogram

import kubeloop
from kubeloop import kinds

from ..api.v1alpha1 import GROUP, Agent, AgentPolicy, AgentRun, AgentSpec, ServingRuntimeSpec
from .builders import (
    AGENT_LABEL,
    CONFIG_DIR,
    AgentTools,
    agent_config,
    agent_pod,
    config_map_name,
    env_list,
    labels,
    named,
    resolve_runtime,
    resolve_tools,
    set_pod_extras,
    write_status,
)
from .indexes import AGENT_INDEX
from .memory import AgentMemory, memory_config_map, memory_server, memory_url
from .runreport import RunReport, cost_estimate
from .sandbox import UNAVAILABLE, SandboxBackend, sandbox_of

FINISHED = ("Succeeded", "Failed")


class NameConflict(Exception):
    """An object of the run's name that the run does not control: it is not used."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(
            f"{kind} {name} exists and is not this run's: the run does not use what it did not make "
            "(delete it, or give the run another name)"
        )


#: Why a run of an agent with persistent memory waits.
MEMORY_NOT_READY = "MemoryNotReady"
#: The run's annotations its pod is given (the simulation's steering annotations).
POD_ANNOTATION_PREFIX = "kubeloop.dev/"
#: The label of a Job's pods that names the Job.
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def reply_of(status: dict[str, Any]) -> str:
    """What a channel posts back when its run ended: the answer, or why there is none."""
    if status["phase"] == "Succeeded":
        return str(status.get("result") or "(the agent finished without an answer)")
    why = (
        f"{status.get('reason')}: {status.get('message')}"
        if status.get("message")
        else str(status.get("reason"))
    )
    return f"The run failed ({why})."


def input_config_map(run: str) -> str:
    return f"{run}-input"


class AgentRunReconciler:
    """Reconciles AgentRuns."""

    def __init__(self, manager: kubeloop.Manager, memory: AgentMemory) -> None:
        self.manager = manager
        self.memory = memory
        self.sandboxes = SandboxBackend(manager)
        self.client = manager.client
        registry = manager.metrics.registry
        self.runs = Counter(
            "agentplatform_runs_total",
            "Runs that reached each phase, by agent.",
            ["agent", "phase"],
            registry=registry,
        )
        self.durations = Histogram(
            "agentplatform_run_duration_seconds",
            "From a run's start to its end, by how it ended.",
            ["phase"],
            buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600),
            registry=registry,
        )
        #: Reads past the cache: a snapshot just created, a finished Job's pods.
        self.reader = manager.api_reader
        self.recorder = manager.event_recorder("agentrun")

    def setup(self) -> None:
        builder = kubeloop.Builder(self.manager).named("agentrun").for_(AgentRun)
        builder.owns(kinds.Job)
        builder.watches(Agent, kubeloop.handler.EnqueueRequestsFromMapFunc(self._waiting_runs))
        self.sandboxes.controller = builder.complete(self.reconcile)  # it watches Sandboxes once used
        # Beyond what the builder records: each run's access, and its pods' answers.
        permissions = self.manager.permissions
        for kind in (kinds.ServiceAccount, kinds.Role, kinds.RoleBinding):
            permissions.allow(kind, "create")
        permissions.allow(kinds.Pod, "list")

    async def _waiting_runs(self, agent: kubeloop.Obj) -> list[kubeloop.Request]:
        """The runs of ``agent`` that have not started (they wait for it or for its runtime)."""
        meta = agent["metadata"]
        runs = await self.client.list(
            AgentRun, namespace=meta["namespace"], field_selector=f"{AGENT_INDEX}={meta['name']}"
        )
        return [
            kubeloop.Request(run.metadata.namespace or "", run.metadata.name or "")
            for run in runs
            if run.status is None or run.status.start_time is None
        ]

    async def reconcile(self, request: kubeloop.Request) -> kubeloop.Result | None:
        try:
            run = await self.client.get(AgentRun, request.name, namespace=request.namespace)
        except kubeloop.errors.NotFound:
            return None  # what it owned goes with it
        current = run.status.to_dict() if run.status else {}
        if run.metadata.deletion_timestamp is not None or current.get("phase") in FINISHED:
            return None
        sandboxed = run.spec.backend == "sandbox"
        if sandboxed and not await self.sandboxes.served():
            await self._fail(run, {"phase": "Failed", "reason": "BackendUnavailable", "message": UNAVAILABLE})
            return None
        if sandboxed and current.get("startTime") and await self.sandboxes.sandbox(request.name, request.namespace) is None:
            # A run's Sandbox is released as it ends, and a cache a moment behind still shows the
            # run unfinished: a Sandbox made again would outlive the run. The server says which.
            try:
                live = await self.reader.get(AgentRun, request.name, namespace=request.namespace)
            except kubeloop.errors.NotFound:
                return None
            if live.metadata.deletion_timestamp is not None or (
                live.status is not None and live.status.phase in FINISHED
            ):
                return None
        try:
            snapshot, waiting = await self._snapshot(run)
            workload = await self._workload(run, snapshot) if snapshot is not None else None
        except kubeloop.errors.Invalid as refused:  # what the run makes cannot be made: it fails
            await self._fail(run, {"phase": "Failed", "reason": "Invalid", "message": str(refused)})
            return None
        except NameConflict as conflict:  # someone else's object of the run's name: never used
            await self._fail(run, {"phase": "Failed", "reason": "NameConflict", "message": str(conflict)})
            return None
        if snapshot is None:
            reason, _, said = (
                waiting.partition(": ") if waiting.startswith(MEMORY_NOT_READY) else ("Waiting", "", waiting)
            )
            pending = {"phase": "Pending", "reason": reason, "message": said}
            await self._write(run, current, pending)
            return None  # the agent's watch wakes it
        now = datetime.now(UTC)
        started = kubeloop.timestamps.parse_time(current.get("startTime")) or now
        status: dict[str, Any] = {
            "startTime": kubeloop.timestamps.format_time(started),
            "jobName": request.name,
        }
        if sandboxed:
            status.pop("jobName")
            status["sandboxName"] = request.name
            status.update(await self.sandboxes.phase(workload, _termination_message))
        else:
            status.update(await self._phase(workload))
        if status["phase"] in FINISHED:
            report = RunReport.parse(str(status.get("result") or ""))
            if status["phase"] == "Succeeded":
                status["result"], status["memory"] = report.result, report.memory
            elif report.reason:  # the runner says why it failed
                status.update(reason=report.reason, message=report.message)
                status.pop("result", None)
            if report.usage:
                status["usage"] = report.usage
                pricing = json.loads(snapshot["runtime.json"]).get("pricing")
                if (cost := cost_estimate(report.usage, pricing)) is not None:
                    status["costEstimate"] = cost
        remembered = status.pop("memory", None)
        if status["phase"] == "Succeeded" and remembered and current.get("phase") != "Succeeded":
            agent = AgentSpec.model_validate(json.loads(snapshot["agent.json"]))
            if agent.memory is not None and agent.memory.enabled and not agent.memory.read_only:
                await self.memory.remember(
                    request.namespace, run.spec.agent_ref, request.name, remembered, agent.memory.max_bytes
                )
        deadline = started + timedelta(seconds=run.spec.timeout_seconds)
        if status["phase"] not in FINISHED and now >= deadline:
            if sandboxed:
                await self.sandboxes.release(request.name, request.namespace)
            else:
                with contextlib.suppress(kubeloop.errors.NotFound):
                    await self.client.delete(
                        kinds.Job, request.name, namespace=request.namespace, propagation_policy="Background"
                    )
            status.update(phase="Failed", reason="TimedOut")
            status["message"] = f"the run did not finish within {run.spec.timeout_seconds}s"
        if status["phase"] in FINISHED and sandboxed:
            await self.sandboxes.release(request.name, request.namespace)  # its pod is done
        if status["phase"] in FINISHED:
            status["completionTime"] = current.get("completionTime") or kubeloop.timestamps.now()
            if run.spec.trigger is not None:
                status["reply"] = reply_of(status)
        await self._write(run, current, status)
        if status["phase"] in FINISHED:
            return None
        return kubeloop.Result(requeue_after=max(0.0, (deadline - now).total_seconds()))

    async def _fail(self, run: AgentRun, failed: dict[str, Any]) -> None:
        """End the run at once as ``failed`` says (what it needs cannot be had)."""
        failed["completionTime"] = kubeloop.timestamps.now()
        if run.spec.trigger is not None:
            failed["reply"] = reply_of(failed)
        await self._write(run, run.status.to_dict() if run.status else {}, failed)

    async def _write(self, run: AgentRun, current: dict[str, Any], status: dict[str, Any]) -> None:
        """Write ``status``; a new phase only onto the run as it was read (``current`` its
        status), and said (:meth:`_record`) once written: a reconcile on a cache that has not
        seen its own last write yet would otherwise count that phase twice."""
        if status["phase"] == current.get("phase"):
            await write_status(self.client, run, status)
        elif await write_status(self.client, run, status, if_unchanged=True):
            await self._record(run, status)

    async def _record(self, run: AgentRun, status: dict[str, Any]) -> None:
        """Say what a run's new phase is: an Event, and the metrics (labelled by its agent only
        when that agent exists: a run may name any agent, and labels must stay bounded)."""
        phase = status["phase"]
        self.runs.labels(await self._agent_label(run), phase).inc()
        started = kubeloop.timestamps.parse_time(status.get("startTime"))
        ended = kubeloop.timestamps.parse_time(status.get("completionTime"))
        if phase in FINISHED and started is not None and ended is not None:
            self.durations.labels(phase).observe(max(0.0, (ended - started).total_seconds()))
        if phase == "Running":
            workload = (
                f"Job {status['jobName']}" if "jobName" in status else f"Sandbox {status['sandboxName']}"
            )
            self.recorder.event(run, kubeloop.NORMAL, "Started", f"{workload} is running")
        elif phase == "Succeeded":
            self.recorder.event(run, kubeloop.NORMAL, "Succeeded", "the agent finished the task")
        elif phase == "Failed":
            self.recorder.event(run, kubeloop.WARNING, status["reason"], status.get("message", ""))

    async def _agent_label(self, run: AgentRun) -> str:
        """The run's agent as a metric label: "" when no Agent has that name (asked of the API
        server when the cache has none: its watch of Agents may lag behind the runs')."""
        key = f"{run.metadata.namespace}/{run.spec.agent_ref}"
        if self.manager.informer_for(Agent).store.get(key) is not None:
            return run.spec.agent_ref
        try:
            await self.manager.api_reader.get(Agent, run.spec.agent_ref, namespace=run.metadata.namespace)
        except kubeloop.errors.NotFound:
            return ""
        return run.spec.agent_ref

    async def _snapshot(self, run: AgentRun) -> tuple[dict[str, str] | None, str]:
        """The run's input ConfigMap's data, made from the agent and runtime when the run starts;
        None and why when it cannot start yet."""
        name, namespace = input_config_map(run.metadata.name or ""), run.metadata.namespace or ""
        with contextlib.suppress(kubeloop.errors.NotFound):
            found = await self.client.get(kinds.ConfigMap, name, namespace=namespace)
            return dict(self._controlled(run, found, "ConfigMap").get("data") or {}), ""
        try:
            agent = await self.client.get(Agent, run.spec.agent_ref, namespace=namespace)
        except kubeloop.errors.NotFound:
            return None, f"Agent {run.spec.agent_ref} does not exist"
        runtime, _, why = await resolve_runtime(self.client, agent.spec.runtime_ref)
        if runtime is None:
            return None, why
        memory = agent.spec.memory
        persistent = memory is not None and memory.enabled and memory.persistent
        if persistent and not (agent.status and agent.status.memory_ready):
            server = memory_server(agent.metadata.name or "")
            return None, f"{MEMORY_NOT_READY}: the memory server {server} is not ready"
        tools = await resolve_tools(self.client, namespace, agent.spec)
        # From the server, not the cache: a policy is a limit, and one made a moment before the
        # run, not yet in the cache, would be missed for the run's whole life.
        policies = (await self.reader.list(AgentPolicy, namespace=namespace)).items
        limits = {
            "maxTurns": _smallest(run.spec.max_turns, agent.spec.max_turns, *(p.spec.max_turns for p in policies)),
            "maxTokens": _smallest(run.spec.max_tokens, agent.spec.max_tokens, *(p.spec.max_tokens for p in policies)),
        }
        data = {
            **agent_config(agent.spec),
            "task": run.spec.task,
            "agent.json": json.dumps(agent.spec.to_dict(), sort_keys=True),
            "runtime.json": json.dumps(runtime.spec.to_dict(), sort_keys=True),
            **tools.snapshot(),
            "pod-annotations.json": json.dumps(_steering(agent.metadata.annotations), sort_keys=True),
            # The run's limits as they stood at its start: the smallest of its own, its agent's
            # and its namespace's AgentPolicies'.
            "limits.json": json.dumps({k: v for k, v in limits.items() if v is not None}, sort_keys=True),
        }
        config = named(kinds.ConfigMap, name, namespace)
        config["metadata"]["labels"] = labels("agentrun", run.metadata.name or "")
        config["data"] = data
        kubeloop.set_controller_reference(run, config)
        try:
            await self.client.create(config)
        except kubeloop.errors.AlreadyExists:  # an earlier pass's, the cache has not shown yet; or not ours
            found = await self.reader.get(kinds.ConfigMap, name, namespace=namespace)
            return dict(self._controlled(run, found, "ConfigMap").get("data") or {}), ""
        return data, ""

    async def _workload(self, run: AgentRun, snapshot: dict[str, str]) -> kubeloop.Obj | None:
        """The run's Job (or Sandbox), created (after what it needs) if it does not exist; None
        until the cache shows one just created."""
        name, namespace = run.metadata.name or "", run.metadata.namespace or ""
        if run.spec.backend == "sandbox":
            found = await self.sandboxes.sandbox(name, namespace)
            if found is not None:
                return self._controlled(run, found, "Sandbox")
            template = self._pod_template(run, snapshot)
            workload = sandbox_of(name, namespace, template["metadata"]["labels"], template)
        else:
            with contextlib.suppress(kubeloop.errors.NotFound):
                return self._controlled(
                    run, await self.client.get(kinds.Job, name, namespace=namespace), "Job"
                )
            workload = self._job_of(run, snapshot)
        access = self._access(run, snapshot)
        for obj in access:  # what the pod acts as, checked before a pod can act as it
            await self._create_or_check(run, obj)
        await self._create_or_check(run, workload)
        return None

    async def _create_or_check(self, run: AgentRun, obj: kubeloop.Obj) -> None:
        """Create ``obj`` for ``run``; one already there must be the run's (an earlier pass's)."""
        kubeloop.set_controller_reference(run, obj)
        try:
            await self.client.create(obj)
        except kubeloop.errors.AlreadyExists:
            meta = obj["metadata"]
            found = await self.reader.get(obj, meta["name"], namespace=meta["namespace"])
            self._controlled(run, found, str(obj["kind"]))

    @staticmethod
    def _controlled(run: AgentRun, obj: kubeloop.Obj, kind: str) -> kubeloop.Obj:
        """``obj`` (a ``kind``) if ``run`` is its controller; NameConflict if it is someone else's."""
        if not kubeloop.is_controlled_by(obj, run):
            raise NameConflict(kind, str(obj["metadata"]["name"]))
        return obj

    def _access(self, run: AgentRun, snapshot: dict[str, str]) -> list[kubeloop.Obj]:
        """A ServiceAccount of the run's name, a Role that may read the run's input, its agent and
        its skill packs, and the RoleBinding between them."""
        name, namespace = run.metadata.name or "", run.metadata.namespace or ""
        config_maps = [input_config_map(name)] + [
            config_map_name(pack) for pack in snapshot.get("skill-packs", "").split(",") if pack
        ]
        account = named(kinds.ServiceAccount, name, namespace)
        role = named(kinds.Role, name, namespace)
        role["rules"] = [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": config_maps},
            {
                "apiGroups": [GROUP],
                "resources": ["agents"],
                "verbs": ["get"],
                "resourceNames": [run.spec.agent_ref],
            },
            {"apiGroups": [GROUP], "resources": ["agentruns"], "verbs": ["get"], "resourceNames": [name]},
        ]
        binding = named(kinds.RoleBinding, name, namespace)
        binding["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
        binding["subjects"] = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
        for obj in (account, role, binding):
            obj["metadata"]["labels"] = labels("agentrun", name)
        return [account, role, binding]

    def _job_of(self, run: AgentRun, snapshot: dict[str, str]) -> kubeloop.Obj:
        name, namespace = run.metadata.name or "", run.metadata.namespace or ""
        template = self._pod_template(run, snapshot)
        job = named(kinds.Job, name, namespace)
        job["metadata"]["labels"] = template["metadata"]["labels"]
        job["spec"] = {
            "backoffLimit": 0,
            "activeDeadlineSeconds": run.spec.timeout_seconds,
            "ttlSecondsAfterFinished": run.spec.ttl_seconds_after_finished,
            "template": template,
        }
        return job

    def _pod_template(self, run: AgentRun, snapshot: dict[str, str]) -> dict[str, Any]:
        """The pod that does the run (in a Job or a Sandbox), built from the snapshot."""
        name = run.metadata.name or ""
        agent = AgentSpec.model_validate(json.loads(snapshot["agent.json"]))
        runtime = ServingRuntimeSpec.model_validate(json.loads(snapshot["runtime.json"]))
        container, volumes = agent_pod(
            run.spec.agent_ref,
            agent,
            runtime,
            config_map=input_config_map(name),
            tools=AgentTools.from_snapshot(snapshot),
            env=_run_env(run, json.loads(snapshot.get("limits.json") or "{}")),
            memory=memory_config_map(run.spec.agent_ref) if agent.memory and agent.memory.enabled else None,
        )
        if agent.memory and agent.memory.enabled and agent.memory.persistent:
            container["env"] = env_list(
                container["env"],
                [
                    {
                        "name": "MEMORY_URL",
                        "value": memory_url(run.spec.agent_ref, run.metadata.namespace or ""),
                    }
                ],
            )
        container.pop("ports")
        container = {key: value for key, value in container.items() if value is not None}
        container["terminationMessagePolicy"] = "FallbackToLogsOnError"
        pod_labels = {**labels("agentrun", name), AGENT_LABEL: run.spec.agent_ref}  # its agent's NetworkPolicy
        annotations = {  # the agent's (from the snapshot), then the run's own
            **json.loads(snapshot.get("pod-annotations.json") or "{}"),
            **_steering(run.metadata.annotations),
        }
        pod: dict[str, Any] = {
            "restartPolicy": "Never",
            "serviceAccountName": name,
            "containers": [container],
            "volumes": volumes,
        }
        set_pod_extras(pod, runtime)
        return {"metadata": {"labels": pod_labels, "annotations": annotations}, "spec": pod}

    async def _phase(self, job: kubeloop.Obj | None) -> dict[str, Any]:
        """Phase, reason, message and result, as the Job says."""
        if job is None:
            return {"phase": "Pending", "reason": "JobCreated", "message": "waiting for the Job's pod"}
        status = job.get("status") or {}
        for condition in status.get("conditions") or ():
            if condition.get("status") != "True":
                continue
            if condition.get("type") == "Complete":
                return {
                    "phase": "Succeeded",
                    "reason": "Completed",
                    "message": "",
                    "result": await self._result(job),
                }
            if condition.get("type") == "Failed":
                reason = "TimedOut" if condition.get("reason") == "DeadlineExceeded" else "JobFailed"
                failed: dict[str, Any] = {"phase": "Failed", "reason": reason}
                failed["message"] = str(condition.get("message") or "")
                result = await self._result(job)
                if result:
                    failed["result"] = result
                return failed
        if int(status.get("ready") or 0) > 0:
            return {"phase": "Running", "reason": "PodRunning", "message": ""}
        return {"phase": "Pending", "reason": "PodStarting", "message": "waiting for the Job's pod"}

    async def _result(self, job: kubeloop.Obj) -> str:
        """The termination message of the Job's latest finished pod."""
        meta = job["metadata"]
        pods = await self.reader.list(
            kinds.Pod, namespace=meta["namespace"], label_selector=f"{JOB_NAME_LABEL}={meta['name']}"
        )
        return _termination_message(*pods.items)


def _run_env(run: AgentRun, limits: dict[str, int]) -> list[dict[str, str]]:
    """What the runner learns of its run: its name, its task's file, its limits (``limits``:
    the snapshot's; a snapshot from before it had them: the run's own)."""
    env = [
        {"name": "AGENT_RUN", "value": run.metadata.name or ""},
        {"name": "TASK_FILE", "value": f"{CONFIG_DIR}/task"},
        {"name": "RUN_TIMEOUT_SECONDS", "value": str(run.spec.timeout_seconds)},
    ]
    turns = limits.get("maxTurns", run.spec.max_turns)
    tokens = limits.get("maxTokens", run.spec.max_tokens)
    if turns is not None:
        env.append({"name": "AGENT_MAX_TURNS", "value": str(turns)})
    if tokens is not None:
        env.append({"name": "AGENT_MAX_TOKENS", "value": str(tokens)})
    return env


def _smallest(*limits: int | None) -> int | None:
    given = [limit for limit in limits if limit is not None]
    return min(given) if given else None


def _steering(annotations: dict[str, str] | None) -> dict[str, str]:
    """The annotations under ``kubeloop.dev/`` (the simulation's: duration, outcome, answer)."""
    return {key: value for key, value in (annotations or {}).items() if key.startswith(POD_ANNOTATION_PREFIX)}


def _termination_message(*pods: kubeloop.Obj) -> str:
    """The termination message of the latest container to end among ``pods``."""
    messages = []
    for pod in pods:
        for container in (pod.get("status") or {}).get("containerStatuses") or ():
            terminated = (container.get("state") or {}).get("terminated") or {}
            if terminated:
                messages.append(
                    (str(terminated.get("finishedAt") or ""), str(terminated.get("message") or ""))
                )
    return max(messages)[1] if messages else ""


def setup(manager: kubeloop.Manager, memory: AgentMemory) -> AgentRunReconciler:
    reconciler = AgentRunReconciler(manager, memory)
    reconciler.setup()
    return reconciler
