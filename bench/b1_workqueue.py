"""B1 — work queue throughput: add + get + done for N keys, then the same with 10 duplicate adds
per key (which the queue must absorb). Prints one JSON line: µs per item, for the non-blocking
path (``get_nowait``, what a worker loop does while keys are waiting; also with the manager's
Prometheus queue metrics on) and for ``await get()``, beside a bare deque + set dedup queue as
the floor; and the same non-blocking path for the priority queue, controllers' default queue
(``priority_*``), with its ratio to the plain queue.

Target (docs/design/performance.md): ≤ 1.0 µs per item with 10× duplicates, metrics on.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections import deque

from kubeloop.manager.metrics import QueuePrometheusMetrics
from kubeloop.workqueue.priority import PriorityQueue
from kubeloop.workqueue.queue import WorkQueue


def bare(keys: list[str], duplicates: int) -> float:
    queue: deque[str] = deque()
    dirty: set[str] = set()
    started = time.perf_counter()
    for key in keys:
        for _ in range(duplicates + 1):
            if key not in dirty:
                dirty.add(key)
                queue.append(key)
    while queue:
        dirty.discard(queue.popleft())
    return time.perf_counter() - started


async def kubeloop_nowait(keys: list[str], duplicates: int, metrics: bool = False) -> float:
    queue: WorkQueue[str] = WorkQueue(QueuePrometheusMetrics("bench")) if metrics else WorkQueue()
    started = time.perf_counter()
    add, get, done = queue.add, queue.get_nowait, queue.done
    for key in keys:
        for _ in range(duplicates + 1):
            add(key)
    for _ in range(len(keys)):
        done(get())
    return time.perf_counter() - started


async def priority_nowait(keys: list[str], duplicates: int, metrics: bool = False) -> float:
    queue: PriorityQueue[str] = (
        PriorityQueue(metrics=QueuePrometheusMetrics("bench")) if metrics else PriorityQueue()
    )
    started = time.perf_counter()
    add, get, done = queue.add, queue.get_nowait, queue.done
    for key in keys:
        for _ in range(duplicates + 1):
            add(key)
    for _ in range(len(keys)):
        done(get())
    return time.perf_counter() - started


async def kubeloop_await(keys: list[str], duplicates: int) -> float:
    queue: WorkQueue[str] = WorkQueue()
    started = time.perf_counter()
    for key in keys:
        for _ in range(duplicates + 1):
            queue.add(key)
    for _ in range(len(keys)):
        queue.done(await queue.get())
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    keys = [f"namespace-{i % 100}/object-{i}" for i in range(args.keys)]
    results: dict[str, float] = {}
    for duplicates in (0, 10):
        samples = {
            "bare": [bare(keys, duplicates) for _ in range(args.runs)],
            "get_nowait": [asyncio.run(kubeloop_nowait(keys, duplicates)) for _ in range(args.runs)],
            "get_nowait_metrics": [
                asyncio.run(kubeloop_nowait(keys, duplicates, metrics=True)) for _ in range(args.runs)
            ],
            "await_get": [asyncio.run(kubeloop_await(keys, duplicates)) for _ in range(args.runs)],
            "priority_get_nowait": [asyncio.run(priority_nowait(keys, duplicates)) for _ in range(args.runs)],
            "priority_get_nowait_metrics": [
                asyncio.run(priority_nowait(keys, duplicates, metrics=True)) for _ in range(args.runs)
            ],
        }
        for name, times in samples.items():
            results[f"{name}_dup{duplicates}_us_per_item"] = round(
                statistics.median(times) / args.keys * 1e6, 3
            )
    results["ratio_get_nowait_to_bare_dup10"] = round(
        results["get_nowait_dup10_us_per_item"] / results["bare_dup10_us_per_item"], 2
    )
    for suffix in ("", "_metrics"):
        results[f"ratio_priority_to_plain{suffix}_dup10"] = round(
            results[f"priority_get_nowait{suffix}_dup10_us_per_item"]
            / results[f"get_nowait{suffix}_dup10_us_per_item"],
            2,
        )
    print(json.dumps({"bench": "B1", "keys": args.keys, "runs": args.runs, **results}))


if __name__ == "__main__":
    main()
