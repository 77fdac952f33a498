"""A local pod's life as a kubelet leads it: init containers one by one before the containers
(Pending, Initialized False, PodInitializing meanwhile; a failed one fails a pod that is never
restarted); startup, readiness and liveness probes (exec, httpGet, tcpSocket) driving
``started``, Ready and restarts, with Unhealthy and Killing events; ``activeDeadlineSeconds``
ending the pod (DeadlineExceeded); ``kubectl rollout status`` waiting on a real readiness probe."""

# ruff: noqa: F811  (the process node's fixtures are imported, then requested by name)

from __future__ import annotations

import asyncio
import contextlib
import json
import pathlib
import socket
import sys
import time
from typing import Any

import yaml

from kubeloop.node.probes import ProbeLoop, ProbeTarget
from tests.apiserver.test_kubectl import Kubectl
from tests.node.test_process_node import (  # noqa: F401  (fixtures)
    api,
    ended,
    node,
    pod_json,
    pods_dir,
)
from tests.node.test_process_node_volumes import (  # noqa: F401  (kubectl: a fixture)
    apply,
    events,
    kubectl,
    pod,
)


def condition(found: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in found["status"]["conditions"] if c["type"] == kind)


def until(kubectl: Kubectl, name: str, namespace: str, check: Any) -> dict[str, Any]:
    """The pod once ``check(pod)`` holds (the test's timeout bounds the wait)."""
    while not check(found := pod_json(kubectl, name, namespace)):
        time.sleep(0.05)
    return found


