"""B3 — the informer cache holding 100,000 Pods (~2.5 KB of JSON each as served).

The server runs as its own process and is filled first. Then, each in a fresh process so that
nothing else is in its heap, the cache is synced and measured:

- ``kubeloop``: ``Cache`` (kubeloop.cache) — RSS growth from before the informer starts to after
  it has synced (after a GC), against the compact JSON size of what it stores (managedFields
  stripped, as stored) and of what the server served; then ``get`` latency (``await cache.get``
  and the store's own ``get``) for random keys, and one label-selector ``list`` over a namespace;
- ``dicts``: the same Pods listed and held as decoded dicts (what a dict-backed cache costs,
  the reference point in docs/design/performance.md) — RSS growth and the cost of the copy a dict cache must hand
  out per get, over the same keys kubeloop's get reads: ``copy.deepcopy`` and the fastest copy
  of a JSON dict (an orjson round trip), the baseline ``get`` compares with.

Prints one JSON line. Targets (docs/design/performance.md): RSS growth ≤ 1.3× the compact JSON size; get ≤ 10 µs.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import random
import statistics
import subprocess
import sys
import time
from typing import Any

import orjson

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _server import server_process

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.client.config import load_kubeconfig
from kubeloop.client.rest import APIClient

POD = GroupVersionKind("", "v1", "Pod")
NAMESPACES = 10


def pod(index: int) -> dict[str, Any]:
    """A Pod of a typical web workload (~2.5 KB once the server has defaulted it)."""
    name = f"web-{index:06d}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": f"ns-{index % NAMESPACES}",
            "labels": {
                "app": "web",
                "tier": "frontend" if index % 2 else "backend",
                "shard": str(index % 16),
            },
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9102"},
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example.com/team/web-frontend:v1.24.3",
                    "args": ["--port=8080", "--log-level=info", f"--instance={name}"],
                    "ports": [
                        {"name": "http", "containerPort": 8080},
                        {"name": "metrics", "containerPort": 9102},
                    ],
                    "env": [
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {
                            "name": "POD_NAMESPACE",
                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                        },
                        {"name": "DATABASE_URL", "value": "postgres://db.internal:5432/app"},
                        {"name": "CACHE_TTL_SECONDS", "value": "300"},
                    ],
                    "resources": {
                        "requests": {"cpu": "250m", "memory": "256Mi"},
                        "limits": {"cpu": "1", "memory": "512Mi"},
                    },
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 5},
                    "livenessProbe": {"httpGet": {"path": "/livez", "port": 8080}, "initialDelaySeconds": 10},
                    "volumeMounts": [
                        {"name": "config", "mountPath": "/etc/app"},
                        {"name": "cache", "mountPath": "/var/cache/app"},
                    ],
                },
                {
                    "name": "sidecar",
                    "image": "registry.example.com/platform/log-shipper:v3.1.0",
                    "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                    "volumeMounts": [{"name": "cache", "mountPath": "/var/cache/app", "readOnly": True}],
                },
            ],
            "volumes": [
                {"name": "config", "configMap": {"name": "web-config"}},
                {"name": "cache", "emptyDir": {}},
            ],
            "nodeName": f"node-{index % 50:03d}",
        },
    }


async def fill(kubeconfig: str, count: int, writers: int) -> float:
    async with APIClient(load_kubeconfig(kubeconfig)) as client:
        for n in range(NAMESPACES):
            await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"ns-{n}"}})
        next_index = 0

        async def writer() -> None:
            nonlocal next_index
            while next_index < count:
                index = next_index
                next_index += 1
                await client.create(pod(index))

        started = time.perf_counter()
        await asyncio.gather(*(writer() for _ in range(writers)))
        return time.perf_counter() - started


def rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096


def settled_rss() -> int:
    gc.collect()
    return rss_bytes()


async def measure_kubeloop(kubeconfig: str, count: int, gets: int) -> dict[str, Any]:
    from kubeloop.cache.cache import Cache

    async with APIClient(load_kubeconfig(kubeconfig)) as client:
        await client.mapping(POD)  # discovery outside the measured growth
        cache = Cache(client, sync_timeout=600)
        informer = cache.informer_for(POD)
        before = settled_rss()
        started = time.perf_counter()
        cache.start()
        assert await informer.wait_for_sync(600)
        sync_seconds = time.perf_counter() - started
        after = settled_rss()
        store = informer.store
        assert len(store) == count, len(store)
        # The JSON of what it stores (the store keeps less: its kept forms leave out what
        # objects share), and what it keeps.
        kept = [store.get_encoded(key) or b"" for key in store.list_keys()]
        stored_json = sum(len(store.json_of(encoded)) for encoded in kept if encoded)
        kept_bytes = sum(map(len, kept))

        sample = sample_keys(store.list_keys(), gets)
        pairs = [(key.split("/", 1)[0], key.split("/", 1)[1]) for key in sample]
        cache_get: list[float] = []
        for namespace, name in pairs:
            t0 = time.perf_counter()
            await cache.get(POD, name, namespace=namespace)
            cache_get.append(time.perf_counter() - t0)
        store_get: list[float] = []
        for key in sample:
            t0 = time.perf_counter()
            store.get(key)
            store_get.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        selected = await cache.list(POD, namespace="ns-3", label_selector="tier=frontend,shard in (1,3,5)")
        list_seconds = time.perf_counter() - t0
        await cache.stop()
        served_json = 0
        async for page in client.list_pages(POD, page_size=500):
            served_json += sum(len(orjson.dumps(item)) for item in page["items"])
    return {
        "rss_growth_mb": round((after - before) / 1e6, 1),
        "stored_json_mb": round(stored_json / 1e6, 1),
        "kept_mb": round(kept_bytes / 1e6, 1),
        "served_json_mb": round(served_json / 1e6, 1),
        "bytes_per_pod_served": served_json // count,
        "rss_over_stored_json": round((after - before) / stored_json, 3),
        "rss_over_served_json": round((after - before) / served_json, 3),
        "sync_seconds": round(sync_seconds, 2),
        "cache_get_us_median": round(statistics.median(cache_get) * 1e6, 2),
        "cache_get_us_p99": round(statistics.quantiles(cache_get, n=100)[98] * 1e6, 2),
        "store_get_us_median": round(statistics.median(store_get) * 1e6, 2),
        "label_selector_list_ms": round(list_seconds * 1e3, 1),
        "label_selector_list_items": len(selected),
    }


def sample_keys(keys: list[str], gets: int) -> list[str]:
    """The keys both caches are read with: the same random draw from the same sorted keys."""
    ordered = sorted(keys)
    chooser = random.Random(1)
    return [chooser.choice(ordered) for _ in range(gets)]


async def measure_dicts(kubeconfig: str, count: int, gets: int) -> dict[str, Any]:
    from kubeloop.cache.informer import strip_managed_fields

    async with APIClient(load_kubeconfig(kubeconfig)) as client:
        await client.mapping(POD)
        before = settled_rss()
        held: dict[str, dict[str, Any]] = {}
        async for page in client.list_pages(POD, page_size=500):
            for item in page["items"]:
                obj = strip_managed_fields(item)
                held[f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"] = obj
            del page
        after = settled_rss()
        assert len(held) == count
        # A get of a dict cache: look the key up and hand out a copy (the caller must not share the
        # cache's object), over the same keys kubeloop's cache is read with.
        sample = sample_keys(list(held), gets)
        copies = []
        for key in sample:
            t0 = time.perf_counter()
            copy.deepcopy(held[key])
            copies.append(time.perf_counter() - t0)
        round_trips = []
        for key in sample:
            t0 = time.perf_counter()
            orjson.loads(orjson.dumps(held[key]))
            round_trips.append(time.perf_counter() - t0)
        stored_json = sum(len(orjson.dumps(obj)) for obj in held.values())
    return {
        "rss_growth_mb": round((after - before) / 1e6, 1),
        "rss_over_stored_json": round((after - before) / stored_json, 3),
        "deepcopy_us_median": round(statistics.median(copies) * 1e6, 2),
        "fastest_copy_us_median": round(statistics.median(round_trips) * 1e6, 2),
    }


def child(kind: str, kubeconfig: str, count: int, gets: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", kind, "--kubeconfig", kubeconfig, "--pods", str(count)]
    command += ["--gets", str(gets)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--gets", type=int, default=100_000)
    parser.add_argument("--writers", type=int, default=64)
    parser.add_argument("--child", choices=["kubeloop", "dicts"], help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.child == "kubeloop":
            print(json.dumps(asyncio.run(measure_kubeloop(args.kubeconfig, args.pods, args.gets))))
        else:
            print(json.dumps(asyncio.run(measure_dicts(args.kubeconfig, args.pods, args.gets))))
        return
    with server_process(memory=True) as server:
        fill_seconds = asyncio.run(fill(server.kubeconfig, args.pods, args.writers))
        kubeloop = child("kubeloop", server.kubeconfig, args.pods, args.gets)
        dicts = child("dicts", server.kubeconfig, args.pods, args.gets)
    print(
        json.dumps(
            {
                "bench": "B3",
                "pods": args.pods,
                "fill_seconds": round(fill_seconds, 1),
                "kubeloop": kubeloop,
                "dicts": dicts,
                "memory_ratio_dicts_over_kubeloop": round(
                    dicts["rss_growth_mb"] / kubeloop["rss_growth_mb"], 2
                ),
                # A get from a dict cache costs at least its fastest copy: the like-for-like baseline.
                "get_ratio_kubeloop_over_fastest_dict_copy": round(
                    kubeloop["store_get_us_median"] / dicts["fastest_copy_us_median"], 2
                ),
                "targets": {"rss_over_json": 1.3, "get_us": 10},
            }
        )
    )


if __name__ == "__main__":
    main()
