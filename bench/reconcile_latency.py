"""Event-to-reconcile latency at 1,000 events/s: kubeloop's controller beside kopf's handler.

The server runs as its own process (in memory: the bench measures the controller, not fsync)
and so does the writer, which patches 1,000 ConfigMaps at a steady 1,000 patches/s, each patch
stamping the wall-clock time it was sent into an annotation. The operator under test runs here:

- ``kubeloop``: a Manager with one controller for ConfigMaps (default options: one worker); the
  reconciler reads the object from the cache and records now − stamp, and now − the time the
  watch event reached the informer (the operator's own share of the latency);
- ``kopf``: an async ``@kopf.on.event`` handler (kopf's lightest path: no state kept, no
  patches; async, so no thread hop), standalone, namespace-scoped, recording now − stamp.

Each stamp counts once (the first time a reconcile/handler sees it); stamps a level-triggered
controller skipped because a newer one superseded them count as seen at the newer one's time.
``--runs N`` (default 2) measures N times, each on a fresh server, the other operator first every
other run (the machine's speed drifts). Prints one JSON line: each run's p50/p99/max in ms, stamps
seen and the writer's achieved rate, each operator's median p50/p99 over the runs, and kopf's
over kubeloop's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import statistics
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _kopf import register_login
from _server import server_process

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.client.config import load_kubeconfig
from kubeloop.client.rest import APIClient

CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")
STAMP = "bench.kubeloop.dev/sent"


# ----------------------------------------------------------------------------- the writer


async def write(kubeconfig: str, namespace: str, objects: int, rate: float, seconds: float) -> dict[str, Any]:
    async with APIClient(load_kubeconfig(kubeconfig)) as client:
        total = int(rate * seconds)
        in_flight = asyncio.Semaphore(128)
        late = 0

        async def patch(index: int) -> None:
            async with in_flight:
                body = {"metadata": {"annotations": {STAMP: repr(time.time())}}}
                await client.patch(CONFIGMAP, f"cm-{index % objects:05d}", body, namespace=namespace)

        started = time.perf_counter()
        tasks = []
        for index in range(total):
            due = started + index / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            elif delay < -0.05:
                late += 1
            tasks.append(asyncio.create_task(patch(index)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
    return {"patches": total, "achieved_per_s": round(total / elapsed, 1), "sent_late": late}


# ----------------------------------------------------------------------------- the operators


class Latencies:
    def __init__(self) -> None:
        self.seen: dict[str, float] = {}  # name -> newest stamp handled
        self.values: list[float] = []
        #: When the watch event carrying each stamp reached the informer (kubeloop only).
        self.arrived: dict[str, float] = {}
        self.from_arrival: list[float] = []
        #: Stamps whose watch event arrived and that no reconcile has covered yet, per object.
        self.waiting: dict[str, list[str]] = {}

    def arrival(self, obj: dict[str, Any]) -> None:
        stamp = (obj["metadata"].get("annotations") or {}).get(STAMP)
        if stamp is not None and stamp not in self.arrived:
            self.arrived[stamp] = time.time()
            self.waiting.setdefault(obj["metadata"]["name"], []).append(stamp)

    def observe(self, name: str, annotations: dict[str, str] | None) -> None:
        stamp = (annotations or {}).get(STAMP)
        if stamp is None:
            return
        sent = float(stamp)
        if sent <= self.seen.get(name, 0.0):
            return
        self.seen[name] = sent
        now = time.time()
        # A level-triggered reconcile of the newest state also covers the stamps it superseded:
        # each counts, at this reconcile's time.
        waiting = self.waiting.get(name) or [stamp]
        covered = [s for s in waiting if float(s) <= sent] or [stamp]
        self.waiting[name] = [s for s in waiting if float(s) > sent]
        for each in covered:
            self.values.append(now - float(each))
            if each in self.arrived:
                self.from_arrival.append(now - self.arrived[each])


async def run_kubeloop(
    kubeconfig: str, namespace: str, writer: list[str]
) -> tuple[Latencies, dict[str, Any]]:
    from kubeloop.cache.informer import EventHandler
    from kubeloop.controller.reconcile import Request
    from kubeloop.manager.builder import Builder
    from kubeloop.manager.manager import Manager

    latencies = Latencies()
    async with APIClient(load_kubeconfig(kubeconfig)) as client:
        manager = Manager(client, namespace=namespace)

        async def reconcile(request: Request) -> None:
            obj = await manager.client.get(CONFIGMAP, request.name, namespace=request.namespace)
            latencies.observe(request.name, obj["metadata"].get("annotations"))

        Builder(manager).for_(CONFIGMAP).complete(reconcile)
        manager.informer_for(CONFIGMAP).add_handler(
            EventHandler(on_update_new=lambda new, changed: latencies.arrival(new), on_add=latencies.arrival)
        )
        await manager.start()
        try:
            result = await run_writer(writer)
            await asyncio.sleep(2)
        finally:
            await manager.stop()
    return latencies, result


async def run_kopf(kubeconfig: str, namespace: str, writer: list[str]) -> tuple[Latencies, dict[str, Any]]:
    import kopf

    latencies = Latencies()
    registry = kopf.OperatorRegistry()

    async def on_event(**kwargs: Any) -> None:
        event, name = kwargs["event"], kwargs["name"]
        latencies.observe(name, (event.get("object") or {}).get("metadata", {}).get("annotations"))

    kopf.on.event("", "v1", "configmaps", registry=registry)(on_event)

    register_login(kopf, registry, kubeconfig, namespace)

    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False
        settings.watching.server_timeout = 300

    kopf.on.startup(registry=registry)(configure)
    ready = asyncio.Event()
    stop = asyncio.Event()
    operator = asyncio.create_task(
        kopf.operator(
            registry=registry,
            standalone=True,
            namespaces=[namespace],
            ready_flag=ready,
            stop_flag=stop,
        )
    )
    await asyncio.wait_for(ready.wait(), 60)
    await asyncio.sleep(2)  # kopf's watch streams start after the ready flag
    try:
        result = await run_writer(writer)
        await asyncio.sleep(2)
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(operator, 30)
    return latencies, result


async def run_writer(command: list[str]) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(*command, stdout=subprocess.PIPE)
    out, _ = await process.communicate()
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


def summary(latencies: Latencies, writer: dict[str, Any]) -> dict[str, Any]:
    values = sorted(latencies.values)
    if len(values) < 2:
        return {"stamps_seen": len(values), "writer": writer}
    quantiles = statistics.quantiles(values, n=100)
    result: dict[str, Any] = {
        "p50_ms": round(statistics.median(values) * 1e3, 2),
        "p99_ms": round(quantiles[98] * 1e3, 2),
        "max_ms": round(values[-1] * 1e3, 2),
        "stamps_seen": len(values),
    }
    if len(latencies.from_arrival) > 1:
        # The operator's own share: from the watch event reaching the informer to the reconcile.
        arrival = sorted(latencies.from_arrival)
        result["event_to_reconcile_p50_ms"] = round(statistics.median(arrival) * 1e3, 3)
        result["event_to_reconcile_p99_ms"] = round(statistics.quantiles(arrival, n=100)[98] * 1e3, 3)
    result["writer"] = writer
    return result


async def prepare(kubeconfig: str, namespace: str, objects: int) -> None:
    async with APIClient(load_kubeconfig(kubeconfig)) as client:
        await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        semaphore = asyncio.Semaphore(64)

        async def create(index: int) -> None:
            async with semaphore:
                body = {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": f"cm-{index:05d}"},
                    "data": {"k": "v"},
                }
                await client.create(body, namespace=namespace)

        await asyncio.gather(*(create(i) for i in range(objects)))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--no-kopf", action="store_true")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--writer", nargs=2, metavar=("KUBECONFIG", "NAMESPACE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        kubeconfig, namespace = args.writer
        print(json.dumps(asyncio.run(write(kubeconfig, namespace, args.objects, args.rate, args.seconds))))
        return
    logging.basicConfig(level=logging.WARNING)
    results: dict[str, Any] = {
        "bench": "reconcile_latency",
        "rate": args.rate,
        "seconds": args.seconds,
        "runs": args.runs,
    }
    operators = [("kubeloop", run_kubeloop)] + ([] if args.no_kopf else [("kopf", run_kopf)])
    each_run: list[dict[str, Any]] = []
    for index in range(args.runs):
        run: dict[str, Any] = {}
        with server_process(memory=True) as server:
            for label, runner in operators if index % 2 == 0 else operators[::-1]:
                namespace = f"latency-{label}"
                asyncio.run(prepare(server.kubeconfig, namespace, args.objects))
                writer = [sys.executable, __file__, "--writer", server.kubeconfig, namespace]
                writer += [
                    "--objects",
                    str(args.objects),
                    "--rate",
                    str(args.rate),
                    "--seconds",
                    str(args.seconds),
                ]
                latencies, written = asyncio.run(runner(server.kubeconfig, namespace, writer))
                run[label] = summary(latencies, written)
        each_run.append({"first": next(iter(run)), **run})
    results["each_run"] = each_run
    for label, _runner in operators:
        measured = [run[label] for run in each_run if "p50_ms" in run[label]]
        if measured:
            results[label] = {
                key: round(statistics.median(m[key] for m in measured), 2) for key in ("p50_ms", "p99_ms")
            }
    if "p50_ms" in results.get("kopf", {}) and "p50_ms" in results.get("kubeloop", {}):
        results["kopf_over_kubeloop_p50"] = round(
            results["kopf"]["p50_ms"] / results["kubeloop"]["p50_ms"], 2
        )
        results["kopf_over_kubeloop_p99"] = round(
            results["kopf"]["p99_ms"] / results["kubeloop"]["p99_ms"], 2
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
