"""Sandboxed runs (``spec.backend: sandbox``) on a simulating server of their own: without
kubernetes-sigs/agent-sandbox a sandboxed run fails at once saying what to install, while the
same operator keeps running Jobs; once the Sandbox CRD is installed (the operator still running)
a sandboxed run makes a Sandbox holding the Job's pod, follows it to Running and Succeeded with
the pod's answer, and releases it. agent-sandbox is examples/agent_sandbox: upstream's Sandbox
CRD and controller, written in kubeloop, started in a manager of its own."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import agentplatform
import pytest
from agentobjects import FAST, agent, agent_run, finished, runtime
from agentplatform.api.v1alpha1 import AgentRun
from agentplatform.controllers.sandbox import SANDBOX

import kubeloop
from kubeloop import kinds
from kubeloop.manager.operatortarget import load_target, module_crds
from kubeloop.testing import ServerThread, eventually, start_server

#: agent-sandbox: its CRD and its Sandbox controller (examples/agent_sandbox, the controller in
#: kubeloop), installed and started while the platform runs.
AGENT_SANDBOX, _ = load_target(str(pathlib.Path(__file__).parents[2] / "agent_sandbox"))


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[ServerThread]:
    """A server of this module's: the Sandbox CRD it installs must not reach other tests."""
    server = start_server(simulate=True, simulation=FAST)
    yield server
    server.stop()


@pytest.fixture
async def api(own_cluster: ServerThread) -> AsyncIterator[kubeloop.APIClient]:
    async with kubeloop.APIClient(kubeloop.load_config(own_cluster.kubeconfig)) as client:
        await kubeloop.crd.install_crds(client, *agentplatform.CUSTOM_RESOURCES)
        yield client


class _RunsAsOf:
    """A client whose reads of AgentRuns answer ``run`` (a cache behind the server), the rest
    passed on."""

    def __init__(self, client: Any, run: AgentRun) -> None:
        self._client, self._run = client, run

    async def get(self, kind: Any, name: str, **options: Any) -> Any:
        if kind is AgentRun:
            return self._run
        return await self._client.get(kind, name, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


async def test_sandboxed_runs_without_and_with_agent_sandbox(api: kubeloop.APIClient) -> None:
    namespace = "sandboxed"
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    await api.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "llm", "namespace": namespace},
                      "stringData": {"token": "t"}})  # fmt: skip
    await api.create(runtime("sandbox-rt"))
    await api.create(agent("coder", namespace, "sandbox-rt"))
    manager = kubeloop.Manager(api)
    platform = agentplatform.setup(manager)
    async with manager:
        await api.create(agent_run("early", namespace, "coder", backend="sandbox"))
        early = await finished(api, "early", namespace)
        assert early.status is not None and (early.status.phase, early.status.reason) == (
            "Failed",
            "BackendUnavailable",
        )
        assert early.status.message == (
            "this cluster does not serve Sandbox (agents.x-k8s.io/v1alpha1): install "
            "kubernetes-sigs/agent-sandbox (its CRDs and controller), or run with backend: job"
        )
        await api.create(agent_run("as-job", namespace, "coder"))
        job_run = await finished(api, "as-job", namespace)
        assert job_run.status is not None and job_run.status.phase == "Succeeded"  # Jobs run as ever

        await kubeloop.crd.install_crds(api, *module_crds(AGENT_SANDBOX))
        agent_sandbox = kubeloop.Manager(api)  # its own Deployment on a cluster
        AGENT_SANDBOX.setup(agent_sandbox)
        await agent_sandbox.start()
        annotations = {
            "kubeloop.dev/termination-message": "done in the sandbox",
            "kubeloop.dev/duration": "0.5",
        }
        # The Sandbox as first made: a run of half a second may release it before a read.
        since = (await api.list(SANDBOX, namespace=namespace)).resource_version

        async def first_sandbox() -> dict[str, Any]:
            async for event in api.watch(SANDBOX, namespace=namespace, resource_version=since):
                if event.type == "ADDED" and event.object["metadata"]["name"] == "isolated":
                    return event.object
            raise AssertionError("the watch of Sandboxes ended")

        made = asyncio.create_task(first_sandbox())
        await api.create(
            agent_run("isolated", namespace, "coder", backend="sandbox", annotations=annotations)
        )
        try:

            async def running() -> None:
                found = await api.get(AgentRun, "isolated", namespace=namespace)
                assert found.status is not None and (found.status.phase, found.status.reason) in (
                    ("Running", "SandboxReady"), ("Succeeded", "Completed"),
                ), found.status  # fmt: skip

            await eventually(running, timeout=20)
            sandbox = await made
            pod = sandbox["spec"]["podTemplate"]["spec"]
            assert pod["serviceAccountName"] == "isolated" and pod["restartPolicy"] == "Never"
            assert pod["containers"][0]["image"] == "ghcr.io/example/agent:1"
            (owner,) = sandbox["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"], owner["controller"]) == ("AgentRun", "isolated", True)
            assert not [
                j
                for j in await api.list(kinds.Job, namespace=namespace)
                if j["metadata"]["name"] == "isolated"
            ]

            run = await finished(api, "isolated", namespace)
            assert run.status is not None
            assert (run.status.phase, run.status.result, run.status.sandbox_name) == (
                "Succeeded", "done in the sandbox", "isolated",
            )  # fmt: skip

            async def released() -> None:
                sandboxes = await api.list(SANDBOX, namespace=namespace)
                assert not sandboxes.items

            await eventually(released)
            # A reconcile whose cache is a moment behind (the run still Running there, its
            # Sandbox already released) makes no Sandbox again: seen once in a full run, where
            # the Sandbox made again outlived the run.
            behind = run.model_copy(deep=True)
            assert behind.status is not None
            behind.status.phase, behind.status.reason, behind.status.completion_time = "Running", "SandboxReady", None
            reconciler = platform.runs
            cached = reconciler.client
            reconciler.client = _RunsAsOf(cached, behind)  # type: ignore[assignment]
            try:
                assert await reconciler.reconcile(kubeloop.Request(namespace, "isolated")) is None
            finally:
                reconciler.client = cached
            await released()
            finished_run = await api.get(AgentRun, "isolated", namespace=namespace)
            assert finished_run.status is not None and finished_run.status.phase == "Succeeded"
        finally:
            made.cancel()  # done already, unless the test failed before the Sandbox came
            with contextlib.suppress(asyncio.CancelledError):
                await made
            await agent_sandbox.stop()
