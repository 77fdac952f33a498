"""Client throughput: kubeloop's async client against the official `kubernetes` client and
`kubernetes_asyncio`, in the same run, on the same embedded server (its own process, HTTPS).

Measured per client (median of --runs), like for like:
- get: sequential GETs of one Pod, per second — as dicts (kubeloop's default; the official
  clients with ``_preload_content=False`` and ``json.loads``, the fastest way they offer) and
  as models (kubeloop given ``core_v1.Pod``; the official clients' default);
- list: one LIST of --objects Pods (~2.5 KB each), objects per second, as dicts and as models;
- watch: events per second while a watch from resourceVersion 0 delivers --objects ADDED events
  (kubeloop's events hold dicts, the official clients' models: their watch has no raw mode).

Prints one JSON line with every figure and kubeloop's ratio to the best peer on each row:
``dicts_vs_raw_json`` and ``models_vs_models`` compare the same work; ``watch_dicts_vs_models``
does not (it is the choice each client offers) and is labelled so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

NAMESPACE = "bench"


def pod(i: int) -> dict[str, Any]:
    """A Pod of about 2.5 KB of JSON, like the ones B3 caches."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pod-{i:06d}",
            "namespace": NAMESPACE,
            "labels": {"app": "bench", "tier": "web", "shard": str(i % 16), "release": "stable"},
            "annotations": {"example.com/owner": "team-a", "example.com/note": "x" * 200},
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/team/app:1.2.3",
                    "args": ["--port=8080", "--verbose", "--config=/etc/app/config.yaml"],
                    "env": [{"name": f"VAR_{j}", "value": f"value-{j}"} for j in range(8)],
                    "ports": [{"containerPort": 8080, "name": "http"}],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"memory": "256Mi"},
                    },
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
                    "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}],
                },
                {
                    "name": "sidecar",
                    "image": "registry.example.com/proxy:2.0",
                    "args": ["--upstream=127.0.0.1:8080"],
                },
            ],
            "volumes": [{"name": "config", "configMap": {"name": "app-config"}}],
        },
    }


def start_server(data_dir: pathlib.Path) -> tuple[subprocess.Popen[str], pathlib.Path]:
    kubeconfig = data_dir / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubeloop.cli.main", "apiserver", "--memory", "--data-dir", str(data_dir),
         "--port", "0", "--kubeconfig", str(kubeconfig), "--no-controllers"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "ready" not in line:
        raise RuntimeError(f"server did not start: {line!r}")
    return proc, kubeconfig


async def populate(kubeconfig: pathlib.Path, count: int) -> None:
    from kubeloop.client.config import load_kubeconfig
    from kubeloop.client.rest import APIClient

    async with APIClient(load_kubeconfig(kubeconfig)) as client:
        await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        for start in range(0, count, 200):
            await asyncio.gather(*(client.create(pod(i)) for i in range(start, min(count, start + 200))))


# ---------------------------------------------------------------------------- kubeloop


async def kubeloop_figures(kubeconfig: pathlib.Path, objects: int, gets: int) -> dict[str, float]:
    from kubeloop.api.gvk import GroupVersionKind
    from kubeloop.api.models import core_v1
    from kubeloop.client.config import load_kubeconfig
    from kubeloop.client.rest import APIClient

    pods = GroupVersionKind("", "v1", "Pod")
    async with APIClient(load_kubeconfig(kubeconfig)) as client:
        await client.get(pods, "pod-000000", namespace=NAMESPACE)

        async def get_loop() -> None:
            for _ in range(gets):
                await client.get(pods, "pod-000000", namespace=NAMESPACE)

        async def get_models() -> None:
            for _ in range(gets):
                await client.get(core_v1.Pod, "pod-000000", namespace=NAMESPACE)

        async def list_once() -> None:
            listed = await client.list(pods, namespace=NAMESPACE, page_size=None)
            assert len(listed.items) == objects

        async def list_models() -> None:
            listed = await client.list(core_v1.Pod, namespace=NAMESPACE, page_size=None)
            assert len(listed.items) == objects

        async def watch_once() -> None:
            watch = client.watch(pods, namespace=NAMESPACE, resource_version="0")
            seen = 0
            async for _event in watch:
                seen += 1
                if seen == objects:
                    break
            await watch.close()

        return {
            "get_dicts_per_s": gets / await _timed(get_loop),
            "get_models_per_s": gets / await _timed(get_models),
            "list_dicts_per_s": objects / await _timed(list_once),
            "list_models_per_s": objects / await _timed(list_models),
            "watch_events_per_s": objects / await _timed(watch_once),
        }


# ---------------------------------------------------------------------------- official client


