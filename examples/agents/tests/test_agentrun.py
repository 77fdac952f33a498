"""AgentRuns end to end on the simulating server: a run snapshots its agent, gets its own
ServiceAccount, Role and RoleBinding and a Job, and succeeds with its pod's termination message,
fails, or times out (its pod stopped); a run waits for an agent that does not exist yet; a
finished run's reconcile writes nothing; what the server refuses fails a run and marks an agent
Invalid, without a retry loop; the metrics endpoint counts runs by phase and times them."""

from __future__ import annotations

import json
from typing import Any

import agentplatform
import aiohttp
import pytest
from agentobjects import (
    NoPoliciesCached,
    agent,
    agent_run,
    assert_writes_nothing,
    condition,
    exists,
    finished,
    runtime,
)
from agentplatform.api.v1alpha1 import Agent, AgentRun
from agentplatform.controllers.builders import write_status

import kubeloop
from kubeloop import kinds
from kubeloop.testing import eventually


async def test_a_run_snapshots_its_agent_and_succeeds_with_the_pods_answer(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    rt = f"{namespace}-rt"
    await client.create(runtime(rt))
    await client.create(agent("helper", namespace, rt, skillPackRefs=["k8s"]))
    await client.create(
        {
            "apiVersion": "agents.kubeloop.dev/v1alpha1",
            "kind": "SkillPack",
            "metadata": {"name": "k8s", "namespace": namespace},
            "spec": {"skills": [{"name": "debug", "text": "Read the events first."}]},
        }
    )
    await eventually(lambda: client.get(kinds.ConfigMap, "skillpack-k8s", namespace=namespace))
    answer = {"kubeloop.dev/termination-message": "3 nodes, all Ready", "kubeloop.dev/duration": "0.5"}
    await client.create(agent_run("ask", namespace, "helper", annotations=answer))

    async def running() -> None:
        found = await client.get(AgentRun, "ask", namespace=namespace)
        assert found.status is not None and found.status.phase in ("Running", "Succeeded")

    await eventually(running, timeout=20)
    # The agent changes after the run started: the run keeps what it started with.
    await client.patch(Agent, "helper", {"spec": {"systemPrompt": "changed"}}, namespace=namespace)
    run = await finished(client, "ask", namespace)
    assert run.status is not None
    assert (run.status.phase, run.status.reason, run.status.result) == (
        "Succeeded",
        "Completed",
        "3 nodes, all Ready",
    )
    assert run.status.start_time and run.status.completion_time and run.status.job_name == "ask"

    snapshot = await client.get(kinds.ConfigMap, "ask-input", namespace=namespace)
    assert snapshot["data"]["task"] == "summarise the cluster"
    assert snapshot["data"]["system-prompt"] == "You answer questions about Kubernetes."
    assert snapshot["data"]["skill-packs"] == "k8s"
    job = await client.get(kinds.Job, "ask", namespace=namespace)
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] == 600
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["serviceAccountName"] == "ask"
    env = {var["name"]: var.get("value") for var in pod["containers"][0]["env"]}
    assert env["TASK_FILE"] == "/etc/agent/task" and env["AGENT_RUN"] == "ask"
    role = await client.get(kinds.Role, "ask", namespace=namespace)
    assert role["rules"][0]["resourceNames"] == ["ask-input", "skillpack-k8s"]
    binding = await client.get(kinds.RoleBinding, "ask", namespace=namespace)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "ask", "namespace": namespace}]
    await client.get(kinds.ServiceAccount, "ask", namespace=namespace)
    for owned in (snapshot, job, role, binding):
        assert owned["metadata"]["ownerReferences"][0]["kind"] == "AgentRun"

    # The run's ServiceAccount, used for real: its token reads exactly the run's input, its
    # agent, its packs and the run itself, and is refused everything else, as upstream words it.
    token = await client.create(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        of=kinds.ServiceAccount,
        name="ask",
        namespace=namespace,
        subresource="token",
    )
    await client.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "not-yours", "namespace": namespace}}
    )
    as_run = kubeloop.APIClient(client.config.with_token(token["status"]["token"]))
    user = f"system:serviceaccount:{namespace}:ask"
    async with as_run:
        for name in ("ask-input", "skillpack-k8s"):
            await as_run.get(kinds.ConfigMap, name, namespace=namespace)
        await as_run.get(Agent, "helper", namespace=namespace)
        await as_run.get(AgentRun, "ask", namespace=namespace)
        refused = [
            (as_run.get(kinds.ConfigMap, "not-yours", namespace=namespace),
             f'configmaps "not-yours" is forbidden: User "{user}" cannot get resource "configmaps" in API group "" in the namespace "{namespace}"'),
            (as_run.list(kinds.ConfigMap, namespace=namespace),
             f'configmaps is forbidden: User "{user}" cannot list resource "configmaps" in API group "" in the namespace "{namespace}"'),
            (as_run.get(kinds.Secret, "llm", namespace=namespace),
             f'secrets "llm" is forbidden: User "{user}" cannot get resource "secrets" in API group "" in the namespace "{namespace}"'),
            (as_run.list(AgentRun, namespace=namespace),
             f'agentruns.agents.kubeloop.dev is forbidden: User "{user}" cannot list resource "agentruns" in API group "agents.kubeloop.dev" in the namespace "{namespace}"'),
            (as_run.patch(AgentRun, "ask", {"metadata": {"labels": {"x": "y"}}}, namespace=namespace),
             f'agentruns.agents.kubeloop.dev "ask" is forbidden: User "{user}" cannot patch resource "agentruns" in API group "agents.kubeloop.dev" in the namespace "{namespace}"'),
            (as_run.delete(kinds.ConfigMap, "ask-input", namespace=namespace),
             f'configmaps "ask-input" is forbidden: User "{user}" cannot delete resource "configmaps" in API group "" in the namespace "{namespace}"'),
        ]  # fmt: skip
        for call, message in refused:
            with pytest.raises(kubeloop.errors.Forbidden) as forbidden:
                await call
            assert forbidden.value.message == message

    # Finished: another pass writes nothing.
    await assert_writes_nothing(platform.runs, kubeloop.Request(namespace, "ask"))


