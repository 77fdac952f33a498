"""The metrics endpoint (scraped over HTTP) shows controller-runtime's series; /healthz, /readyz."""

from __future__ import annotations

import asyncio
import re
import socket
from collections import Counter

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.core import HistogramMetricFamily

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.client.config import ClientConfig
from kubeloop.client.rest import APIClient
from kubeloop.controller.reconcile import Request, TerminalError
from kubeloop.histogram import LocalHistogram
from kubeloop.manager.builder import Builder
from kubeloop.manager.leaderelection import LeaderElectionConfig
from kubeloop.manager.manager import Manager
from tests.conftest import eventually

CONFIGMAP = GroupVersionKind("", "v1", "ConfigMap")


def sample(text: str, metric: str, **labels: str) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        match = re.match(r"^([a-z_]+)\{(.*)\} (\S+)$", line)
        if match and match[1] == metric and ",".join(sorted(match[2].split(","))) == wanted:
            return float(match[3])
    raise AssertionError(f"no sample {metric}{{{wanted}}}")


@pytest.mark.kubeloop(reconcile_failures=True)  # a KeyError on purpose: a panic to count
async def test_metrics_and_probes(client: APIClient, namespace: str) -> None:
    calls: Counter[str] = Counter()

    async def reconcile(request: Request) -> None:
        calls[request.name] += 1
        if request.name == "m" and calls["m"] == 1:
            raise RuntimeError("first attempt fails")  # an error, not a panic
        if request.name == "bug" and calls["bug"] == 1:
            raise KeyError("spec")  # a bug: a panic, and an error
        if request.name == "doomed":
            raise TerminalError("cannot be retried")  # a terminal error, and an error
        if request.name == "slow" and calls["slow"] == 1:
            await asyncio.Event().wait()  # ended by the reconcile timeout: a timeout, an error

    for name in ("m", "bug", "doomed", "slow"):
        await client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}
        )
    manager = Manager(
        client,
        namespace=namespace,
        metrics_bind_address="127.0.0.1:0",
        health_probe_bind_address="127.0.0.1:0",
        leader_election=LeaderElectionConfig(f"metrics-{namespace}", namespace=namespace, retry_period=0.2),
    )
    Builder(manager).for_(CONFIGMAP).with_options(
        max_concurrent_reconciles=2, reconcile_timeout=0.2
    ).complete(reconcile)
    await manager.start()
    try:
        await eventually(
            lambda: calls["m"] >= 2 and calls["bug"] >= 2 and calls["doomed"] == 1 and calls["slow"] >= 2
        )
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://{manager.health_address}/healthz") as response:
                assert response.status == 200
            async with http.get(f"http://{manager.health_address}/readyz") as response:
                assert response.status == 200
            async with http.get(f"http://{manager.metrics_address}/metrics") as response:
                assert response.status == 200
                text = await response.text()
        c = {"controller": "configmap"}
        q = {"name": "configmap", "controller": "configmap"}
        assert sample(text, "controller_runtime_reconcile_total", result="success", **c) >= 1
        assert sample(text, "controller_runtime_reconcile_total", result="error", **c) == 4
        # Every error, terminal ones included (as upstream counts them).
        assert sample(text, "controller_runtime_reconcile_errors_total", **c) == 4
        assert sample(text, "controller_runtime_reconcile_panics_total", **c) == 1  # the KeyError only
        assert sample(text, "controller_runtime_terminal_reconcile_errors_total", **c) == 1
        assert sample(text, "controller_runtime_reconcile_timeouts_total", **c) == 1
        assert sample(text, "controller_runtime_max_concurrent_reconciles", **c) == 2
        assert sample(text, "controller_runtime_active_workers", **c) == 0
        assert sample(text, "controller_runtime_reconcile_time_seconds_count", **c) >= 2
        assert sample(text, "workqueue_adds_total", **q) >= 2
        assert sample(text, "workqueue_retries_total", **q) == 3  # the terminal error is not retried
        assert sample(text, "workqueue_depth", priority="0", **q) == 0  # the priority queue, the default
        assert sample(text, "workqueue_queue_duration_seconds_count", **q) >= 2
        assert sample(text, "workqueue_work_duration_seconds_count", **q) >= 2
        # Histograms: cumulative buckets up to +Inf (= the count), a sum, client-go's bounds.
        count = sample(text, "workqueue_queue_duration_seconds_count", **q)
        assert sample(text, "workqueue_queue_duration_seconds_bucket", le="+Inf", **q) == count
        assert sample(text, "workqueue_queue_duration_seconds_bucket", le="1e-08", **q) <= count
        assert sample(text, "workqueue_queue_duration_seconds_sum", **q) > 0
        reconciles = sample(text, "controller_runtime_reconcile_time_seconds_count", **c)
        assert sample(text, "controller_runtime_reconcile_time_seconds_bucket", le="60.0", **c) == reconciles
        assert sample(text, "controller_runtime_reconcile_time_seconds_bucket", le="0.005", **c) >= 1
        assert sample(text, "workqueue_unfinished_work_seconds", **q) == 0
        assert sample(text, "workqueue_longest_running_processor_seconds", **q) == 0
        assert sample(text, "leader_election_master_status", name=f"metrics-{namespace}") == 1
    finally:
        await manager.stop()