def free_port() -> int:
    """A port free now, for a process to listen on (another may take it first: where nothing
    must listen, use ``reserved_port``)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def reserved_port(held: contextlib.ExitStack) -> int:
    """A port bound on 127.0.0.1 (and so taken there, and on every address, from others) as long
    as ``held`` lasts, not listening: a connection there is refused, and no other process of the
    suite (a server on port 0) takes it meanwhile; a pod can still listen on it at its own address."""
    sock = held.enter_context(socket.socket())
    sock.bind(("127.0.0.1", 0))
    return int(sock.getsockname()[1])


def test_init_containers_run_one_by_one_before_the_containers(
    kubectl: Kubectl, namespace: str, pods_dir: pathlib.Path
) -> None:
    r = "$KUBELOOP_CONTAINER_ROOT"
    spec = pod("inits", namespace, f"cat {r}/work/log", restartPolicy="Always",
               container={"volumeMounts": [{"name": "work", "mountPath": "/work"}]},
               volumes=[{"name": "work", "emptyDir": {}}])  # fmt: skip
    spec["spec"]["restartPolicy"] = "OnFailure"
    spec["spec"]["initContainers"] = [
        {"name": "first", "image": "busybox", "volumeMounts": [{"name": "work", "mountPath": "/work"}],
         "command": ["sh", "-c", f"until [ -f {r}/work/go ]; do sleep 0.02; done; echo one >> {r}/work/log"]},
        {"name": "second", "image": "busybox", "volumeMounts": [{"name": "work", "mountPath": "/work"}],
         "command": ["sh", "-c", f"echo two >> {r}/work/log"]},
    ]  # fmt: skip
    apply(kubectl, spec)
    waiting = until(kubectl, "inits", namespace, lambda p: (p["status"].get("initContainerStatuses") or [{}])[0]
                    .get("state", {}).get("running"))  # fmt: skip
    assert waiting["status"]["phase"] == "Pending"
    initialized = condition(waiting, "Initialized")
    assert (initialized["status"], initialized["reason"], initialized["message"]) == (
        "False", "ContainersNotInitialized", "containers with incomplete status: [first second]")  # fmt: skip
    assert waiting["status"]["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    (pods_dir / waiting["metadata"]["uid"] / "volumes" / "work" / "go").touch()
    found = ended(kubectl, "inits", namespace)
    assert found["status"]["phase"] == "Succeeded"
    assert [s["state"]["terminated"]["reason"] for s in found["status"]["initContainerStatuses"]] == ["Completed"] * 2
    assert condition(found, "Initialized")["status"] == "True"
    assert kubectl("logs", "inits", "-n", namespace).stdout == "one\ntwo\n"


def test_a_failed_init_container_fails_a_pod_never_restarted(kubectl: Kubectl, namespace: str) -> None:
    spec = pod("broken-init", namespace, "echo main ran")
    spec["spec"]["initContainers"] = [{"name": "setup", "image": "busybox", "command": ["sh", "-c", "exit 4"]}]
    apply(kubectl, spec)
    found = ended(kubectl, "broken-init", namespace)
    assert found["status"]["phase"] == "Failed"
    assert found["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 4
    assert found["status"]["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}


def test_startup_and_readiness_probes_drive_started_and_ready(
    kubectl: Kubectl, namespace: str, pods_dir: pathlib.Path
) -> None:
    r = "$KUBELOOP_CONTAINER_ROOT"
    spec = pod("probed", namespace, "exec sleep 600", restartPolicy="Always", container={
        "startupProbe": {"exec": {"command": ["sh", "-c", f"test -f {r}/started"]}, "periodSeconds": 1,
                         "failureThreshold": 1000},
        "readinessProbe": {"exec": {"command": ["sh", "-c", f"test -f {r}/ready"]}, "periodSeconds": 1},
    })  # fmt: skip
    apply(kubectl, spec)
    running = until(kubectl, "probed", namespace, lambda p: p["status"].get("phase") == "Running")
    root = pods_dir / running["metadata"]["uid"] / "main" / "root"
    status = running["status"]["containerStatuses"][0]
    assert (status["started"], status["ready"], condition(running, "Ready")["status"]) == (False, False, "False")
    while not events(kubectl, "probed", namespace, "Unhealthy"):
        time.sleep(0.05)
    assert events(kubectl, "probed", namespace, "Unhealthy")[0].startswith("Startup probe failed")
    (root / "started").touch()
    started = until(kubectl, "probed", namespace, lambda p: p["status"]["containerStatuses"][0]["started"])
    assert started["status"]["containerStatuses"][0]["ready"] is False  # readiness has its own say
    (root / "ready").touch()
    kubectl("wait", "-n", namespace, "--for=condition=Ready", "pod/probed", "--timeout=30s")
    (root / "ready").unlink()
    until(kubectl, "probed", namespace, lambda p: condition(p, "Ready")["status"] == "False")
    assert pod_json(kubectl, "probed", namespace)["status"]["containerStatuses"][0]["restartCount"] == 0


def test_a_failing_liveness_probe_restarts_the_container(kubectl: Kubectl, namespace: str) -> None:
    with contextlib.ExitStack() as held:  # the probe's port: nothing listens there meanwhile
        spec = pod("unwell", namespace, "exec sleep 600", restartPolicy="Always", container={
            "livenessProbe": {"tcpSocket": {"port": reserved_port(held)}, "periodSeconds": 1, "failureThreshold": 2},
        }, terminationGracePeriodSeconds=1)  # fmt: skip
        apply(kubectl, spec)
        restarted = until(kubectl, "unwell", namespace,
                          lambda p: (p["status"].get("containerStatuses") or [{}])[0].get("restartCount", 0) >= 1)  # fmt: skip
    last = restarted["status"]["containerStatuses"][0]["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (143, "Error")  # SIGTERM, as the kubelet sends
    assert "Container main failed liveness probe, will be restarted" in events(kubectl, "unwell", namespace, "Killing")
    assert any(m.startswith("Liveness probe failed: dial tcp 127.244.") for m in events(kubectl, "unwell", namespace, "Unhealthy"))


def test_active_deadline_seconds_end_the_pod(kubectl: Kubectl, namespace: str) -> None:
    apply(kubectl, pod("bounded", namespace, "exec sleep 600", activeDeadlineSeconds=1))
    found = ended(kubectl, "bounded", namespace)
    assert (found["status"]["phase"], found["status"]["reason"]) == ("Failed", "DeadlineExceeded")
    assert found["status"]["message"] == "Pod was active on the node longer than the specified deadline"
    state = found["status"]["containerStatuses"][0]["state"]
    # Killed (SIGTERM: 143); on a loaded machine the deadline may pass before the process starts,
    # and then it never does.
    assert state.get("terminated", {}).get("exitCode") == 143 or "waiting" in state, state


#: An HTTP server on the pod's own address (its first argument) and a port (its second).
SERVER = "import http.server as s, sys; s.HTTPServer((sys.argv[1], int(sys.argv[2])), s.SimpleHTTPRequestHandler).serve_forever()"
#: The pod's address, as a variable its command can name: $(POD_IP).
POD_IP = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def test_rollout_status_waits_on_a_real_readiness_probe(kubectl: Kubectl, namespace: str) -> None:
    port = free_port()
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": namespace},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{
                "name": "web", "image": "busybox", "command": [sys.executable, "-c", SERVER, "$(POD_IP)", str(port)],
                "env": [POD_IP],
                "ports": [{"name": "http", "containerPort": port}],
                "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
            }]}}},
    }  # fmt: skip
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(deployment))
    kubectl("rollout", "status", "-n", namespace, "deployment/web", "--timeout=60s")
    pods = json.loads(kubectl("get", "pods", "-n", namespace, "-l", "app=web", "-o", "json").stdout)["items"]
    assert [p["status"]["containerStatuses"][0]["ready"] for p in pods] == [True]
    with socket.create_connection((pods[0]["status"]["podIP"], port)) as served:  # the process really serves
        served.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert served.recv(12).startswith(b"HTTP/1.0 200")


async def test_a_probes_verdict_changes_only_after_its_thresholds() -> None:
    """successThreshold successes in a row make it succeed, failureThreshold failures in a row
    make it fail; every result is reported (each failure is an Unhealthy event)."""
    results = iter([True, False, True, True, False, False, False, True])
    reported: list[tuple[bool, bool | None]] = []
    done = asyncio.Event()

    async def run(probe: dict[str, Any], target: ProbeTarget) -> tuple[bool, str]:
        try:
            return next(results), ""
        except StopIteration:
            done.set()
            await asyncio.Event().wait()  # the test cancels the loop here
            raise AssertionError("unreachable") from None

    async def report(ok: bool, message: str, verdict: bool | None) -> None:
        reported.append((ok, verdict))

    probe = {"periodSeconds": 0.001, "successThreshold": 2, "failureThreshold": 2}
    loop = ProbeLoop(probe, ProbeTarget("127.0.0.1", {}, ".", {}), report, initial=None, run=run)
    task = asyncio.create_task(loop.loop())
    await done.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert reported == [
        (True, None), (False, None), (True, None), (True, True), (False, None), (False, False), (False, None), (True, None)
    ]  # fmt: skip


def test_a_memory_limit_holds_the_process_and_none_does_not(kubectl: Kubectl, namespace: str) -> None:
    """limits.memory is the process's RLIMIT_DATA: past it, allocations fail."""
    hog = f"{sys.executable} -c \"b = bytearray(200 * 2**20); print('held', len(b))\""
    limited = pod("limited", namespace, hog, container={"resources": {"limits": {"memory": "64Mi"}}})
    apply(kubectl, limited, pod("unlimited", namespace, hog))
    found = ended(kubectl, "limited", namespace)
    assert (found["status"]["phase"], found["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]) == ("Failed", 1)
    assert "MemoryError" in kubectl("logs", "limited", "-n", namespace).stdout
    assert ended(kubectl, "unlimited", namespace)["status"]["phase"] == "Succeeded"
    assert kubectl("logs", "unlimited", "-n", namespace).stdout == f"held {200 * 2**20}\n"