async def test_a_run_fails_with_its_pods_message(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("helper", namespace, f"{namespace}-rt"))
    outcome = {"kubeloop.dev/outcome": "Failed", "kubeloop.dev/termination-message": "model quota exceeded"}
    await client.create(agent_run("doomed", namespace, "helper", annotations=outcome))
    run = await finished(client, "doomed", namespace)
    assert run.status is not None
    assert (run.status.phase, run.status.reason, run.status.result) == (
        "Failed",
        "JobFailed",
        "model quota exceeded",
    )

    async def said() -> None:  # events are written after the status, by the recorder's own task
        events = await client.list(kinds.Event, namespace=namespace)
        assert any(e["reason"] == "JobFailed" and e["involvedObject"]["name"] == "doomed" for e in events.items)

    await eventually(said, timeout=20)


async def test_a_run_past_its_timeout_fails_and_its_pod_is_stopped(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("helper", namespace, f"{namespace}-rt"))
    slow = {"kubeloop.dev/duration": "60"}
    await client.create(agent_run("slow", namespace, "helper", timeoutSeconds=1, annotations=slow))
    run = await finished(client, "slow", namespace)
    assert run.status is not None
    assert (run.status.phase, run.status.reason) == ("Failed", "TimedOut")

    async def stopped() -> None:
        pods = await client.list(
            kinds.Pod, namespace=namespace, label_selector="batch.kubernetes.io/job-name=slow"
        )
        assert [p for p in pods.items if p["status"].get("phase") == "Running"] == []

    await eventually(stopped, timeout=20)


async def test_a_run_waits_for_its_agent(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    await client.create(agent_run("early", namespace, "later"))

    async def waiting() -> None:
        found = await client.get(AgentRun, "early", namespace=namespace)
        assert found.status is not None
        assert (found.status.phase, found.status.message) == ("Pending", "Agent later does not exist")

    await eventually(waiting, timeout=20)
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("later", namespace, f"{namespace}-rt"))
    run = await finished(client, "early", namespace)
    assert run.status is not None and run.status.phase == "Succeeded"


