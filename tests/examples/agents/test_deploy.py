"""The operator's deployment files: the checked-in config/ (CRDs, ClusterRole, the policy
webhooks and what serves them) is what `kubeloop manifests` generates now (`make manifests`
writes it), and `kubectl apply -k config/default` lays the operator out on a server — CRDs
established, the role bound to the operator's ServiceAccount, its Deployment rolled out — where
the operator, run as its pod would run it, keeps its webhook certificate and enforces a policy."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest
import yaml
from agentobjects import FAST, agent, runtime

import kubeloop
from kubeloop.cli.demo import load_samples
from kubeloop.testing import ServerThread, start_server
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.examples.agents.operator_pod import AGENTS, Kube, OperatorPod


def test_the_checked_in_manifests_are_what_the_operator_generates(tmp_path: pathlib.Path) -> None:
    """config/ is what `make manifests` writes (`kubeloop manifests` with policies enforced and
    the inbound endpoint on, as the manifests deploy the operator)."""
    copy = tmp_path / "agents"
    shutil.copytree(AGENTS, copy, ignore=shutil.ignore_patterns("__pycache__", "chart"))
    result = subprocess.run(
        [sys.executable, "-m", "kubeloop.cli.main", "manifests", str(copy)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "AGENTS_ENFORCE_POLICIES": "true", "AGENTS_WEBHOOK_BIND_ADDRESS": ":8082"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    written = sorted(path.relative_to(copy).as_posix() for path in (copy / "config").rglob("*.yaml"))
    checked_in = sorted(path.relative_to(AGENTS).as_posix() for path in (AGENTS / "config").rglob("*.yaml"))
    assert written == checked_in, "run make manifests"
    for name in written:
        assert (copy / name).read_text() == (AGENTS / name).read_text(), f"{name}: run make manifests"


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[ServerThread]:
    """A server of its own: the operator's webhooks would judge the writes of other tests."""
    server = start_server(simulate=True, simulation=FAST)
    yield server
    server.stop()


def test_kubectl_apply_k_lays_the_operator_out_and_its_policy_webhooks_work(
    own_cluster: ServerThread, tmp_path: pathlib.Path
) -> None:
    kube = Kube(KUBECTLS[-1], own_cluster)
    applied = kube("apply", "-k", str(AGENTS / "config" / "default")).stdout
    for expected in (
        "service/agents-operator",
        "service/agents-webhook-service",
        "role.rbac.authorization.k8s.io/agents-webhook-certificates",
        "clusterrole.rbac.authorization.k8s.io/agents-webhook-ca-injection",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/agents-validating-webhook-configuration",
    ):
        assert expected in applied, applied
    kube("wait", "--for=condition=Established", "crd/agents.agents.kubeloop.dev", "--timeout=20s")
    binding = kube.get("clusterrolebinding", "agents-manager-rolebinding")
    assert binding["roleRef"]["name"] == "agents-manager-role"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "agents-controller-manager", "namespace": "agents-system"}
    ]
    kube("-n", "agents-system", "rollout", "status", "deployment/agents-controller-manager", "--timeout=30s")
    pod = kube.get("deployment", "agents-controller-manager", "-n", "agents-system")["spec"]["template"][
        "spec"
    ]
    assert pod["serviceAccountName"] == "agents-controller-manager"
    assert pod["containers"][0]["image"] == "ghcr.io/kubeloop/agents-operator:0.1"
    assert "--leader-elect" in pod["containers"][0]["args"]
    service_account = "--as=system:serviceaccount:agents-system:agents-controller-manager"
    assert kube("auth", "can-i", "create", "jobs", service_account, check=False).stdout.strip() == "yes"
    assert kube("auth", "can-i", "get", "secrets", service_account, check=False).stdout.strip() == "no"
    assert kube("auth", "can-i", "get", "secrets", "-n", "agents-system", service_account, check=False).stdout.strip() == "yes"  # fmt: skip

    # The operator as its pod runs it: it keeps the webhooks' certificate, and a policy holds.
    replica = OperatorPod(
        kube, "agents-system", "agents-controller-manager", "agents-webhook-service", tmp_path
    )
    try:
        replica.start().wait_for_line("webhook certificate for agents-webhook-service.agents-system.svc")
        while not replica.ready():
            assert replica.process is not None and replica.process.poll() is None
        while not kube("get", "validatingwebhookconfiguration", "agents-validating-webhook-configuration",
                       "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}").stdout:  # fmt: skip
            pass  # injected once the manager runs
        kube("create", "namespace", "team")
        policy = {
            "apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "AgentPolicy",
            "metadata": {"name": "strict", "namespace": "team"}, "spec": {"allowedRuntimes": ["python"]},
        }  # fmt: skip
        kube("apply", "-f", "-", stdin=yaml.safe_dump(policy))
        rogue = agent("rogue", "team", "node")
        refused = kube("apply", "-f", "-", stdin=yaml.safe_dump(rogue), check=False)
        assert refused.returncode == 1
        assert (
            'The Agent "rogue" is invalid: spec.runtimeRef: Invalid value: "node": '
            "not allowed by AgentPolicy strict (allowed: python)"
        ) in refused.stderr, refused.stderr
        kube("apply", "-f", "-", stdin=yaml.safe_dump(agent("kept", "team", "python")))
    finally:
        replica.stop()


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