async def test_health_checks_readyz_fails_until_caches_sync() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    async with APIClient(ClientConfig(server=f"http://127.0.0.1:{dead}")) as unreachable:
        manager = Manager(unreachable, health_probe_bind_address="127.0.0.1:0", cache_sync_timeout=2)
        manager.informer_for(CONFIGMAP)
        broken = {"now": False}

        async def database() -> None:
            if broken["now"]:
                raise ConnectionError("db down")

        manager.add_healthz_check("database", database)
        with pytest.raises(ValueError, match="already exists"):
            manager.add_healthz_check("database", database)
        starting = asyncio.ensure_future(manager.start())
        await eventually(lambda: bool(manager.health_address))
        base = f"http://{manager.health_address}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/readyz") as response:
                assert response.status == 500  # controller-runtime answers failed checks with 500
                assert await response.text() == "[-]caches failed: reason withheld\nreadyz check failed\n"
            async with http.get(f"{base}/healthz") as response:
                assert response.status == 200 and await response.text() == "ok"
            async with http.get(f"{base}/healthz?verbose") as response:
                assert await response.text() == "[+]ping ok\n[+]database ok\nhealthz check passed\n"
            broken["now"] = True
            async with http.get(f"{base}/healthz") as response:
                assert response.status == 500
                assert "[-]database failed: reason withheld" in await response.text()
            async with http.get(f"{base}/healthz/ping") as response:
                assert response.status == 200
            async with http.get(f"{base}/healthz/nope") as response:
                assert response.status == 404
        with pytest.raises(TimeoutError):
            await starting
        await manager.stop()


@given(st.lists(st.sampled_from([0.0, 1e-9, 1e-8, 5e-6, 1e-3, 0.5, 1.0, 10.0, 11.0, 1e6]), max_size=30))
def test_local_histogram_buckets_are_cumulative_and_inclusive(values: list[float]) -> None:
    histogram = LocalHistogram((1e-8, 1e-3, 1.0, 10.0))
    for value in values:
        histogram.observe(value)
    family = HistogramMetricFamily("h", "help", labels=["x"])
    histogram.add_to(family, ["y"])
    buckets = {s.labels["le"]: s.value for s in family.samples if s.name == "h_bucket"}
    for bound, label in ((1e-8, "1e-08"), (1e-3, "0.001"), (1.0, "1.0"), (10.0, "10.0")):
        assert buckets[label] == sum(1 for v in values if v <= bound)  # Prometheus's le is inclusive
    assert buckets["+Inf"] == len(values)
    assert [s.value for s in family.samples if s.name == "h_sum"] == [pytest.approx(sum(values))]


