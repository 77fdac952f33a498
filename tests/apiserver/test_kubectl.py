"""The real kubectl (oldest and newest on the machine) against the embedded server,
without --validate=false."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
from typing import Any

import pytest

from tests.conftest import Client, ServerThread
from tests.kubectl_finder import kubectl_binaries, kubectl_env

KUBECTLS = kubectl_binaries()

pytestmark = [
    pytest.mark.kubectl,
]

DEPLOYMENT_YAML = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        ports:
        - containerPort: 80
"""

CONFIGMAP_YAML = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  mode: fast
"""


class Kubectl:
    """One kubectl binary pointed at the shared server's kubeconfig."""

    def __init__(self, binary: pathlib.Path, kubeconfig: pathlib.Path, home: pathlib.Path) -> None:
        self.argv = [str(binary), "--kubeconfig", str(kubeconfig)]
        self.env = kubectl_env(home)

    def __call__(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [*self.argv, *args], input=stdin, capture_output=True, text=True, timeout=timeout, env=self.env
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*self.argv, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env
        )


@pytest.fixture(params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def kubectl(request: pytest.FixtureRequest, shared_server: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(request.param, shared_server.kubeconfig, tmp_path)


def test_apply_get_patch_describe_delete(kubectl: Kubectl, api: Client, namespace: str) -> None:
    ns = ["-n", namespace]
    applied = kubectl("apply", *ns, "-f", "-", stdin=DEPLOYMENT_YAML + "---\n" + CONFIGMAP_YAML)
    assert "deployment.apps/web created" in applied.stdout
    assert "configmap/settings created" in applied.stdout
    # Re-applying a change goes through client-side apply (strategic merge patch + last-applied).
    again = kubectl("apply", *ns, "-f", "-", stdin=DEPLOYMENT_YAML.replace("replicas: 2", "replicas: 3"))
    assert "deployment.apps/web configured" in again.stdout
    deployment = api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/web").json()
    assert deployment["spec"]["replicas"] == 3
    assert "kubectl.kubernetes.io/last-applied-configuration" in deployment["metadata"]["annotations"]

    table = kubectl("get", *ns, "deployments").stdout
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert row.split()[0] == "web"
    listed = json.loads(kubectl("get", *ns, "configmaps", "settings", "-o", "json").stdout)
    assert listed["data"] == {"mode": "fast"}

    kubectl(
        "patch",
        *ns,
        "deployment",
        "web",
        "-p",
        '{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.28"}]}}}}',
    )
    kubectl("patch", *ns, "configmap", "settings", "--type", "merge", "-p", '{"data":{"mode":"slow"}}')
    deployment = api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/web").json()
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"], c["ports"][0]["containerPort"]) for c in containers] == [
        ("nginx", "nginx:1.28", 80)
    ]
    assert api.get(f"/api/v1/namespaces/{namespace}/configmaps/settings").json()["data"] == {"mode": "slow"}

    described = kubectl("describe", *ns, "deployment", "web").stdout
    assert "Name:" in described and "web" in described
    assert "RollingUpdate" in described

    kubectl("delete", *ns, "configmap", "settings")
    assert api.get(f"/api/v1/namespaces/{namespace}/configmaps/settings").status_code == 404


def test_get_watch_shows_the_old_value_then_the_new_one(
    kubectl: Kubectl, api: Client, namespace: str
) -> None:
    kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        stdin=CONFIGMAP_YAML.replace("settings", "watched").replace("mode: fast", "a: '1'"),
    )
    proc = kubectl.start("get", "-n", namespace, "configmaps", "-w", "-o", "json")
    assert proc.stdout is not None
    decoder = json.JSONDecoder()
    buffer = ""

    def next_object() -> dict[str, Any]:
        nonlocal buffer
        while True:
            try:
                obj, end = decoder.raw_decode(buffer.strip())
            except ValueError:
                line = proc.stdout.readline() if proc.stdout is not None else ""
                assert line, f"kubectl get -w ended: {buffer!r}"
                buffer += line
                continue
            buffer = buffer.strip()[end:]
            return dict(obj)

    try:
        # The watch lists first: the object as it is now, before any change is made.
        assert next_object()["data"] == {"a": "1"}
        kubectl(
            "patch", "-n", namespace, "configmap", "watched", "--type", "merge", "-p", '{"data":{"a":"2"}}'
        )
        changed = next_object()
        assert changed["data"] == {"a": "2"} and changed["metadata"]["name"] == "watched"
    finally:
        proc.kill()
        proc.wait()


