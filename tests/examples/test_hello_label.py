"""The seed example end to end: ``kubeloop run examples/hello_label`` against a server, driven by
kubectl — with ``--kubeconfig`` (the shared test server) and with ``--embedded``."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time

import requests

from tests.conftest import ServerThread
from tests.kubectl_finder import kubectl_binaries, kubectl_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
KUBECTLS = kubectl_binaries()
KUBECTL_HOME = tempfile.mkdtemp(prefix="kubeloop-kubectl-home-")

REPLICASET = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "metadata": {"name": "frontend", "labels": {"tier": "web"}},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"tier": "web"}},
        "template": {
            "metadata": {"labels": {"tier": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        },
    },
}


def kubectl(kubeconfig: str, *args: str, stdin: str | None = None, binary: pathlib.Path | None = None) -> str:
    """Run kubectl (the newest on the machine unless ``binary`` names one)."""
    result = subprocess.run(
        [str(binary or KUBECTLS[-1]), "--kubeconfig", kubeconfig, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={"HOME": KUBECTL_HOME, "PATH": "/usr/bin:/bin"},  # kubectl keeps a discovery cache there
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def wait_for_label(kubeconfig: str, namespace: str, want: str | None, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while True:
        got = json.loads(kubectl(kubeconfig, "get", "rs", "frontend", "-n", namespace, "-o", "json"))
        if got["metadata"].get("labels", {}).get("hello") == want:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"labels are {got['metadata'].get('labels')}")
        time.sleep(0.1)


def start_operator(*args: str, example: str = "hello_label") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kubeloop.cli.main", "run", str(ROOT / "examples" / example), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def ready_line(process: subprocess.Popen[str]) -> str:
    """The line saying the embedded server is ready: the first on stdout (log lines, on stderr,
    may come before it where the two are read as one)."""
    assert process.stdout is not None
    for _ in range(50):
        line = process.stdout.readline()
        if "ready at" in line or not line:
            return line
    raise AssertionError("no ready line in the first 50 lines")


def stop_operator(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    return output


def exercise(kubeconfig: str, namespace: str) -> None:
    kubectl(kubeconfig, "apply", "-n", namespace, "-f", "-", stdin=json.dumps(REPLICASET))
    wait_for_label(kubeconfig, namespace, "world")
    # Level-triggered: take the label away and it comes back.
    kubectl(kubeconfig, "label", "rs", "frontend", "-n", namespace, "hello-")
    wait_for_label(kubeconfig, namespace, "world")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_hello_label_with_kubeconfig(shared_server: ServerThread, namespace: str) -> None:
    """With a kubebuilder main.go's flags: one namespace, metrics, probes, leader election."""
    kubeconfig = str(shared_server.kubeconfig)
    metrics, probes = free_port(), free_port()
    process = start_operator(
        "--kubeconfig",
        kubeconfig,
        "--namespace",
        namespace,
        "--metrics-bind-address",
        f"127.0.0.1:{metrics}",
        "--health-probe-bind-address",
        f"127.0.0.1:{probes}",
        "--leader-elect",
        "--leader-election-id",
        "hello-label",
    )
    try:
        exercise(kubeconfig, namespace)
        lease = json.loads(kubectl(kubeconfig, "get", "lease", "hello-label", "-n", namespace, "-o", "json"))
        assert lease["spec"]["holderIdentity"]
        assert requests.get(f"http://127.0.0.1:{probes}/readyz", timeout=10).text == "ok"
        scraped = requests.get(f"http://127.0.0.1:{metrics}/metrics", timeout=10).text
        assert 'controller_runtime_reconcile_total{controller="replicaset",result="success"}' in scraped
        assert "leader_election_master_status" in scraped
    finally:
        output = stop_operator(process)
    assert "1 controller(s) starting" in output


def test_hello_label_embedded() -> None:
    process = start_operator("--embedded")
    try:
        line = ready_line(process)
        assert "ready at" in line, line
        kubeconfig = line.rsplit("kubeconfig=", 1)[1].strip()
        exercise(kubeconfig, "default")
    finally:
        stop_operator(process)


def test_an_embedded_run_runs_the_pods_of_local_images(tmp_path: pathlib.Path) -> None:
    """``kubeloop run --embedded --simulate --local-image``: the operator's cluster runs the
    pods of the images named as processes (here the one a test makes), and stops them with it."""
    process = start_operator("--embedded", "--simulate", "--local-image", "busybox=host")
    try:
        line = ready_line(process)
        kubeconfig = line.rsplit("kubeconfig=", 1)[1].strip()
        kubectl = [str(KUBECTLS[-1]), "--kubeconfig", kubeconfig]
        env = kubectl_env(tmp_path)
        run = [
            *kubectl,
            "run",
            "says",
            "--image=busybox",
            "--restart=Never",
            "--",
            "sh",
            "-c",
            "echo from a process",
        ]
        subprocess.run(run, check=True, capture_output=True, env=env, timeout=60)
        wait = [*kubectl, "wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/says", "--timeout=30s"]
        subprocess.run(wait, check=True, capture_output=True, env=env, timeout=60)
        logs = subprocess.run([*kubectl, "logs", "says"], capture_output=True, text=True, env=env, timeout=60)
        assert logs.stdout == "from a process\n"
    finally:
        stop_operator(process)


def test_local_images_need_an_embedded_simulating_server() -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "kubeloop.cli.main", "run", str(ROOT / "examples" / "hello_label"),
         "--embedded", "--local-image", "busybox=host"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "--local-image needs --embedded --simulate" in refused.stderr


HELLO_LABEL_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "hello-label"},
    "rules": [
        {"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
    ],
}


def test_hello_label_as_a_service_account_with_only_what_it_needs(
    shared_server: ServerThread, namespace: str, tmp_path: pathlib.Path
) -> None:
    """The operator runs under a ServiceAccount whose ClusterRole (bound in its namespace) allows
    exactly what it does: reading ReplicaSets and Pods, patching ReplicaSets."""
    admin = str(shared_server.kubeconfig)
    kubectl(admin, "apply", "-f", "-", stdin=json.dumps(HELLO_LABEL_ROLE))
    kubectl(admin, "create", "serviceaccount", "hello-label", "-n", namespace)
    kubectl(
        admin, "create", "rolebinding", "hello-label", "-n", namespace,
        "--clusterrole=hello-label", f"--serviceaccount={namespace}:hello-label",
    )  # fmt: skip
    token = kubectl(admin, "create", "token", "hello-label", "-n", namespace).strip()
    config = json.loads(kubectl(admin, "config", "view", "--raw", "-o", "json"))
    config["users"] = [{"name": "hello-label", "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = "hello-label"
    account = tmp_path / "hello-label.kubeconfig"
    account.write_text(json.dumps(config))
    assert kubectl(str(account), "auth", "whoami", "-o", "json").count(
        f"system:serviceaccount:{namespace}:hello-label"
    )
    refused = subprocess.run(
        [str(KUBECTLS[-1]), "--kubeconfig", str(account), "auth", "can-i", "delete", "replicasets", "-n", namespace],
        capture_output=True, text=True, timeout=60, env={"HOME": KUBECTL_HOME, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert refused.stdout.strip() == "no"
    process = start_operator("--kubeconfig", str(account), "--namespace", namespace)
    try:
        exercise(admin, namespace)
    finally:
        output = stop_operator(process)
    assert "forbidden" not in output.lower(), output
