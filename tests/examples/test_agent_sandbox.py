"""examples/agent_sandbox, agent-sandbox's Sandbox controller in kubeloop, on a simulating server
of this module's own (its CRD must not reach other modules): a Sandbox gets its pod and headless
Service and is Ready as the pod is; ``kubectl scale`` takes it to no pod and back; at its
shutdown time it releases the pod and Service and is kept (Retain) or deleted (Delete); a pod or
Service of its name that it did not make is left alone, and a pod the server refuses is
reported, with Ready saying why, until the obstacle goes."""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import kubeloop
from kubeloop import kinds
from kubeloop.manager.operatortarget import Setup, load_target
from kubeloop.testing import ServerThread, SimulationOptions, eventually, start_server
from tests.kubectl_finder import newest_kubectl

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "agent_sandbox"
module, _ = load_target(str(EXAMPLE))
Sandbox, HASH_LABEL = module.Sandbox, module.HASH_LABEL
SANDBOX = Sandbox.__gvk__
module.RECHECK_SECONDS = 0.2  # a blocked Sandbox looks again soon: these tests wait for that


@pytest.fixture(scope="module")
def kube_apiserver() -> Iterator[ServerThread]:
    server = start_server(simulate=True, simulation=SimulationOptions(pod_start_seconds=0.05))
    yield server
    server.stop()


@pytest.fixture
def kube_setup() -> Setup:
    setup: Setup = module.setup
    return setup


def sandbox(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "agents.x-k8s.io/v1alpha1",
        "kind": "Sandbox",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "podTemplate": {
                "metadata": {"labels": {"app": "coder"}, "annotations": {"note": "kept"}},
                "spec": {"containers": [{"name": "agent", "image": "ghcr.io/example/agent:1"}]},
            },
            **spec,
        },
    }


def ready(found: kubeloop.Obj) -> tuple[str, str, str]:
    condition = kubeloop.find_status_condition(found, "Ready") or {}
    return condition.get("status", ""), condition.get("reason", ""), condition.get("message", "")


async def reaches(
    client: kubeloop.APIClient, name: str, namespace: str, status: str, reason: str
) -> kubeloop.Obj:
    async def check() -> kubeloop.Obj:
        found = await client.get(SANDBOX, name, namespace=namespace)
        assert ready(found)[:2] == (status, reason), found.get("status")
        return found

    return await eventually(check, timeout=30)


async def test_a_sandbox_is_a_pod_and_a_headless_service_and_scales(
    kube_client: kubeloop.APIClient,
    kube_namespace: str,
    kube_operator: kubeloop.Manager,
    kube_apiserver: ServerThread,
) -> None:
    namespace = kube_namespace
    await kube_client.create(sandbox("coder", namespace))
    found = await reaches(kube_client, "coder", namespace, "True", "DependenciesReady")
    status = found["status"]
    selector = f"{HASH_LABEL}={module.name_hash('coder')}"
    assert (status["replicas"], status["selector"], status["service"], status["serviceFQDN"]) == (
        1, selector, "coder", f"coder.{namespace}.svc.cluster.local",
    )  # fmt: skip
    pod = await kube_client.get(kinds.Pod, "coder", namespace=namespace)
    assert pod["metadata"]["labels"] == {"app": "coder", HASH_LABEL: module.name_hash("coder")}
    assert pod["metadata"]["annotations"] == {"note": "kept"}
    assert kubeloop.is_controlled_by(pod, found)
    service = await kube_client.get(kinds.Service, "coder", namespace=namespace)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {HASH_LABEL: module.name_hash("coder")}

    kubectl = [str(newest_kubectl()), "--kubeconfig", str(kube_apiserver.kubeconfig), "-n", namespace]

    async def run(*args: str) -> subprocess.CompletedProcess[str]:
        """kubectl, off the loop the operator runs on."""
        return await asyncio.to_thread(
            subprocess.run, [*kubectl, *args], capture_output=True, text=True, timeout=60
        )

    async def scale(replicas: int) -> None:
        done = await run("scale", "sandbox/coder", f"--replicas={replicas}")
        assert done.returncode == 0, done.stderr

    await scale(0)
    found = await reaches(kube_client, "coder", namespace, "False", "DependenciesNotReady")
    assert (found["status"]["replicas"], ready(found)[2]) == (0, "no pod: replicas is 0")

    async def pod_gone() -> None:
        assert not (await kube_client.list(kinds.Pod, namespace=namespace)).items

    await eventually(pod_gone)
    await scale(1)
    await reaches(kube_client, "coder", namespace, "True", "DependenciesReady")
    listed = await run("get", "sandboxes")
    assert listed.stdout.split("\n")[0].split() == ["NAME", "READY", "REASON", "AGE"]
    assert listed.stdout.split("\n")[1].split()[:3] == ["coder", "True", "DependenciesReady"]