async def test_what_the_server_refuses_fails_the_run_and_marks_the_agent(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    """An agent whose system prompt is over a ConfigMap's 1 MiB cannot get its config: Ready is
    False with reason Invalid and the server's message, once, with no retry loop; a run whose
    snapshot (prompt, agent spec and task) is over it fails at once the same way."""
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("verbose", namespace, f"{namespace}-rt", systemPrompt="x" * 1_100_000))

    async def refused() -> Agent:
        found = await client.get(Agent, "verbose", namespace=namespace)
        assert condition(found, "Ready") == ("False", "Invalid"), found.status
        return found

    found = await eventually(refused, timeout=20)
    ready = next(c for c in found.status.conditions or () if c.type == "Ready")  # type: ignore[union-attr]
    assert 'ConfigMap "verbose-config" is invalid' in ready.message
    assert "may not be more than 1048576 bytes" in ready.message
    assert not await exists(client, kinds.Deployment, "verbose", namespace)
    errors_before = platform.agents.manager.controllers["agent"].results.get("error", 0)
    await assert_writes_nothing(platform.agents, kubeloop.Request(namespace, "verbose"))
    assert platform.agents.manager.controllers["agent"].results.get("error", 0) == errors_before

    async def warned() -> list[dict[str, Any]]:  # written by the recorder's own task
        warnings = [
            e
            for e in (await client.list(kinds.Event, namespace=namespace)).items
            if e["reason"] == "Invalid" and e["involvedObject"]["name"] == "verbose"
        ]
        assert warnings
        return warnings

    warnings = await eventually(warned, timeout=20)
    assert len(warnings) == 1 and warnings[0]["count"] == 1

    await client.create(agent("chatty", namespace, f"{namespace}-rt", systemPrompt="y" * 400_000))
    await client.create(agent_run("long-task", namespace, "chatty", task="z" * 300_000))
    run = await finished(client, "long-task", namespace)
    assert run.status is not None and (run.status.phase, run.status.reason) == ("Failed", "Invalid")
    assert 'ConfigMap "long-task-input" is invalid' in (run.status.message or "")
    assert not await exists(client, kinds.Job, "long-task", namespace)


async def test_runs_are_counted_by_phase_and_timed_on_the_metrics_endpoint(
    client: kubeloop.APIClient, namespace: str
) -> None:
    # Its own namespace only: the shared server holds other tests' runs, which would be timed too.
    manager = kubeloop.Manager(client, metrics_bind_address="127.0.0.1:0", namespace=namespace)
    agentplatform.setup(manager)
    async with manager:
        await client.create(runtime(f"{namespace}-rt"))
        await client.create(agent("counted", namespace, f"{namespace}-rt"))
        await client.create(agent_run("good", namespace, "counted"))
        await client.create(
            agent_run("bad", namespace, "counted", annotations={"kubeloop.dev/outcome": "Failed"})
        )
        await finished(client, "good", namespace)
        await finished(client, "bad", namespace)

        async def scraped() -> None:
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://{manager.metrics_address}/metrics") as answer,
            ):
                text = await answer.text()
            counted = 'agentplatform_runs_total{{agent="counted",phase="{}"}} {}'
            for phase, runs in (("Pending", "2.0"), ("Succeeded", "1.0"), ("Failed", "1.0")):
                assert counted.format(phase, runs) in text, phase
            assert 'agentplatform_run_duration_seconds_count{phase="Succeeded"} 1.0' in text
            assert 'agentplatform_run_duration_seconds_count{phase="Failed"} 1.0' in text

        await eventually(scraped)


async def test_a_new_phase_is_written_only_onto_the_run_as_it_was_read(
    client: kubeloop.APIClient, namespace: str
) -> None:
    """A phase is counted once written (``write_status(..., if_unchanged=True)``): written onto a
    run read before its last change, the patch is refused as a Conflict and changes nothing (a
    reconcile on a cache behind its own writes would count the phase again)."""
    await client.create(agent_run("stale", namespace, "nobody"))
    read = await client.get(AgentRun, "stale", namespace=namespace)
    assert await write_status(client, read, {"phase": "Pending", "reason": "Waiting"}, if_unchanged=True)
    with pytest.raises(kubeloop.errors.Conflict):
        await write_status(client, read, {"phase": "Running"}, if_unchanged=True)
    now = await client.get(AgentRun, "stale", namespace=namespace)
    assert now.status is not None and now.status.phase == "Pending"
    assert await write_status(client, now, {"phase": "Running"}, if_unchanged=True)


