"""The second example end to end: ``kubeloop run examples/web_config`` against the shared server,
driven by kubectl — a labelled ConfigMap gets an owned Deployment, an Event and a status
annotation; changing the ConfigMap changes the Deployment; an unlabelled one is left alone."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import ServerThread
from tests.test_hello_label import KUBECTLS, kubectl, start_operator, stop_operator

pytestmark = pytest.mark.skipif(not KUBECTLS, reason="no kubectl binary on this machine")


def config_map(name: str, image: str, replicas: int, *, labelled: bool = True) -> str:
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


def test_web_config_operator(shared_server: ServerThread, namespace: str) -> None:
    kubeconfig = str(shared_server.kubeconfig)

    def get(*args: str) -> Any:
        return json.loads(kubectl(kubeconfig, "get", "-n", namespace, "-o", "json", *args))

    def deployment() -> Any:
        found = get("deployments", "--field-selector", "metadata.name=web")["items"]
        return found[0] if found else None

    process = start_operator("--kubeconfig", kubeconfig, "--namespace", namespace, example="web_config")
    try:
        kubectl(kubeconfig, "apply", "-n", namespace, "-f", "-", stdin=config_map("web", "nginx:1.25", 2))
        kubectl(
            kubeconfig, "apply", "-n", namespace, "-f", "-", stdin=config_map("other", "x", 1, labelled=False)
        )
        made = wait_until(deployment, lambda d: d is not None)
        assert made["spec"]["replicas"] == 2
        assert made["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
        owner = made["metadata"]["ownerReferences"][0]
        config = get("configmap", "web")
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            "ConfigMap",
            "web",
            config["metadata"]["uid"],
            True,
        )
        wait_until(
            lambda: get("configmap", "web")["metadata"].get("annotations", {}),
            lambda a: a.get("web.example.com/status") == "0/2 ready",
        )

        # Level-triggered: change the ConfigMap and the Deployment follows.
        kubectl(kubeconfig, "apply", "-n", namespace, "-f", "-", stdin=config_map("web", "nginx:1.27", 3))
        changed = wait_until(deployment, lambda d: d["spec"]["replicas"] == 3)
        assert changed["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"

        def reasons() -> list[str]:
            events = get("events", "--field-selector", "involvedObject.name=web")["items"]
            return sorted(e["reason"] for e in events)

        assert wait_until(reasons, lambda r: r == ["Created", "Updated"]) == ["Created", "Updated"]
        described = kubectl(kubeconfig, "describe", "configmap", "web", "-n", namespace)
        assert "Deployment web created" in described and "Deployment web updated" in described
        # The unlabelled ConfigMap got nothing.
        assert [d["metadata"]["name"] for d in get("deployments")["items"]] == ["web"]
    finally:
        output = stop_operator(process)
    assert "1 controller(s) starting" in output
