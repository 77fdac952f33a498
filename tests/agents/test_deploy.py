"""The operator's deployment files: the checked-in CRDs and ClusterRole are what `kubeloop crd`
and `kubeloop rbac` generate now (`make manifests` writes them), and `kubectl apply -k
config/default` lays the operator out on a server — CRDs established, the role bound to the
operator's ServiceAccount, its Deployment rolled out."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
from agentobjects import agent, runtime

import kubeloop
from kubeloop.cli.demo import load_samples
from kubeloop.testing import ServerThread
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl

AGENTS = pathlib.Path(__file__).parents[2] / "examples" / "agents"


@pytest.mark.parametrize(
    ("command", "path"), [("crd", "crd/agents.kubeloop.dev.yaml"), ("rbac", "rbac/role.yaml")]
)
def test_the_checked_in_manifests_are_what_the_operator_generates(command: str, path: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kubeloop.cli.main", command, str(AGENTS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert (AGENTS / "config" / path).read_text() == result.stdout, "run make manifests"


def test_kubectl_apply_k_lays_the_operator_out(cluster: ServerThread, tmp_path: pathlib.Path) -> None:
    kubectl = Kubectl(KUBECTLS[-1], pathlib.Path(cluster.kubeconfig), tmp_path)
    kubectl("apply", "-k", str(AGENTS / "config" / "default"))
    kubectl("wait", "--for=condition=Established", "crd/agents.agents.kubeloop.dev", "--timeout=20s")
    binding = json.loads(
        kubectl("get", "clusterrolebinding", "agents-manager-rolebinding", "-o", "json").stdout
    )
    assert binding["roleRef"]["name"] == "agents-manager-role"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "agents-controller-manager", "namespace": "agents-system"}
    ]
    kubectl(
        "-n", "agents-system", "rollout", "status", "deployment/agents-controller-manager", "--timeout=30s"
    )
    deployment = json.loads(
        kubectl("-n", "agents-system", "get", "deployment", "agents-controller-manager", "-o", "json").stdout
    )
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "agents-controller-manager"
    assert pod["containers"][0]["image"] == "ghcr.io/kubeloop/agents-operator:0.1"
    assert "--leader-elect" in pod["containers"][0]["args"]
    can = kubectl(
        "auth",
        "can-i",
        "create",
        "jobs",
        "--as=system:serviceaccount:agents-system:agents-controller-manager",
        check=False,
    )
    assert can.stdout.strip() == "yes"
    cannot = kubectl(
        "auth",
        "can-i",
        "get",
        "secrets",
        "--as=system:serviceaccount:agents-system:agents-controller-manager",
        check=False,
    )
    assert cannot.stdout.strip() == "no"


async def test_kubectl_get_agents_lists_agents_and_the_category_lists_the_platform(
    cluster: ServerThread, client: kubeloop.APIClient, namespace: str, tmp_path: pathlib.Path
) -> None:
    """kubectl expands a category before it maps a resource: the category must not be "agents"."""
    await client.create(runtime(f"{namespace}-rt"))
    await client.create(agent("listed", namespace, f"{namespace}-rt"))
    for binary in KUBECTLS:
        kubectl = Kubectl(binary, pathlib.Path(cluster.kubeconfig), tmp_path)
        agents = kubectl("get", "agents", "-n", namespace, "-o", "name").stdout.split()
        assert agents == ["agent.agents.kubeloop.dev/listed"], binary.name
        platform = kubectl("get", "agentplatform", "-n", namespace, "-o", "name").stdout.split()
        assert "agent.agents.kubeloop.dev/listed" in platform


async def test_the_samples_apply_with_kubectl_apply_k(
    cluster: ServerThread, client: kubeloop.APIClient, namespace: str, tmp_path: pathlib.Path
) -> None:
    """config/samples is what `kubeloop demo` applies, and `kubectl apply -k` takes it as it is."""
    kubectl = Kubectl(KUBECTLS[-1], pathlib.Path(cluster.kubeconfig), tmp_path)
    kubectl("apply", "-n", namespace, "-k", str(AGENTS / "config" / "samples"))
    applied = kubectl("get", "agentplatform", "-n", namespace, "-o", "name").stdout.split()

    expected = {
        f"{obj['kind'].lower()}.agents.kubeloop.dev/{obj['metadata']['name']}"
        for obj in load_samples(AGENTS / "config" / "samples")
        if obj["apiVersion"].startswith("agents.kubeloop.dev/")
        and obj["kind"] != "ServingRuntime"  # cluster-scoped: not in the namespace's listing
    }
    assert expected and expected <= set(applied)