@pytest.mark.parametrize("policy", ["Retain", "Delete"])
async def test_at_its_shutdown_time_a_sandbox_releases_its_pod(
    kube_client: kubeloop.APIClient, kube_namespace: str, kube_operator: kubeloop.Manager, policy: str
) -> None:
    namespace = kube_namespace
    await kube_client.create(sandbox("brief", namespace, shutdownPolicy=policy))
    await reaches(kube_client, "brief", namespace, "True", "DependenciesReady")
    # The shutdown time is set once the sandbox is ready, so a slow machine cannot reach it first.
    soon = (datetime.now(UTC) + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    await kube_client.patch(SANDBOX, "brief", {"spec": {"shutdownTime": soon}}, namespace=namespace)

    async def released() -> None:
        assert not (await kube_client.list(kinds.Pod, namespace=namespace)).items
        assert not (await kube_client.list(kinds.Service, namespace=namespace)).items
        sandboxes = (await kube_client.list(SANDBOX, namespace=namespace)).items
        if policy == "Delete":
            assert not sandboxes
        else:
            (kept,) = sandboxes
            assert ready(kept) == ("False", "SandboxExpired", "the Sandbox has expired")
            assert kept["status"]["replicas"] == 0

    await eventually(released, timeout=30)  # woken by its requeue at the shutdown time


async def test_what_it_did_not_make_is_left_alone_until_it_goes(
    kube_client: kubeloop.APIClient, kube_namespace: str, kube_operator: kubeloop.Manager
) -> None:
    """A pod, or a Service, of the Sandbox's name that it did not make blocks it (Ready says so)
    and is not touched; once it is deleted, the Sandbox makes its own."""
    namespace = kube_namespace
    stranger = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "taken", "namespace": namespace},
                "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}  # fmt: skip
    await kube_client.create(stranger)
    await kube_client.create(sandbox("taken", namespace))
    found = await reaches(kube_client, "taken", namespace, "False", "DependenciesNotReady")
    assert ready(found)[2] == "Pod taken exists and is not this Sandbox's"
    pod = await kube_client.get(kinds.Pod, "taken", namespace=namespace)
    assert not pod["metadata"].get("ownerReferences")
    assert HASH_LABEL not in (pod["metadata"].get("labels") or {})
    await kube_client.delete(kinds.Pod, "taken", namespace=namespace, grace_period_seconds=0)
    found = await reaches(kube_client, "taken", namespace, "True", "DependenciesReady")
    assert kubeloop.is_controlled_by(await kube_client.get(kinds.Pod, "taken", namespace=namespace), found)

    web = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "served", "namespace": namespace},
           "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}  # fmt: skip
    web = await kube_client.create(web)
    await kube_client.create(sandbox("served", namespace))
    found = await reaches(kube_client, "served", namespace, "False", "DependenciesNotReady")
    assert ready(found)[2] == "Service served exists and is not this Sandbox's"
    kept = await kube_client.get(kinds.Service, "served", namespace=namespace)
    assert kept["spec"]["clusterIP"] == web["spec"]["clusterIP"] != "None"
    assert kept["spec"]["selector"] == {"app": "web"} and not kept["metadata"].get("ownerReferences")


async def test_a_pod_the_server_refuses_is_reported_and_tried_again(
    kube_client: kubeloop.APIClient, kube_namespace: str, kube_operator: kubeloop.Manager
) -> None:
    """Pod Security refuses the template's pod: Ready says why in the server's words; once the
    namespace allows it, the Sandbox looks again and makes it."""
    namespace = kube_namespace
    enforce = "pod-security.kubernetes.io/enforce"
    await kube_client.patch(kinds.Namespace, namespace, {"metadata": {"labels": {enforce: "restricted"}}})
    await kube_client.create(sandbox("strict", namespace))
    found = await reaches(kube_client, "strict", namespace, "False", "DependenciesNotReady")
    assert ready(found)[2].startswith(
        'the pod is refused: pods "strict" is forbidden: violates PodSecurity "restricted:latest": '
        'allowPrivilegeEscalation != false (container "agent" must set'
    ), ready(found)
    await kube_client.patch(kinds.Namespace, namespace, {"metadata": {"labels": {enforce: None}}})
    await reaches(kube_client, "strict", namespace, "True", "DependenciesReady")
