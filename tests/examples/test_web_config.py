"""The second example end to end, as a user runs it: ``kubeloop run examples/web_config`` driven by
kubectl (the oldest and the newest on the machine) — a labelled ConfigMap gets an owned
Deployment, an Event and a status annotation; changing the ConfigMap changes the Deployment; an
unlabelled one is left alone; a bad replica count is a Warning Event, not a retry loop. And on the
durable embedded server (``--embedded --data-dir``): SIGKILLed right after a change, restarted on
the same directory, it finds everything it made and converges on the change."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import ServerThread
from tests.examples.test_hello_label import KUBECTLS, ROOT, kubectl, ready_line, start_operator, stop_operator


def config_map(name: str, image: str, replicas: int | str, *, labelled: bool = True) -> str:
    labels = {"web.example.com/deploy": "true"} if labelled else {}
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels},
            "data": {"image": image, "replicas": str(replicas)},
        }
    )


def wait_until(get: Callable[[], Any], check: Callable[[Any], bool], timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = get()
        if check(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached: {value}")
        time.sleep(0.1)


class Cluster:
    """kubectl (one binary) against one kubeconfig and namespace."""

    def __init__(self, kubeconfig: str, namespace: str, binary: pathlib.Path) -> None:
        self.kubeconfig, self.namespace, self.binary = kubeconfig, namespace, binary

    def run(self, *args: str, stdin: str | None = None) -> str:
        return kubectl(self.kubeconfig, "-n", self.namespace, *args, stdin=stdin, binary=self.binary)

    def get(self, *args: str) -> Any:
        return json.loads(self.run("get", "-o", "json", *args))

    def apply(self, manifest: str) -> None:
        self.run("apply", "-f", "-", stdin=manifest)

    def deployment(self) -> Any:
        found = self.get("deployments", "--field-selector", "metadata.name=web")["items"]
        return found[0] if found else None

    def reasons(self, name: str) -> list[str]:
        events = self.get("events", "--field-selector", f"involvedObject.name={name}")["items"]
        return sorted(e["reason"] for e in events)

    def status(self) -> str | None:
        annotations = self.get("configmap", "web")["metadata"].get("annotations") or {}
        return annotations.get("web.example.com/status")


@pytest.mark.parametrize("binary", KUBECTLS, ids=[path.name for path in KUBECTLS])
def test_web_config_operator(shared_server: ServerThread, namespace: str, binary: pathlib.Path) -> None:
    kubeconfig = str(shared_server.kubeconfig)
    cluster = Cluster(kubeconfig, namespace, binary)
    process = start_operator("--kubeconfig", kubeconfig, "--namespace", namespace, example="web_config")
    try:
        cluster.apply(config_map("web", "nginx:1.25", 2))
        cluster.apply(config_map("other", "x", 1, labelled=False))
        made = wait_until(cluster.deployment, lambda d: d is not None)
        assert made["spec"]["replicas"] == 2
        assert made["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
        owner = made["metadata"]["ownerReferences"][0]
        config = cluster.get("configmap", "web")
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            "ConfigMap",
            "web",
            config["metadata"]["uid"],
            True,
        )
        wait_until(cluster.status, lambda s: s == "0/2 ready")

        # Level-triggered: change the ConfigMap and the Deployment follows.
        cluster.apply(config_map("web", "nginx:1.27", 3))
        changed = wait_until(cluster.deployment, lambda d: d["spec"]["replicas"] == 3)
        assert changed["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
        assert wait_until(lambda: cluster.reasons("web"), lambda r: r == ["Created", "Updated"])
        described = cluster.run("describe", "configmap", "web")
        assert "Deployment web created" in described and "Deployment web updated" in described
        # The unlabelled ConfigMap got nothing.
        assert [d["metadata"]["name"] for d in cluster.get("deployments")["items"]] == ["web"]

        # Bad input: a Warning Event, the Deployment left as it was, no retry loop.
        cluster.apply(config_map("web", "nginx:1.27", "three"))
        wait_until(lambda: cluster.reasons("web"), lambda r: "InvalidReplicas" in r)
        cluster.apply(config_map("web", "nginx:1.27", "99999999999"))  # beyond int32

        def invalid_replicas() -> list[dict[str, Any]]:
            return [e for e in cluster.get("events")["items"] if e["reason"] == "InvalidReplicas"]

        wait_until(invalid_replicas, lambda warnings: sum(e.get("count", 1) for e in warnings) == 2)
        # A later change the operator acts on: a retry of the bad one (back-off from 5 ms) would
        # have come before this is done.
        cluster.apply(config_map("marker", "nginx:1.27", 1))
        wait_until(lambda: cluster.reasons("marker"), lambda r: r == ["Created"])
        warnings = invalid_replicas()
        assert {e["type"] for e in warnings} == {"Warning"}
        assert sum(e.get("count", 1) for e in warnings) == 2  # once each: terminal, not retried
        assert cluster.deployment()["spec"]["replicas"] == 3
    finally:
        output = stop_operator(process)
    assert "1 controller(s) starting" in output
    assert output.count("failed for good") == 2, output  # the two bad inputs, each terminal
    assert "failed; retrying" not in output, output
    assert "Traceback" not in output  # bad input was terminal: nothing raised and retried


def start_embedded(data_dir: pathlib.Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "kubeloop.cli.main", "run", str(ROOT / "examples" / "web_config"),
         "--embedded", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    line = ready_line(process)
    assert "ready at" in line, line
    return process, line.rsplit("kubeconfig=", 1)[1].strip()


def test_web_config_on_the_durable_server_across_sigkill(tmp_path: pathlib.Path) -> None:
    data_dir = tmp_path / "data"
    process, kubeconfig = start_embedded(data_dir)
    cluster = Cluster(kubeconfig, "default", KUBECTLS[0])
    try:
        cluster.apply(config_map("web", "nginx:1.25", 2))
        made = wait_until(cluster.deployment, lambda d: d is not None and d["spec"]["replicas"] == 2)
        wait_until(cluster.status, lambda s: s == "0/2 ready")
        wait_until(lambda: cluster.reasons("web"), lambda r: r == ["Created"])
        # A change, and the process killed before (or while) the operator acts on it.
        cluster.apply(config_map("web", "nginx:1.27", 4))
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    process, kubeconfig = start_embedded(data_dir)
    try:
        cluster = Cluster(kubeconfig, "default", KUBECTLS[-1])
        # Everything acknowledged before the kill is there; the operator converges on the change.
        converged = wait_until(cluster.deployment, lambda d: d["spec"]["replicas"] == 4)
        assert converged["metadata"]["uid"] == made["metadata"]["uid"]  # the same Deployment, kept
        assert converged["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
        wait_until(cluster.status, lambda s: s == "0/4 ready")
        # Events are best effort (as client-go's): one the kill caught still in the recorder's
        # queue is gone, and a restart that finds the Deployment already right records nothing.
        assert cluster.reasons("web") in (["Created"], ["Created", "Updated"])
        assert [d["metadata"]["name"] for d in cluster.get("deployments")["items"]] == ["web"]
        # The restarted operator acts on changes as before.
        cluster.apply(config_map("web", "nginx:1.28", 1))
        wait_until(cluster.status, lambda s: s == "0/1 ready")
        assert cluster.deployment()["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"
        assert wait_until(lambda: cluster.reasons("web")[-1], lambda r: r == "Updated")
    finally:
        stop_operator(process)