@pytest.mark.parametrize(
    ("job_condition", "reason"),
    [
        ({"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
          "message": "Job was active longer than specified deadline"}, "TimedOut"),
        ({"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
          "message": "Job has reached the specified backoff limit"}, "JobFailed"),
        ({"type": "Failed", "status": "True", "reason": "PodFailurePolicy",
          "message": "Container main for pod x failed with exit code 2"}, "JobFailed"),
        ({"type": "Complete", "status": "True"}, "Completed"),
        ({"type": "Failed", "status": "False", "reason": "DeadlineExceeded"}, "PodStarting"),
    ],
)  # fmt: skip
async def test_each_way_a_job_ends_is_the_runs_reason(
    platform: agentplatform.Platform, namespace: str, job_condition: dict[str, str], reason: str
) -> None:
    """The Job's Failed condition says why: past its deadline is TimedOut, every other failure
    JobFailed, with the Job's message; a condition that is not True is not an outcome."""
    job = {"metadata": {"name": "run-job", "namespace": namespace}, "status": {"conditions": [job_condition]}}
    phase = await platform.runs._phase(job)
    assert phase["reason"] == reason
    if job_condition["type"] == "Failed" and job_condition["status"] == "True":
        assert (phase["phase"], phase["message"]) == ("Failed", job_condition["message"])


async def test_a_runs_limits_are_the_smallest_of_its_own_its_agents_and_its_policies(
    client: kubeloop.APIClient, platform: agentplatform.Platform, namespace: str
) -> None:
    """maxTurns and maxTokens: a run's own, its agent's and every AgentPolicy's of its namespace,
    the smallest winning, recorded in its snapshot and given to its pod."""
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("bounded", namespace, f"{namespace}-rt", maxTurns=5, maxTokens=900))
    for name, spec in (("loose", {"maxTurns": 8}), ("tight", {"maxTurns": 3, "maxTokens": 2000})):
        await client.create({"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "AgentPolicy",
                             "metadata": {"name": name, "namespace": namespace}, "spec": spec})  # fmt: skip
    await client.create(agent_run("capped", namespace, "bounded", maxTurns=4))
    await client.create(agent_run("own", namespace, "bounded", maxTokens=100))

    async def limits_of(run: str) -> tuple[dict[str, int], dict[str, str]]:
        job = await client.get(kinds.Job, run, namespace=namespace)
        env = {var["name"]: var.get("value") for var in job["spec"]["template"]["spec"]["containers"][0]["env"]}
        snapshot = await client.get(kinds.ConfigMap, f"{run}-input", namespace=namespace)
        return json.loads(snapshot["data"]["limits.json"]), env

    snapshot, env = await eventually(lambda: limits_of("capped"), timeout=20)
    assert snapshot == {"maxTurns": 3, "maxTokens": 900}  # the tight policy's turns, the agent's tokens
    assert (env["AGENT_MAX_TURNS"], env["AGENT_MAX_TOKENS"]) == ("3", "900")
    snapshot, env = await eventually(lambda: limits_of("own"), timeout=20)
    assert snapshot == {"maxTurns": 3, "maxTokens": 100}  # its own tokens
    assert (env["AGENT_MAX_TURNS"], env["AGENT_MAX_TOKENS"]) == ("3", "100")
    # A policy made a moment before a run is applied even where the cache has not shown it yet
    # (seen once in a full run: the run got the loose limit): the snapshot's policies come from
    # the server. A run of the namespace the manager never sees, snapshotted with a client
    # whose cache shows no policy at all.
    ghost_run = agent_run("ghost", namespace, "bounded", maxTurns=4)
    ghost_run["metadata"]["uid"] = "0000-ghost"  # never stored: its snapshot's owner, collected later
    ghost = AgentRun.model_validate(ghost_run)
    runs = platform.runs
    cached = runs.client
    runs.client = NoPoliciesCached(cached)  # type: ignore[assignment]
    try:
        data, why = await runs._snapshot(ghost)
    finally:
        runs.client = cached
    assert data is not None, why
    assert json.loads(data["limits.json"]) == {"maxTurns": 3, "maxTokens": 900}
    # The agent's endpoint gets the agent's own limits (its controller makes it meanwhile).
    deployment = await eventually(lambda: client.get(kinds.Deployment, "bounded", namespace=namespace), timeout=20)
    env = {var["name"]: var.get("value") for var in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (env["AGENT_MAX_TURNS"], env["AGENT_MAX_TOKENS"]) == ("5", "900")
