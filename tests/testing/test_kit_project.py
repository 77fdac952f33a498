"""The test kit as an operator's own project meets it: a folder with its operator, its pytest
configuration and its tests, run by pytest in a subprocess. The session server simulates
workloads by default (a Deployment's pods become ready), a marker picks a server that does not,
and ``kube_operator`` runs the operator named by ``kubeloop_setup``."""

from __future__ import annotations

import pathlib
import subprocess
import sys

OPERATOR = """\
import kubeloop
from kubeloop import kinds


def setup(manager):
    async def reconcile(request):
        config_map = await manager.client.get(kinds.ConfigMap, request.name, namespace=request.namespace)
        config_map["metadata"].setdefault("labels", {})["seen"] = "yes"
        await manager.client.update(config_map)

    kubeloop.Builder(manager).for_(kinds.ConfigMap).complete(reconcile)
"""

TESTS = """\
import pytest

import kubeloop
from kubeloop import kinds
from kubeloop.testing import eventually


def deployment(name):
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    }


async def test_pods_become_ready_by_default(kube_client, kube_namespace):
    await kube_client.create(deployment("web"), namespace=kube_namespace)

    async def ready():
        found = await kube_client.get(kinds.Deployment, "web", namespace=kube_namespace)
        assert found["status"]["readyReplicas"] == 2

    await eventually(ready)


@pytest.mark.kubeloop(simulate=False)
async def test_a_marked_test_gets_a_server_without_nodes(kube_client, kube_apiserver):
    assert kube_apiserver.options.simulate
    assert (await kube_client.list(kinds.Node)).items == []


async def test_the_default_server_has_a_node(kube_client):
    assert len((await kube_client.list(kinds.Node)).items) == 1


async def test_the_operator_runs(kube_operator, kube_client, kube_namespace):
    await kube_client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, namespace=kube_namespace)

    async def labelled():
        found = await kube_client.get(kinds.ConfigMap, "c", namespace=kube_namespace)
        assert found["metadata"]["labels"] == {"seen": "yes"}

    await eventually(labelled)
"""

CONFIG = """\
[tool.pytest.ini_options]
asyncio_mode = "auto"
asyncio_default_fixture_loop_scope = "function"
{extra}
"""