def test_explain_and_wait_for_delete(kubectl: Kubectl, api: Client, namespace: str) -> None:
    explained = kubectl("explain", "deployment.spec.replicas").stdout
    assert "replicas" in explained
    assert "integer" in explained
    kubectl("apply", "-n", namespace, "-f", "-", stdin=CONFIGMAP_YAML)
    kubectl("delete", "-n", namespace, "configmap", "settings", "--wait=false")
    kubectl("wait", "-n", namespace, "--for=delete", "configmap/settings", "--timeout=20s")
    kubectl("create", "-n", namespace, "-f", "-", stdin=CONFIGMAP_YAML.replace("settings", "held"))
    api.patch(
        f"/api/v1/namespaces/{namespace}/configmaps/held",
        {"metadata": {"finalizers": ["example.com/hold"]}},
        "application/merge-patch+json",
    )
    kubectl("delete", "-n", namespace, "configmap", "held", "--wait=false")
    waiter = kubectl.start("wait", "-n", namespace, "--for=delete", "configmap/held", "--timeout=30s", "-v=6")
    assert waiter.stderr is not None
    # kubectl has found the object and is watching it (its own log says so): still waiting.
    for line in waiter.stderr:
        if "watch=true" in line and "200 OK" in line:
            break
    assert waiter.poll() is None, "kubectl wait returned while the object still existed"
    api.patch(
        f"/api/v1/namespaces/{namespace}/configmaps/held",
        {"metadata": {"finalizers": None}},
        "application/merge-patch+json",
    )
    assert waiter.wait(timeout=30) == 0, waiter.stderr.read() if waiter.stderr else ""


def test_get_pods_table_columns(kubectl: Kubectl, api: Client, namespace: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "runner"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    api.post(f"/api/v1/namespaces/{namespace}/pods", pod)
    header, row = kubectl("get", "-n", namespace, "pods").stdout.splitlines()[:2]
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row.split()[:4] == ["runner", "0/1", "Pending", "0"]
    all_resources = kubectl("api-resources").stdout
    assert "deployments" in all_resources and "leases" in all_resources


def test_strict_validation_rejects_unknown_fields(kubectl: Kubectl, api: Client, namespace: str) -> None:
    bad = DEPLOYMENT_YAML.replace("replicas: 2", "replicas: 2\n  bogus: 1")
    result = kubectl("apply", "-n", namespace, "-f", "-", stdin=bad, check=False)
    assert result.returncode != 0
    assert 'unknown field "spec.bogus"' in result.stderr
    assert api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/web").status_code == 404


_REQUESTED_PATH = re.compile(r'https://[^/\s"]+(/[^?\s"]*)')
_DISCOVERY_PATH = re.compile(r"/api(/v1)?|/apis(/[^/]+){0,2}")


def discovery_requests(verbose_stderr: str) -> list[str]:
    """The discovery paths a kubectl run with ``-v=6`` asked for, in order (1.27 logs
    ``GET https://…``, later versions ``url="https://…"``)."""
    return [path for path in _REQUESTED_PATH.findall(verbose_stderr) if _DISCOVERY_PATH.fullmatch(path)]


def test_a_cold_kubectl_discovers_the_api_in_two_requests(kubectl: Kubectl, api: Client, namespace: str) -> None:
    """Aggregated discovery: with no cache, kubectl learns every group, version and resource from
    ``/api`` and ``/apis`` alone (it made one request per group-version before), and its cache
    still learns of a CRD created after it was filled."""
    cold = kubectl("get", "configmaps", "-n", namespace, "-v=6")
    assert discovery_requests(cold.stderr) == ["/api", "/apis"]
    warm = kubectl("get", "configmaps", "-n", namespace, "-v=6")
    assert discovery_requests(warm.stderr) == []

    # Imported here: that module imports this one's kubectl list.
    from tests.apiserver.apiextensions.test_custom_resources import create_crd

    group = f"{namespace}.example.com"
    create_crd(api, group)
    api.post(f"/apis/{group}/v1/namespaces/{namespace}/widgets", {"metadata": {"name": "w1"}})
    listed = kubectl("get", f"widgets.{group}", "-n", namespace, "-o", "name")
    assert listed.stdout.split() == [f"widget.{group}/w1"]
