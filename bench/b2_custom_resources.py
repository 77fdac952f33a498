"""B2: 10,000 custom resources, each reconciled into an owned ConfigMap and a status with
observedGeneration, on the embedded server: kubeloop beside kopf, in one run.

The server runs as its own process (in memory, and without its control loops unless
``--controllers``: the bench measures the operators, as on a kube-apiserver). The CRD is
generated from the ``Widget`` model below and installed. By default the widgets are created
before the operator starts (a backlog), so the measure is how long an operator takes from its
start until every widget has its ConfigMap and ``status.observedGeneration`` (checked afterwards
by listing both); with ``--stream`` they are created while it runs, by 50 writers at once, as in
a busy cluster (each on its own connection, through the bench's cheapest client, ``_rawhttp``:
on a cluster the writers are other machines', here they share the two cores), and the measure
starts at the first creation. And its peak RSS (VmHWM: each operator runs in its own process).

- ``kubeloop``: the way the docs teach it: ``Builder.for_(Widget, GenerationChanged()).owns(ConfigMap)``
  (kubebuilder's idiom: a controller's own status writes do not wake it), typed models,
  ``create_or_update`` with a controller reference, a status patch when observedGeneration
  lags; ``max_concurrent_reconciles=32`` (``--workers``).
- ``kopf``: at its fastest documented setup: ``@kopf.on.create``/``@kopf.on.update`` async
  handlers that build the ConfigMap, ``kopf.adopt`` it and create it with an async client
  (kubernetes_asyncio), and set ``patch.status['observedGeneration']`` (kopf writes the status
  with its own patch); its workers unlimited (kopf's default and its fastest; ``--kopf-workers``
  limits them); event posting off (as kubeloop here posts none). ``--kopf-handler sync`` runs a
  plain handler with the official client in kopf's threads instead: as fast here (10,000 widgets,
  alternating: async 42.9 and 40.8 s, sync 40.4 and 42.2 s; kopf spends ~4 ms of CPU a widget
  either way).

Each operator runs in its own process as its command runs it: on uvloop (`kubeloop run` and `kopf
run` both use it where it is installed), kubeloop's with the GC tuned as `kubeloop run` tunes it
(``gcpause.tune_for_serving``). The widgets of ``--stream`` come from this process, on uvloop too
(asyncio's TLS in Python took a third of a core from the operators).

Each operator counts the requests it sends (kubeloop's client; every aiohttp request of the kopf
process, kopf's own and its client's): ``requests_per_widget``.

``--pin`` runs the server on CPU 0 and each operator on CPU 1: on 2 cores the scheduler's
placement alone moves kopf between ~27 and ~48 s (its handler threads and the GIL across cores),
so pinned runs are the steadier comparison. ``--runs N`` measures N times (a fresh server each)
and reports medians: this machine's speed drifts by ~15 % over minutes.

Prints one JSON line: per operator the convergence seconds, widgets/s, peak RSS in MiB, its CPU
seconds (``cpu_s`` with its imports and startup, ``run_cpu_s`` from its start to convergence),
the server's over its run and, with ``--stream``, the 50 writers' (``writers_cpu_s``: on two
cores the server, the operator and the writers share the machine), and kopf/kubeloop ratios (the target in docs/design/performance.md: ≥ 5× kopf's
throughput, ≤ 1/3 of its memory): of the medians, and with ``--runs`` each run's as well.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any

import orjson
import uvloop

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _kopf import register_login
from _rawhttp import HTTPError, connect, post
from _server import ServerProcess, server_process

import kubeloop
from kubeloop.client.config import load_kubeconfig
from kubeloop.gcpause import tune_for_serving

GROUP = "bench.kubeloop.dev"


class WidgetSpec(kubeloop.KubeModel):
    size: int = 1
    color: str = "blue"


class WidgetStatus(kubeloop.KubeModel):
    observed_generation: int | None = None


class Widget(kubeloop.CustomResource, group=GROUP, version="v1"):
    spec: WidgetSpec = WidgetSpec()
    status: WidgetStatus | None = None


# ----------------------------------------------------------------------------- the operators


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return round(usage.ru_utime + usage.ru_stime, 2)


def peak_rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def say_ready() -> None:
    """Tell the bench (``--stream``) that the operator runs: it starts creating widgets now."""
    print("ready", flush=True)


async def operate_kubeloop(
    kubeconfig: str, namespace: str, count: int, workers: int, stream: bool = False
) -> dict[str, Any]:
    from kubeloop.models import core_v1

    done: set[str] = set()
    finished = asyncio.Event()
    async with kubeloop.APIClient(load_kubeconfig(kubeconfig)) as client:
        manager = kubeloop.Manager(client, namespace=namespace)

        async def reconcile(request: kubeloop.Request) -> None:
            try:
                widget = await manager.client.get(Widget, request.name, namespace=request.namespace)
            except kubeloop.errors.NotFound:
                return

            def mutate(config_map: core_v1.ConfigMap) -> None:
                kubeloop.set_controller_reference(widget, config_map)
                config_map.data = {"size": str(widget.spec.size), "color": widget.spec.color}

            wanted = core_v1.ConfigMap(
                metadata=kubeloop.ObjectMeta(name=request.name, namespace=request.namespace)
            )
            await kubeloop.create_or_update(manager.client, wanted, mutate)
            generation = widget.metadata.generation
            if widget.status is None or widget.status.observed_generation != generation:
                patch = {"status": {"observedGeneration": generation}}
                await manager.client.patch(widget, None, patch, subresource="status")
            done.add(request.name)
            if len(done) >= count:
                finished.set()

        (
            kubeloop.Builder(manager)
            .for_(Widget, kubeloop.predicate.GenerationChanged())  # its own status writes wake nothing
            .owns(core_v1.ConfigMap)
            .with_options(max_concurrent_reconciles=workers)
            .complete(reconcile)
        )
        tune_for_serving()  # as `kubeloop run` does once the operator is set up
        started, cpu_started = time.perf_counter(), cpu_seconds()
        await manager.start()
        if stream:  # measured from the first widget's creation, as the cluster sees it
            say_ready()
            started, cpu_started = time.perf_counter(), cpu_seconds()
        try:
            await finished.wait()
            converged, run_cpu = time.perf_counter() - started, cpu_seconds() - cpu_started
            requests = sum(client.requests.values())
        finally:
            await manager.stop()
    return {
        "converged_s": round(converged, 2),
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "cpu_s": cpu_seconds(),
        "run_cpu_s": round(run_cpu, 2),
        "requests_per_widget": round(requests / count, 2),
    }


def count_aiohttp_requests() -> Counter[str]:
    """Count every request an aiohttp session sends in this process, by method (kopf and
    kubernetes_asyncio both talk through aiohttp): requests per widget, measured as for kubeloop."""
    import aiohttp

    sent: Counter[str] = Counter()
    original = aiohttp.ClientSession._request

    async def counted(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        sent[method.upper()] += 1
        return await original(self, method, *args, **kwargs)

    aiohttp.ClientSession._request = counted  # type: ignore[method-assign]
    return sent


async def operate_kopf(
    kubeconfig: str, namespace: str, count: int, workers: int, handler: str = "async", stream: bool = False
) -> dict[str, Any]:
    """kopf at its fastest documented setup: an async handler with an async client
    (kubernetes_asyncio), event posting off, and the status written as kopf writes it (the
    handler's ``patch``); its workers unlimited (0, kopf's default and its fastest: 2,000
    widgets in 8.3 s, against 12.9 s with kubeloop's 32 and a 0.1 s idle timeout) or limited to
    ``workers``."""
    import kopf
    import kubernetes_asyncio

    sent = count_aiohttp_requests()
    await kubernetes_asyncio.config.load_kube_config(kubeconfig)
    api = kubernetes_asyncio.client.ApiClient()
    core = kubernetes_asyncio.client.CoreV1Api(api)
    done: set[str] = set()
    finished = asyncio.Event()
    registry = kopf.OperatorRegistry()

    def config_map_of(kwargs: dict[str, Any]) -> Any:
        spec = kwargs["spec"]
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": kwargs["name"]},
            "data": {"size": str(spec.get("size", 1)), "color": spec.get("color", "blue")},
        }
        kopf.adopt(config_map)
        return config_map

    def handled(kwargs: dict[str, Any]) -> None:
        kwargs["patch"].status["observedGeneration"] = kwargs["meta"].get("generation")
        done.add(kwargs["name"])
        if len(done) >= count:
            loop.call_soon_threadsafe(finished.set)

    async def reconcile(**kwargs: Any) -> None:
        name, namespace, config_map = kwargs["name"], kwargs["namespace"], config_map_of(kwargs)
        try:
            await core.create_namespaced_config_map(namespace, config_map)
        except kubernetes_asyncio.client.ApiException as error:
            if error.status != 409:
                raise
            await core.replace_namespaced_config_map(name, namespace, config_map)
        handled(kwargs)

    def reconcile_in_a_thread(**kwargs: Any) -> None:
        import kubernetes

        name, namespace, config_map = kwargs["name"], kwargs["namespace"], config_map_of(kwargs)
        try:
            sync_core.create_namespaced_config_map(namespace, config_map)
        except kubernetes.client.ApiException as error:
            if error.status != 409:
                raise
            sync_core.replace_namespaced_config_map(name, namespace, config_map)
        handled(kwargs)

    loop = asyncio.get_running_loop()
    if handler == "sync":  # the official (blocking) client, in kopf's handler threads
        import kubernetes
        import urllib3

        kubernetes.config.load_kube_config(kubeconfig)
        sync_core: Any = kubernetes.client.CoreV1Api()
        urlopen = urllib3.connectionpool.HTTPConnectionPool.urlopen

        def counted_urlopen(self: Any, method: str, *args: Any, **kw: Any) -> Any:
            sent[method.upper()] += 1
            return urlopen(self, method, *args, **kw)

        urllib3.connectionpool.HTTPConnectionPool.urlopen = counted_urlopen  # type: ignore[method-assign]
    chosen: Any = reconcile_in_a_thread if handler == "sync" else reconcile
    kopf.on.create(GROUP, "v1", "widgets", registry=registry)(chosen)
    kopf.on.update(GROUP, "v1", "widgets", registry=registry)(chosen)

    register_login(kopf, registry, kubeconfig, namespace)

    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False
        if workers:
            # kopf keeps a worker per object, idle for idle_timeout after its last event (5 s):
            # under a limit, each slot would sit idle that long (300 widgets, 32 workers: 46 s).
            settings.queueing.worker_limit = workers
            settings.queueing.idle_timeout = 0.1

    kopf.on.startup(registry=registry)(configure)
    stop, ready = asyncio.Event(), asyncio.Event()
    started, cpu_started = time.perf_counter(), cpu_seconds()
    operator = asyncio.create_task(
        kopf.operator(registry=registry, standalone=True, namespaces=[namespace], stop_flag=stop, ready_flag=ready)
    )
    if stream:  # measured from the first widget's creation, as the cluster sees it
        await ready.wait()
        say_ready()
        started, cpu_started = time.perf_counter(), cpu_seconds()
    try:
        await finished.wait()
        converged, run_cpu = time.perf_counter() - started, cpu_seconds() - cpu_started
        requests = sum(sent.values())
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(operator, 60)
        await api.close()
    return {
        "converged_s": round(converged, 2),
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "cpu_s": cpu_seconds(),
        "run_cpu_s": round(run_cpu, 2),
        "requests_per_widget": round(requests / count, 2),
    }


# ----------------------------------------------------------------------------- the run


async def prepare(kubeconfig: str, namespace: str, count: int) -> None:
    from kubeloop.crd import install_crds  # the bench's, not the operators' (their processes skip it)

    async with kubeloop.APIClient(load_kubeconfig(kubeconfig)) as client:
        await install_crds(client, Widget)
        await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        semaphore = asyncio.Semaphore(64)

        async def create(index: int) -> None:
            async with semaphore:
                widget = Widget(
                    metadata=kubeloop.ObjectMeta(name=f"w-{index:05d}"), spec=WidgetSpec(size=index)
                )
                await client.create(widget, namespace=namespace)

        await asyncio.gather(*(create(i) for i in range(count)))


#: Clients creating the widgets at once in ``--stream`` (a busy cluster's writers).
STREAM_CLIENTS = 50


async def create_widgets(server: ServerProcess, namespace: str, count: int, clients: int) -> None:
    """``count`` widgets created by ``clients`` writers at once, each on its own connection, as
    the bench's cheapest client sends them (:mod:`_rawhttp`): on a cluster the writers are other
    machines', here they share the two cores with the server and the operator."""
    path = f"/apis/{GROUP}/v1/namespaces/{namespace}/widgets"
    connections = [await connect(server.url, server.ca_file) for _ in range(clients)]

    async def write(which: int) -> None:
        for index in range(which, count, clients):
            widget = {
                "apiVersion": f"{GROUP}/v1",
                "kind": "Widget",
                "metadata": {"name": f"w-{index:05d}", "namespace": namespace},
                "spec": {"size": index, "color": "blue"},
            }
            status, body = await connections[which].send(post(server.url, path, server.token, orjson.dumps(widget)))
            if status != 201:
                raise HTTPError(f"creating widget {index}: {status} {body[:300]!r}")

    try:
        await asyncio.gather(*(write(which) for which in range(clients)))
    finally:
        for connection in connections:
            connection.close()


async def verify(kubeconfig: str, namespace: str, count: int) -> bool:
    """Every widget has its owned ConfigMap and an observedGeneration equal to its generation."""
    async with kubeloop.APIClient(load_kubeconfig(kubeconfig)) as client:
        widgets = await client.list(kubeloop.GroupVersionKind(GROUP, "v1", "Widget"), namespace=namespace)
        config_maps = await client.list(kubeloop.kinds.ConfigMap, namespace=namespace)
    owned = {
        cm["metadata"]["name"]
        for cm in config_maps
        if any(ref.get("kind") == "Widget" for ref in cm["metadata"].get("ownerReferences") or ())
    }
    observed = [
        w
        for w in widgets
        if (w.get("status") or {}).get("observedGeneration") == w["metadata"]["generation"]
        and w["metadata"]["name"] in owned
    ]
    return len(widgets) == count and len(observed) == count


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU of another process so far (``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_operator(
    label: str,
    server: ServerProcess,
    namespace: str,
    count: int,
    workers: int,
    cpus: set[int] | None = None,
    kopf_workers: int = 0,
    kopf_handler: str = "async",
    stream: bool = False,
) -> dict[str, Any]:
    """One operator's run in its own process; with ``stream`` the widgets are created (by
    :data:`STREAM_CLIENTS` clients, from this process) once it says it runs."""
    command = [sys.executable, __file__, "--operator", label, server.kubeconfig, namespace, "--count", str(count)]
    command += ["--stream"] if stream else []
    command += [
        "--workers",
        str(workers),
        "--kopf-workers",
        str(kopf_workers),
        "--kopf-handler",
        kopf_handler,
    ]
    with tempfile.TemporaryFile("w+") as errors, subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=errors,  # a file: a full pipe would hold the operator up while widgets are made
        text=True,
        env={**os.environ},
        preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus),
    ) as operator:
        assert operator.stdout is not None
        writers_cpu = 0.0
        if stream:
            if operator.stdout.readline() != "ready\n":
                operator.kill()
            else:
                started = cpu_seconds()
                uvloop.run(create_widgets(server, namespace, count, STREAM_CLIENTS))
                writers_cpu = cpu_seconds() - started
        out, _ = operator.communicate(timeout=3600)
        if operator.returncode != 0:
            errors.seek(0)
            raise RuntimeError(f"{label} operator failed:\n{errors.read()[-3000:]}")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    if stream:  # the writers share the two cores with the server and the operator
        result["writers_cpu_s"] = round(writers_cpu, 2)
    return result