#: controller-runtime's metric names and label names, taken from its source (HEAD after v0.24):
#: pkg/internal/controller/metrics/metrics.go, pkg/internal/metrics/workqueue.go,
#: pkg/metrics/client_go_adapter.go (the one family it registers by default),
#: pkg/metrics/leaderelection.go, pkg/certwatcher/metrics/metrics.go,
#: pkg/webhook/internal/metrics/metrics.go, pkg/webhook/{admission,conversion}/metrics/metrics.go.
UPSTREAM_METRICS = {
    "controller_runtime_reconcile_total": {"controller", "result"},
    "controller_runtime_reconcile_errors_total": {"controller"},
    "controller_runtime_terminal_reconcile_errors_total": {"controller"},
    "controller_runtime_reconcile_panics_total": {"controller"},
    "controller_runtime_reconcile_time_seconds": {"controller"},
    "controller_runtime_max_concurrent_reconciles": {"controller"},
    "controller_runtime_active_workers": {"controller"},
    "controller_runtime_reconcile_timeouts_total": {"controller"},
    "workqueue_depth": {"name", "controller", "priority"},
    "workqueue_adds_total": {"name", "controller"},
    "workqueue_queue_duration_seconds": {"name", "controller"},
    "workqueue_work_duration_seconds": {"name", "controller"},
    "workqueue_unfinished_work_seconds": {"name", "controller"},
    "workqueue_longest_running_processor_seconds": {"name", "controller"},
    "workqueue_retries_total": {"name", "controller"},
    "rest_client_requests_total": {"code", "method", "host"},
    "leader_election_master_status": {"name"},
    "leader_election_slowpath_total": {"name"},
    "certwatcher_read_certificate_total": set(),
    "certwatcher_read_certificate_errors_total": set(),
    "controller_runtime_webhook_requests_total": {"webhook", "code"},
    "controller_runtime_webhook_requests_in_flight": {"webhook"},
    "controller_runtime_webhook_latency_seconds": {"webhook"},
    "controller_runtime_webhook_panics_total": set(),
    "controller_runtime_conversion_webhook_panics_total": set(),
}


async def test_metric_names_and_labels_are_controller_runtimes(client: APIClient, namespace: str) -> None:
    """Every family controller-runtime registers by default is served, under its name and with
    its label names, by a manager with a controller, leader election and a webhook server (its
    webhook asked once), so a dashboard made for a Go operator reads a kubeloop one."""
    import kubeloop
    from kubeloop import kinds
    from kubeloop.testing import webhooks_installed

    manager = Manager(
        client,
        metrics_bind_address="127.0.0.1:0",
        leader_election=LeaderElectionConfig(f"names-{namespace}", namespace=namespace, retry_period=0.2),
        webhook_server=kubeloop.WebhookServer(port=0),
    )
    Builder(manager).for_(CONFIGMAP).complete(lambda request: None)
    kubeloop.WebhookBuilder(manager).for_(kinds.ConfigMap).with_defaulter(lambda obj: None).complete()
    async with manager, webhooks_installed(client, manager):
        await client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "asked", "namespace": namespace}})
        await eventually(lambda: manager.elector is not None and manager.elector.is_leader)
        async with aiohttp.ClientSession() as http, http.get(f"http://{manager.metrics_address}/metrics") as response:
            text = await response.text()
    served: dict[str, set[str]] = {}
    for line in text.splitlines():
        found = re.match(r"^([a-z_]+)(?:\{(.*)\})? ", line)
        if found is None:
            continue
        name = re.sub(r"_(bucket|sum|count)$", "", found[1]) if found[1].endswith(("_bucket", "_sum", "_count")) else found[1]
        labels = {pair.split("=", 1)[0] for pair in re.findall(r'[a-z_]+="[^"]*"', found[2] or "")} - {"le"}
        served.setdefault(name, set()).update(labels)
    missing = {name for name in UPSTREAM_METRICS if name not in served}
    assert not missing, missing
    assert {name: served[name] for name in UPSTREAM_METRICS} == UPSTREAM_METRICS
