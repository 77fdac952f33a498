"""The process node: how fast pods of a local image start, how fast a command runs in one, how
fast their output is logged and read. Prints one JSON line.

`kubeloop apiserver --simulate --local-image busybox=host` runs in a process of its own.
Rows:
- `pods`, `create_to_running_ms` and `create_to_ready_ms` (median, p99): PODS pods (`sleep`)
  created at once by CONCURRENCY clients, each timed from its create request to the status that
  says its container runs, and that it is Ready, as a watch delivers them; `all_ready_s` until
  every one is; `all_gone_s` from deleting them all until no process of theirs is left;
- `exec_round_trip_ms` (median, p99): `true` run with the official client's `stream()` in a
  running pod, EXECS times;
- `log_lines_per_s`: a pod printing LOG_LINES lines of 100 bytes as fast as it can, from the
  first line logged to the last, by the times the log records (what the node's log writer
  keeps up with); `log_read_mb_per_s`: the pod's log read back through `pods/log`.

There is no peer to compare with: kind and k3s need Docker or root, kwok runs nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from _server import server_process

import kubeloop
from kubeloop import APIClient, kinds, timestamps

PODS = 200
CONCURRENCY = 20
EXECS = 30
LOG_LINES = 50_000  # 7 MB with the log's own prefixes: under its 10 MiB cap
NAMESPACE = "default"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def pod(name: str, command: list[str], restart: str = "Always") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"bench": "process-node"}},
        "spec": {
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "main", "image": "busybox", "command": command}],
        },
    }


async def start_pods(client: APIClient) -> dict[str, Any]:
    created: dict[str, float] = {}
    running: dict[str, float] = {}
    ready: dict[str, float] = {}
    done = asyncio.Event()

    async def watch() -> None:
        async for event in client.watch(kinds.Pod, namespace=NAMESPACE, label_selector="bench=process-node"):
            obj = event.object
            name = obj["metadata"]["name"]
            now = time.perf_counter()
            statuses = (obj.get("status") or {}).get("containerStatuses") or []
            if statuses and "running" in (statuses[0].get("state") or {}):
                running.setdefault(name, now)
            conditions = (obj.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                ready.setdefault(name, now)
            if len(ready) == PODS:
                done.set()
                return

    watching = asyncio.create_task(watch())
    await asyncio.sleep(0.5)  # the watch is open before the first create
    names = [f"sleeper-{i}" for i in range(PODS)]
    gate = asyncio.Semaphore(CONCURRENCY)

    async def create(name: str) -> None:
        async with gate:
            created[name] = time.perf_counter()
            await client.create(pod(name, ["sleep", "600"]))

    began = time.perf_counter()
    await asyncio.gather(*(create(name) for name in names))
    await done.wait()
    all_ready = time.perf_counter() - began
    await watching
    to_running = [(running[n] - created[n]) * 1000 for n in names]
    to_ready = [(ready[n] - created[n]) * 1000 for n in names]
    return {
        "pods": PODS,
        "create_to_running_ms": {"median": round(statistics.median(to_running), 1), "p99": round(percentile(to_running, 0.99), 1)},
        "create_to_ready_ms": {"median": round(statistics.median(to_ready), 1), "p99": round(percentile(to_ready, 0.99), 1)},
        "all_ready_s": round(all_ready, 2),
    }


def sleepers() -> list[int]:
    found = subprocess.run(["pgrep", "-f", "^sleep 600$"], capture_output=True, text=True).stdout.split()
    return [int(pid) for pid in found]


async def delete_pods(client: APIClient) -> float:
    began = time.perf_counter()
    await client.delete_collection(kinds.Pod, namespace=NAMESPACE, label_selector="bench=process-node")
    while sleepers():  # noqa: ASYNC110  (other processes' ends: nothing to wait on but a look)
        await asyncio.sleep(0.05)
    return round(time.perf_counter() - began, 2)


def exec_round_trips(kubeconfig: str) -> dict[str, float]:
    import kubernetes
    from kubernetes.stream import stream

    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    with kubernetes.client.ApiClient(configuration) as api:
        core: Any = kubernetes.client.CoreV1Api(api)
        core.create_namespaced_pod(NAMESPACE, pod("exec-target", ["sleep", "600"]))
        while (core.read_namespaced_pod("exec-target", NAMESPACE).status.phase or "") != "Running":
            time.sleep(0.05)
        times = []
        for _ in range(EXECS):
            began = time.perf_counter()
            stream(core.connect_get_namespaced_pod_exec, "exec-target", NAMESPACE, command=["true"],
                   stderr=True, stdin=False, stdout=True, tty=False)  # fmt: skip
            times.append((time.perf_counter() - began) * 1000)
        core.delete_namespaced_pod("exec-target", NAMESPACE)
    return {"median": round(statistics.median(times), 1), "p99": round(percentile(times, 0.99), 1)}


async def log_throughput(client: APIClient) -> dict[str, float]:
    script = f"import sys; line = 'x' * 99 + '\\n'; w = sys.stdout.write\nfor _ in range({LOG_LINES}): w(line)"
    await client.create(pod("talker", [sys.executable, "-c", script], restart="Never"))
    while True:
        found = await client.get(kinds.Pod, "talker", namespace=NAMESPACE)
        if (found.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            break
        await asyncio.sleep(0.05)
    path = f"/api/v1/namespaces/{NAMESPACE}/pods/talker/log"
    _, stamped = await client.request("GET", path, params={"timestamps": "true"}, accept="*/*")
    lines = stamped.splitlines()
    first = timestamps.parse_time(lines[0].split(b" ", 1)[0].decode())
    last = timestamps.parse_time(lines[-1].split(b" ", 1)[0].decode())
    assert first is not None and last is not None
    ran = (last - first).total_seconds()  # from the first line logged to the last, as logged
    began = time.perf_counter()
    _, body = await client.request("GET", path, accept="*/*")
    read = time.perf_counter() - began
    await client.delete(kinds.Pod, "talker", namespace=NAMESPACE)
    return {
        "log_lines_per_s": round(LOG_LINES / max(ran, 1e-3)),
        "log_read_mb_per_s": round(len(body) / 1e6 / read, 1),
        "log_lines_read": body.count(b"\n"),
    }


async def main() -> None:
    with server_process(controllers=True, extra_args=("--simulate", "--local-image", "busybox=host")) as server:
        os.environ["KUBECONFIG"] = server.kubeconfig
        client = APIClient(kubeloop.load_config())
        try:
            result: dict[str, Any] = {"benchmark": "process_node"}
            result.update(await start_pods(client))
            result["all_gone_s"] = await delete_pods(client)
            result["exec_round_trip_ms"] = await asyncio.to_thread(exec_round_trips, server.kubeconfig)
            result.update(await log_throughput(client))
        finally:
            await client.close()
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