def official_figures(kubeconfig: pathlib.Path, objects: int, gets: int) -> dict[str, float]:
    import kubernetes

    # The official client's calls are partly untyped, and _preload_content=False answers are raw
    # responses its annotations do not know: held as Any.
    api_client: Any = kubernetes.config.new_client_from_config(str(kubeconfig))
    core: Any = kubernetes.client.CoreV1Api(api_client)
    core.read_namespaced_pod("pod-000000", NAMESPACE)

    def get_loop() -> None:
        for _ in range(gets):
            core.read_namespaced_pod("pod-000000", NAMESPACE)

    def get_raw() -> None:
        for _ in range(gets):
            json.loads(core.read_namespaced_pod("pod-000000", NAMESPACE, _preload_content=False).data)

    def list_once() -> None:
        assert len(core.list_namespaced_pod(NAMESPACE).items) == objects

    def list_raw() -> None:
        listed = json.loads(core.list_namespaced_pod(NAMESPACE, _preload_content=False).data)
        assert len(listed["items"]) == objects

    def watch_once() -> None:
        watch: Any = kubernetes.watch.Watch()
        for seen, _event in enumerate(
            watch.stream(core.list_namespaced_pod, NAMESPACE, resource_version="0"), 1
        ):
            if seen == objects:
                watch.stop()
                break

    figures = {
        "get_dicts_per_s": gets / _timed_sync(get_raw),
        "get_models_per_s": gets / _timed_sync(get_loop),
        "list_dicts_per_s": objects / _timed_sync(list_raw),
        "list_models_per_s": objects / _timed_sync(list_once),
        "watch_events_per_s": objects / _timed_sync(watch_once),
    }
    api_client.close()
    return figures


async def asyncio_client_figures(kubeconfig: pathlib.Path, objects: int, gets: int) -> dict[str, float]:
    import kubernetes_asyncio

    api_client = await kubernetes_asyncio.config.new_client_from_config(str(kubeconfig))
    async with api_client:
        core: Any = kubernetes_asyncio.client.CoreV1Api(api_client)
        await core.read_namespaced_pod("pod-000000", NAMESPACE)

        async def get_loop() -> None:
            for _ in range(gets):
                await core.read_namespaced_pod("pod-000000", NAMESPACE)

        async def get_raw() -> None:
            for _ in range(gets):
                response = await core.read_namespaced_pod("pod-000000", NAMESPACE, _preload_content=False)
                json.loads(await response.read())

        async def list_once() -> None:
            assert len((await core.list_namespaced_pod(NAMESPACE)).items) == objects

        async def list_raw() -> None:
            response = await core.list_namespaced_pod(NAMESPACE, _preload_content=False)
            assert len(json.loads(await response.read())["items"]) == objects

        async def watch_once() -> None:
            watch = kubernetes_asyncio.watch.Watch()
            seen = 0
            async with watch.stream(core.list_namespaced_pod, NAMESPACE, resource_version="0") as stream:
                async for _event in stream:
                    seen += 1
                    if seen == objects:
                        break

        return {
            "get_dicts_per_s": gets / await _timed(get_raw),
            "get_models_per_s": gets / await _timed(get_loop),
            "list_dicts_per_s": objects / await _timed(list_raw),
            "list_models_per_s": objects / await _timed(list_once),
            "watch_events_per_s": objects / await _timed(watch_once),
        }


# ---------------------------------------------------------------------------- harness


async def _timed(body: Callable[[], Awaitable[None]]) -> float:
    started = time.perf_counter()
    await body()
    return time.perf_counter() - started


def _timed_sync(body: Callable[[], None]) -> float:
    started = time.perf_counter()
    body()
    return time.perf_counter() - started


def median_of(samples: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(s[key] for s in samples), 1) for key in samples[0]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--gets", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        proc, kubeconfig = start_server(pathlib.Path(tmp))
        try:
            asyncio.run(populate(kubeconfig, args.objects))
            results: dict[str, list[dict[str, float]]] = {
                "kubeloop": [],
                "kubernetes": [],
                "kubernetes_asyncio": [],
            }
            for _ in range(args.runs):  # interleaved, so drift on a noisy machine hits all alike
                results["kubeloop"].append(asyncio.run(kubeloop_figures(kubeconfig, args.objects, args.gets)))
                results["kubernetes"].append(official_figures(kubeconfig, args.objects, args.gets))
                results["kubernetes_asyncio"].append(
                    asyncio.run(asyncio_client_figures(kubeconfig, args.objects, args.gets))
                )
        finally:
            proc.terminate()
            proc.wait(10)
    medians = {name: median_of(samples) for name, samples in results.items()}

    def ratio(key: str) -> float:
        best_peer = max(medians["kubernetes"][key], medians["kubernetes_asyncio"][key])
        return round(medians["kubeloop"][key] / best_peer, 2)

    ratios = {
        "dicts_vs_raw_json": {"get": ratio("get_dicts_per_s"), "list": ratio("list_dicts_per_s")},
        "models_vs_models": {"get": ratio("get_models_per_s"), "list": ratio("list_models_per_s")},
        "watch_dicts_vs_models": ratio("watch_events_per_s"),
    }
    print(json.dumps({"bench": "client_throughput", "objects": args.objects, "runs": args.runs,
                      "median": medians, "kubeloop_vs_best_peer": ratios}))  # fmt: skip


if __name__ == "__main__":
    main()