def pytest_in(folder: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=folder, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_simulation_markers_and_the_operator_fixture(tmp_path: pathlib.Path) -> None:
    (tmp_path / "labeller.py").write_text(OPERATOR)
    (tmp_path / "test_labeller.py").write_text(TESTS)
    (tmp_path / "pyproject.toml").write_text(CONFIG.format(extra='kubeloop_setup = "labeller:setup"'))
    result = pytest_in(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "4 passed" in result.stdout


def test_the_operator_fixture_says_what_it_lacks(tmp_path: pathlib.Path) -> None:
    (tmp_path / "test_it.py").write_text("async def test_it(kube_operator):\n    pass\n")
    (tmp_path / "pyproject.toml").write_text(CONFIG.format(extra=""))
    result = pytest_in(tmp_path)
    assert result.returncode == 1
    assert (
        'kube_operator runs the operator\'s setup: set kubeloop_setup = "module:function" in the pytest '
        "configuration, or define a kube_setup fixture returning it"
    ) in result.stdout
    (tmp_path / "pyproject.toml").write_text(CONFIG.format(extra='kubeloop_setup = "absent:setup"'))
    result = pytest_in(tmp_path)
    assert "kubeloop_setup = 'absent:setup': no module named 'absent'" in result.stdout


def test_the_operator_fixture_installs_what_the_setup_uses_and_fails_at_once_on_what_nothing_defines(
    tmp_path: pathlib.Path,
) -> None:
    """The CRD of a model the setup watches is installed though the setup's module only imports
    it inside setup; a kind nothing defines fails the test at once, naming it (the cache would
    otherwise wait its whole sync timeout, 2 minutes, for it)."""
    (tmp_path / "backups.py").write_text(
        "import kubeloop\n\n\nclass BackupSpec(kubeloop.KubeModel):\n    schedule: str\n\n\n"
        "class Backup(kubeloop.CustomResource, group='example.com', version='v1'):\n    spec: BackupSpec\n"
    )
    (tmp_path / "backup_operator.py").write_text(
        "import kubeloop\n\n\ndef setup(manager):\n    from backups import Backup\n\n"
        "    kubeloop.Builder(manager).for_(Backup).complete(lambda request: None)\n\n\n"
        "def typo(manager):\n    cronjob = kubeloop.GroupVersionKind('batch', 'v1', 'Cronjob')\n"
        "    kubeloop.Builder(manager).for_(cronjob).complete(lambda request: None)\n"
    )
    (tmp_path / "test_backups.py").write_text(
        "import pytest\nfrom backups import Backup\n\n\n"
        "async def test_the_crd_is_there(kube_operator, kube_client, kube_namespace):\n"
        "    made = await kube_client.create(Backup(metadata={'name': 'b'}, spec={'schedule': '@daily'}), "
        "namespace=kube_namespace)\n"
        "    assert made.spec.schedule == '@daily'\n"
    )
    (tmp_path / "pyproject.toml").write_text(CONFIG.format(extra='kubeloop_setup = "backup_operator:setup"'))
    result = pytest_in(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (tmp_path / "pyproject.toml").write_text(CONFIG.format(extra='kubeloop_setup = "backup_operator:typo"'))
    result = pytest_in(tmp_path)
    assert result.returncode == 1
    assert (
        "kube_operator: the setup uses a kind the server does not serve: "
        'no matches for kind "Cronjob" in version "batch/v1" '
        "(did you mean CronJob?)"
    ) in result.stdout


def test_a_reconcile_that_fails_its_assert_fails_the_test(tmp_path: pathlib.Path) -> None:
    """The controller logs and retries a reconcile that raised; under test, a failed ``assert``
    (or a bug) in a reconcile fails the test, unless the test says it means it."""
    (tmp_path / "test_asserts.py").write_text(
        "import pytest\nimport kubeloop\nfrom kubeloop import kinds\nfrom kubeloop.testing import eventually\n\n\n"
        "def manager_with(kube_client, kube_namespace, check):\n"
        "    manager = kubeloop.Manager(kube_client, namespace=kube_namespace)\n"
        "    kubeloop.Builder(manager).for_(kinds.ConfigMap).complete(check)\n"
        "    return manager\n\n\n"
        "async def test_swallowed(kube_client, kube_namespace):\n"
        "    seen = []\n\n"
        "    async def check(request):\n"
        "        if request.name == 'kube-root-ca.crt':  # every namespace's, written by the server\n"
        "            return\n"
        "        seen.append(request)\n"
        "        assert request.name == 'expected', 'the reconcile checked the wrong object'\n\n"
        "    async with manager_with(kube_client, kube_namespace, check):\n"
        "        await kube_client.create({'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'other'}}, namespace=kube_namespace)\n"
        "        await eventually(lambda: seen)\n\n\n"
        "@pytest.mark.kubeloop(reconcile_failures=True)\n"
        "async def test_meant(kube_client, kube_namespace):\n"
        "    seen = []\n\n"
        "    async def check(request):\n"
        "        seen.append(request)\n"
        "        raise KeyError('on purpose')\n\n"
        "    async with manager_with(kube_client, kube_namespace, check):\n"
        "        await kube_client.create({'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'other'}}, namespace=kube_namespace)\n"
        "        await eventually(lambda: seen)\n"
    )
    (tmp_path / "pyproject.toml").write_text(CONFIG.format(extra=""))
    result = pytest_in(tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "1 failed, 1 passed" in result.stdout
    assert "a reconcile failed while the test ran" in result.stdout
    assert "configmap: reconcile test-1/other: AssertionError: the reconcile checked the wrong object" in result.stdout, result.stdout
