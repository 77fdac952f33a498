"""The local_service example as its docstring runs it: the operator and the greeter it deploys
both run as processes of the process node; the operator, the pod of its own Deployment with its
own ServiceAccount (in-cluster configuration through the container's root), makes a Deployment
and a Service per labelled ConfigMap and asks the Service from inside its pod, through the
node's proxy; the answer comes from the greeter's process. A changed greeting rolls the
greeter out and the new answer follows."""

from __future__ import annotations

import json
import pathlib
import sys
import time
from collections.abc import Iterator

import pytest

from kubeloop.node.simulation import SimulationOptions
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import ServerThread, start_server

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "local_service"
ANSWER = "greeter.example.com/answer"


@pytest.fixture
def node(tmp_path: pathlib.Path) -> Iterator[ServerThread]:
    options = SimulationOptions(
        pod_start_seconds=0.1,
        node_check_seconds=0.2,
        config_retry_seconds=0.1,
        local_images=(
            f"example.com/greeter={sys.executable} {EXAMPLE / 'greeter.py'}",
            f"example.com/greeter-operator={sys.executable} -m kubeloop.cli.main run {EXAMPLE / 'main.py'}",
        ),
        pods_dir=tmp_path / "pods",
    )
    server = start_server(simulate=True, simulation=options, namespace_defaults=True)
    yield server
    server.stop()


def answer(kubectl: Kubectl) -> str:
    found = json.loads(kubectl("get", "configmap", "hello", "-o", "json").stdout)
    return str((found["metadata"].get("annotations") or {}).get(ANSWER, ""))


def test_the_operator_runs_in_its_pod_and_asks_its_greeter_through_the_service(
    node: ServerThread, tmp_path: pathlib.Path
) -> None:
    kubectl = Kubectl(KUBECTLS[-1], node.kubeconfig, tmp_path)
    kubectl("apply", "-f", str(EXAMPLE / "deploy.yaml"))
    kubectl("rollout", "status", "deployment/greeter-operator", "--timeout=60s")
    kubectl("create", "configmap", "hello", "--from-literal=greeting=hi there")
    kubectl("label", "configmap", "hello", "greeter.example.com/deploy=true")
    while not (said := answer(kubectl)):
        time.sleep(0.1)  # the operator's answer (the test's timeout bounds the wait)
    greeter = json.loads(kubectl("get", "pods", "-l", "app=hello", "-o", "json").stdout)["items"][0]
    assert said == f"hi there from {greeter['metadata']['name']}"
    operator = json.loads(kubectl("get", "pods", "-l", "app=greeter-operator", "-o", "json").stdout)["items"][0]
    assert operator["spec"]["serviceAccountName"] == "greeter-operator"
    assert operator["status"]["podIP"].startswith("127.244.")
    kubectl("patch", "configmap", "hello", "-p", '{"data": {"greeting": "good evening"}}')
    while not answer(kubectl).startswith("good evening from hello-"):
        time.sleep(0.1)  # rolled out, asked again
