"""Sandboxed runs (``spec.backend: sandbox``) on a simulating server of their own: without
kubernetes-sigs/agent-sandbox a sandboxed run fails at once saying what to install, while the
same operator keeps running Jobs; once the Sandbox CRD is installed (the operator still running)
a sandboxed run makes a Sandbox holding the Job's pod, follows it to Running and Succeeded with
the pod's answer, and releases it. The test plays the agent-sandbox controller's part: the pod
named after the Sandbox, from its podTemplate, and the Ready condition mirroring the pod's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import agentplatform
import pytest
from agentobjects import FAST, agent, agent_run, finished, runtime
from agentplatform.api.v1alpha1 import AgentRun
from agentplatform.controllers.sandbox import SANDBOX

import kubeloop
from kubeloop import kinds
from kubeloop.testing import ServerThread, eventually, start_server

#: The Sandbox CRD's shape, written from agent-sandbox's API reference (docs/api.md, v1alpha1):
#: its names, scope and subresource as upstream's; the pod template's spec left open.
SANDBOX_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "sandboxes.agents.x-k8s.io"},
    "spec": {
        "group": "agents.x-k8s.io",
        "scope": "Namespaced",
        "names": {"kind": "Sandbox", "listKind": "SandboxList", "plural": "sandboxes", "singular": "sandbox",
                  "shortNames": ["sandbox"]},
        "versions": [{
            "name": "v1alpha1", "served": True, "storage": True, "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "required": ["podTemplate"], "properties": {
                    "podTemplate": {"type": "object", "required": ["spec"], "properties": {
                        "metadata": {"type": "object", "properties": {
                            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                            "annotations": {"type": "object", "additionalProperties": {"type": "string"}}}},
                        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
                    "replicas": {"type": "integer", "minimum": 0, "maximum": 1, "default": 1},
                    "shutdownTime": {"type": "string", "format": "date-time"},
                    "shutdownPolicy": {"type": "string", "enum": ["Delete", "Retain"], "default": "Retain"},
                    "service": {"type": "boolean"}}},
                "status": {"type": "object", "properties": {
                    "conditions": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    "replicas": {"type": "integer"}, "selector": {"type": "string"},
                    "serviceFQDN": {"type": "string"}, "service": {"type": "string"},
                    "podIPs": {"type": "array", "items": {"type": "string"}}}}}}},
        }],
    },
}  # fmt: skip


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


async def play_the_sandbox_controller(client: kubeloop.APIClient, name: str, namespace: str) -> None:
    """What agent-sandbox's controller does for one Sandbox: its pod, and Ready as the pod's."""
    sandbox = await eventually(lambda: client.get(SANDBOX, name, namespace=namespace))
    template = sandbox["spec"]["podTemplate"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {**template.get("metadata", {}), "name": name,
           "namespace": namespace}, "spec": template["spec"]}  # fmt: skip
    kubeloop.set_controller_reference(sandbox, pod)
    await client.create(pod)
    mirrored: str | None = None
    while True:
        try:
            found = await client.get(kinds.Pod, name, namespace=namespace)
        except kubeloop.errors.NotFound:
            return  # released: the run controller deleted the Sandbox, and the pod with it
        ready = {c["type"]: c["status"] for c in (found.get("status") or {}).get("conditions") or ()}.get(
            "Ready", "False"
        )
        if ready != mirrored:
            condition = {"type": "Ready", "status": ready, "reason": "PodReady" if ready == "True" else "PodNotReady",
                         "message": f"pod is {found['status'].get('phase')}", "lastTransitionTime": kubeloop.timestamps.now()}  # fmt: skip
            await client.patch(
                SANDBOX,
                name,
                {"status": {"conditions": [condition]}},
                namespace=namespace,
                subresource="status",
            )
            mirrored = ready
        await asyncio.sleep(0.05)  # a controller's next look; not a wait for an outcome


async def test_sandboxed_runs_without_and_with_agent_sandbox(api: kubeloop.APIClient) -> None:
    namespace = "sandboxed"
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    await api.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "llm", "namespace": namespace},
                      "stringData": {"token": "t"}})  # fmt: skip
    await api.create(runtime("sandbox-rt"))
    await api.create(agent("coder", namespace, "sandbox-rt"))
    manager = kubeloop.Manager(api)
    agentplatform.setup(manager)
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

        await kubeloop.crd.install_crds(api, SANDBOX_CRD)
        annotations = {
            "kubeloop.dev/termination-message": "done in the sandbox",
            "kubeloop.dev/duration": "0.5",
        }
        await api.create(
            agent_run("isolated", namespace, "coder", backend="sandbox", annotations=annotations)
        )
        controller = asyncio.create_task(play_the_sandbox_controller(api, "isolated", namespace))
        try:

            async def running() -> None:
                found = await api.get(AgentRun, "isolated", namespace=namespace)
                assert found.status is not None and (found.status.phase, found.status.reason) in (
                    ("Running", "SandboxReady"), ("Succeeded", "Completed"),
                ), found.status  # fmt: skip

            await eventually(running, timeout=20)
            sandbox = await api.get(SANDBOX, "isolated", namespace=namespace)
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
        finally:
            await controller