def measure_once(args: argparse.Namespace, labels: list[str]) -> dict[str, dict[str, Any]]:
    """One run of each operator in ``labels``, in turn, on a fresh server."""
    results: dict[str, dict[str, Any]] = {}
    with server_process(memory=True, cpus={0} if args.pin else None, controllers=args.controllers) as server:
        for label in labels:
            namespace = f"b2-{label}"
            asyncio.run(prepare(server.kubeconfig, namespace, 0 if args.stream else args.count))
            server_cpu = process_cpu_seconds(server.pid)
            run = run_operator(
                label,
                server,
                namespace,
                args.count,
                args.workers,
                {1} if args.pin else None,
                args.kopf_workers,
                args.kopf_handler,
                args.stream,
            )
            run["server_cpu_s"] = round(process_cpu_seconds(server.pid) - server_cpu, 2)
            run["verified"] = asyncio.run(verify(server.kubeconfig, namespace, args.count))
            run["widgets_per_s"] = round(args.count / run["converged_s"], 1)
            results[label] = run
    return results


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over ``runs`` (verified only when every run was)."""
    out: dict[str, Any] = {}
    for key, value in runs[0].items():
        if isinstance(value, bool):
            out[key] = all(run[key] for run in runs)
        else:
            out[key] = round(statistics.median(run[key] for run in runs), 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--no-kopf", action="store_true")
    parser.add_argument(
        "--runs",
        type=int,
        default=3,
        help="measure N times, each on a fresh server, and report each figure's median (this "
        "machine's speed drifts by ~15%% over minutes; kopf's peak RSS by more)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=32,
        help="kubeloop's max_concurrent_reconciles and kopf's worker_limit (default 32, kubeloop's "
        "fastest here: medians of three pinned runs 8: 6.9 s, 16: 6.6 s, 32: 5.7 s, 64: 5.9 s, "
        "128: 6.1 s)",
    )
    parser.add_argument(
        "--kopf-workers",
        type=int,
        default=0,
        help="kopf's worker_limit (default 0: unlimited, kopf's default and its fastest here)",
    )
    parser.add_argument(
        "--kopf-handler",
        choices=["async", "sync"],
        default="async",
        help="kopf's handler: async with kubernetes_asyncio (default), or a plain function with the "
        "official client, which kopf runs in threads",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="the server on CPU 0, each operator on CPU 1 (the scheduler's placement moves kopf's "
        "time by up to 1.7x on 2 cores)",
    )
    parser.add_argument(
        "--controllers",
        action="store_true",
        help="run the server with its control loops (garbage collector, namespace controller); "
        "by default it serves the API alone, as kube-apiserver",
    )
    parser.add_argument(
        "--stream",
        action="store_true",
        help=f"create the widgets while the operator runs ({STREAM_CLIENTS} clients at once), as a busy "
        "cluster does, and time from the first creation until all are reconciled; by default they "
        "are all created before the operator starts (a backlog)",
    )
    parser.add_argument(
        "--operator", nargs=3, metavar=("LABEL", "KUBECONFIG", "NAMESPACE"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.operator:
        label, kubeconfig, namespace = args.operator
        # Each on the loop its command line runs it on: uvloop, for `kubeloop run` and `kopf run` alike.
        if label == "kubeloop":
            kubeloop_run = operate_kubeloop(kubeconfig, namespace, args.count, args.workers, args.stream)
            print(json.dumps(uvloop.run(kubeloop_run)))
        else:
            kopf_run = operate_kopf(
                kubeconfig, namespace, args.count, args.kopf_workers, args.kopf_handler, args.stream
            )
            print(json.dumps(uvloop.run(kopf_run)))
        return
    results: dict[str, Any] = {
        "bench": "b2_custom_resources",
        "count": args.count,
        "mode": "stream" if args.stream else "backlog",
        "pinned": args.pin,
        "server_controllers": args.controllers,
        "kubeloop_workers": args.workers,
        "kopf_worker_limit": args.kopf_workers or None,
        "kopf_handler": args.kopf_handler,
        "runs": args.runs,
    }
    labels = ["kubeloop"] + ([] if args.no_kopf else ["kopf"])
    # Every other run the other operator goes first: the machine's speed drifts within a run too.
    runs = [measure_once(args, labels if index % 2 == 0 else labels[::-1]) for index in range(args.runs)]
    results["each_run"] = [{"first": next(iter(run)), **run} for run in runs]
    for label in labels:
        results[label] = median_run([run[label] for run in runs])
    if "kopf" in results:
        # Ratios of the medians (each operator's median run), and each run's own for the spread.
        results["throughput_kubeloop_over_kopf"] = round(
            results["kubeloop"]["widgets_per_s"] / results["kopf"]["widgets_per_s"], 2
        )
        results["memory_kubeloop_over_kopf"] = round(
            results["kubeloop"]["peak_rss_mib"] / results["kopf"]["peak_rss_mib"], 2
        )
        if args.runs > 1:
            results["throughput_ratios"] = [
                round(run["kubeloop"]["widgets_per_s"] / run["kopf"]["widgets_per_s"], 2) for run in runs
            ]
            results["memory_ratios"] = [
                round(run["kubeloop"]["peak_rss_mib"] / run["kopf"]["peak_rss_mib"], 2) for run in runs
            ]
    print(json.dumps(results))


if __name__ == "__main__":
    main()
