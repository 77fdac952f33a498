"""Event → queue: what one watch event costs between the informer and the controller's queue.

An informer (fed directly, no server: the bench measures the runtime's own work) holds N Pods of
~3 KB; a controller's ``Kind`` source with ``EnqueueRequestForObject`` (what ``for_`` uses) puts
requests on a rate-limiting queue. Timed: M update events (each a new resourceVersion of a held
Pod) through ``Informer.event``: store update, handler, predicates, enqueue. Rows: the
``for_`` path (no predicate), with ``GenerationChanged`` (reads the old object), and the informer
with no handler (the store's floor). Prints one JSON line of µs per event (medians of repeats).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from kubeloop import kinds
from kubeloop.cache.informer import Informer
from kubeloop.client.config import ClientConfig
from kubeloop.client.rest import APIClient
from kubeloop.client.watch import WatchEvent
from kubeloop.controller.handler import EnqueueRequestForObject
from kubeloop.controller.predicate import GenerationChanged, Predicate
from kubeloop.controller.reconcile import Request
from kubeloop.controller.source import Kind
from kubeloop.workqueue.ratelimiting import RateLimitingQueue


def pod(index: int, revision: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pod-{index}",
            "namespace": "bench",
            "uid": f"00000000-0000-0000-0000-{index:012d}",
            "resourceVersion": str(revision),
            "generation": 1,
            "labels": {"app": "web", "tier": "frontend", "shard": str(index % 8)},
            "annotations": {"example.com/note": "x" * 200},
        },
        "spec": {
            "containers": [
                {
                    "name": f"c{c}",
                    "image": "registry.example.com/team/web:1.2.3",
                    "args": ["--port=8080", "--log-level=info", "--feature=" + "y" * 100],
                    "env": [{"name": f"VAR_{e}", "value": "v" * 40} for e in range(8)],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                }
                for c in range(2)
            ],
            "nodeName": f"node-{index % 50}",
        },
        "status": {"phase": "Running", "podIP": f"10.0.{index // 250}.{index % 250}"},
    }


def run(objects: int, events: int, predicates: tuple[Predicate, ...], with_source: bool) -> float:
    async def main() -> float:
        client = APIClient(ClientConfig(server="http://127.0.0.1:1"))
        informer = Informer(client, kinds.Pod)
        queue: RateLimitingQueue[Request] = RateLimitingQueue()
        if with_source:
            Kind(informer, EnqueueRequestForObject(), *predicates).start(queue)
        for i in range(objects):
            informer.event(WatchEvent("ADDED", pod(i, i + 1)))
        updates = [WatchEvent("MODIFIED", pod(i % objects, objects + i + 1)) for i in range(events)]
        started = time.perf_counter()
        for event in updates:
            informer.event(event)
        elapsed = time.perf_counter() - started
        await client.close()
        return elapsed / events * 1e6

    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=2_000)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = {
        "for_us_per_event": ((), True),
        "generation_changed_us_per_event": ((GenerationChanged(),), True),
        "informer_only_us_per_event": ((), False),
    }
    result: dict[str, Any] = {"bench": "event_to_queue", "objects": args.objects, "events": args.events}
    for name, (predicates, with_source) in rows.items():
        samples = [run(args.objects, args.events, predicates, with_source) for _ in range(args.repeats)]
        result[name] = round(statistics.median(samples), 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
