"""What a person's mistakes on the command line get: one line naming what is wrong, with a hint,
exit code 2, and no traceback; what the cluster refuses gets one line naming its URL and the
cause, exit code 1. Each is run as a user runs it: ``kubeloop`` in a subprocess, from a folder
of their own."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
from typing import Any

import pytest
import yaml

from tests.conftest import Client, ServerThread
from tests.ports import refusing_port

KUBELOOP = [sys.executable, "-m", "kubeloop.cli.main"]


def kubeloop(folder: pathlib.Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
    environment.update(HOME=str(folder), **env)
    return subprocess.run(
        [*KUBELOOP, *args], cwd=folder, capture_output=True, text=True, timeout=120, env=environment
    )


def one_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def last_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    """The line ``kubeloop`` ended with (an embedded server logs its start above it)."""
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr.splitlines()[-1]


OPERATOR = """\
import kubeloop
from kubeloop import kinds


def setup(manager):
    kubeloop.Builder(manager).for_(kinds.ConfigMap).owns(kinds.Deployment).complete(lambda request: None)
"""


BACKUPS = """\
import kubeloop


class BackupSpec(kubeloop.KubeModel):
    schedule: str


class Backup(kubeloop.CustomResource, group="example.com", version="v1"):
    spec: BackupSpec
"""


@pytest.fixture
def folder(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "operator_main.py").write_text(OPERATOR)
    (tmp_path / "nosetup.py").write_text("VALUE = 1\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "string_kind.py").write_text(
        "import kubeloop\n\n\ndef setup(manager):\n    kubeloop.Builder(manager).for_('Website').complete(print)\n"
    )
    (tmp_path / "backups.py").write_text(BACKUPS)
    (tmp_path / "backup_operator.py").write_text(
        "import kubeloop\nfrom backups import Backup\n\n\n"  # the model is only used, not exported
        "def setup(manager):\n    kubeloop.Builder(manager).for_(Backup).complete(lambda request: None)\n\n\n"
        "__all__ = ['setup']\n"
    )
    (tmp_path / "typo_kind.py").write_text(
        "import kubeloop\n\n\ndef setup(manager):\n"
        "    kind = kubeloop.GroupVersionKind('batch', 'v1', 'Cronjob')\n"
        "    kubeloop.Builder(manager).for_(kind).complete(lambda request: None)\n"
    )
    (tmp_path / "unfinished.py").write_text(
        "import kubeloop\nfrom kubeloop import kinds\n\n\ndef setup(manager):\n"
        "    kubeloop.Builder(manager).for_(kinds.ConfigMap).owns(kinds.Secret)\n"
    )
    return tmp_path


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("missing_module", "kubeloop run: no module named 'missing_module' in {folder} or on the Python path (run from the folder that holds it, or give its file, e.g. ./main.py)"),
        ("./missing.py", "kubeloop run: ./missing.py: no such file"),
        ("empty", "kubeloop run: empty has no main.py (give the file, or module:function from the folder above it)"),
        ("not a target", "kubeloop run: 'not a target' is not a module:function, a Python file or a folder (e.g. kubeloop run operator_pkg.main:setup, kubeloop run ./main.py, kubeloop run .)"),
        ("nosetup", "kubeloop run: {folder}/nosetup.py has no setup(manager) function (define it to add the operator's controllers, or name yours: module:function)"),
        ("nosetup:VALUE", "kubeloop run: nosetup:VALUE: VALUE is not a function but int 1"),
    ],
)  # fmt: skip
def test_a_target_that_names_nothing(folder: pathlib.Path, target: str, expected: str) -> None:
    assert one_line(kubeloop(folder, "run", target, "--embedded"), 2) == expected.format(folder=folder)


def test_module_targets_resolve_from_the_current_folder_and_v_follows_the_command(
    folder: pathlib.Path,
) -> None:
    (folder / "models.py").write_text(
        "import kubeloop\n\n\nclass GadgetSpec(kubeloop.KubeModel):\n    size: int\n\n\n"
        "class Gadget(kubeloop.CustomResource, group='example.com', version='v1'):\n    spec: GadgetSpec\n"
    )
    printed = kubeloop(folder, "crd", "models", "-v")
    assert printed.returncode == 0, printed.stderr
    assert yaml.safe_load(printed.stdout)["metadata"]["name"] == "gadgets.example.com"


@pytest.mark.parametrize(
    ("kubeconfig", "extra", "expected"),
    [
        (None, [], "kubeloop run: no cluster is configured ($KUBECONFIG unset, no ~/.kube/config, not in a pod) (run with --embedded for an API server in this process, or give --kubeconfig)"),
        ("absent.yaml", [], "kubeloop run: the kubeconfig absent.yaml does not exist"),
        ("malformed.yaml", [], "kubeloop run: the kubeconfig {folder}/malformed.yaml is not YAML: expected <block end>, but found ':' at line 2, column 1"),
        ("context.yaml", ["--context", "elsewhere"], 'kubeloop run: context "elsewhere" is not in {folder}/context.yaml'),
    ],
)  # fmt: skip
def test_a_kubeconfig_that_cannot_be_used(
    folder: pathlib.Path, kubeconfig: str | None, extra: list[str], expected: str
) -> None:
    (folder / "malformed.yaml").write_text("apiVersion: v1\n: : :\n")
    (folder / "context.yaml").write_text("apiVersion: v1\nkind: Config\ncurrent-context: here\ncontexts: [{name: here, context: {cluster: c, user: u}}]\n")  # fmt: skip
    flags = ["--kubeconfig", kubeconfig] if kubeconfig else []
    assert one_line(kubeloop(folder, "run", "operator_main", *flags, *extra), 2) == expected.format(
        folder=folder
    )


def kubeconfig_for(
    server: ServerThread, path: pathlib.Path, *, url: str | None = None, token: str | None = None
) -> str:
    config: dict[str, Any] = yaml.safe_load(server.kubeconfig.read_text())
    if url is not None:
        config["clusters"][0]["cluster"]["server"] = url
    user = config["users"][0]["user"]
    if token is not None:
        user.clear()
        user["token"] = token
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_a_server_that_does_not_answer_is_named_with_the_cause(
    folder: pathlib.Path, shared_server: ServerThread
) -> None:
    with refusing_port() as port:
        config = kubeconfig_for(shared_server, folder / "dead.yaml", url=f"https://127.0.0.1:{port}")
        line = one_line(kubeloop(folder, "run", "operator_main", "--kubeconfig", config), 1)
    assert line == (
        f"kubeloop run: cannot reach https://127.0.0.1:{port}: connection refused "
        "(without a cluster: --embedded runs an API server in this process)"
    )


def test_refused_credentials_name_the_kubeconfig(folder: pathlib.Path, shared_server: ServerThread) -> None:
    config = kubeconfig_for(shared_server, folder / "wrong.yaml", token="not-a-token")
    result = kubeloop(folder, "run", "operator_main", "--kubeconfig", config)
    assert one_line(result, 1) == (
        f"kubeloop run: {shared_server.url} refused the token in {config} (401 Unauthorized) "
        "(without a cluster: --embedded runs an API server in this process)"
    )


def test_missing_permissions_are_named_before_anything_starts(
    folder: pathlib.Path, shared_server: ServerThread, api: Client
) -> None:
    namespace = "cli-mistakes"
    api.post("/api/v1/namespaces", {"metadata": {"name": namespace}})
    api.post(f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "op"}})
    issued = api.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/op/token", {"spec": {}})
    assert issued.status_code == 201, issued.text
    config = kubeconfig_for(shared_server, folder / "sa.yaml", token=issued.json()["status"]["token"])
    user = f"system:serviceaccount:{namespace}:op"
    refused = kubeloop(folder, "run", "operator_main", "--kubeconfig", config)
    assert refused.returncode == 1
    assert refused.stdout == f"kubeloop run: connected to {shared_server.url} as {user}\n"
    assert refused.stderr == (
        f"kubeloop run: {user} may not list, watch configmaps; list, watch deployments.apps cluster-wide on "
        f"{shared_server.url} (grant it the ClusterRole `kubeloop rbac TARGET` prints)\n"
    )
    # Read access in its namespace: it starts, and says what its reconciles will lack.
    binding = {"metadata": {"name": "op-view"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": namespace}]}  # fmt: skip
    assert (
        api.post(
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings", binding
        ).status_code
        == 201
    )
    environment = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
    started = subprocess.Popen(
        [*KUBELOOP, "run", "operator_main", "--kubeconfig", config, "--namespace", namespace],
        cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**environment, "HOME": str(folder)},
    )  # fmt: skip
    try:
        assert started.stdout is not None and started.stderr is not None
        assert started.stdout.readline() == f"kubeloop run: connected to {shared_server.url} as {user}\n"
        assert started.stdout.readline() == "kubeloop run: 1 controller(s) starting\n"
        assert started.stderr.readline() == (
            f"kubeloop run: warning: {user} may not update, patch configmaps; update configmaps/finalizers; "
            f"create, update, patch, delete deployments.apps in namespace {namespace}: reconciles that need it will fail\n"
        )
        while "manager started" not in started.stderr.readline():
            pass  # its signal handlers are in place from here on
    finally:
        started.send_signal(signal.SIGTERM)
        assert started.wait(60) == 0


def test_a_kind_given_as_a_string_and_a_builder_never_completed(folder: pathlib.Path) -> None:
    string_kind = kubeloop(folder, "run", "string_kind", "--embedded")
    assert string_kind.returncode == 2 and "Traceback" not in string_kind.stderr
    assert string_kind.stderr.splitlines()[-1] == (
        f"kubeloop run: {folder}/string_kind.py:5: a kind is named by a model class, a GroupVersionKind "
        "(kubeloop.kinds.Deployment) or an object, not by the string 'Website'"
    )
    unfinished = kubeloop(folder, "run", "unfinished", "--embedded")
    assert unfinished.returncode == 2
    assert unfinished.stderr.splitlines()[-1] == (
        "kubeloop run: the Builder for ConfigMap was never completed: end it with .complete(reconcile)"
    )
    assert "Traceback" not in unfinished.stderr


def test_a_kind_the_server_does_not_serve_is_one_line_and_install_crds_installs_what_the_setup_uses(
    folder: pathlib.Path,
) -> None:
    missing = last_line(kubeloop(folder, "run", "backup_operator.py", "--embedded"), 1)
    assert missing.startswith("kubeloop run: https://127.0.0.1:")
    assert missing.endswith(
        " serves no Backup in example.com/v1 (its CRD is not installed: run with --install-crds, "
        "or kubeloop manifests and kubectl apply -k config/crd)"
    )
    # The model is not in the module's namespace (main.py imports only setup's module): the
    # setup's for_ names it, and that is enough for --install-crds.
    started = subprocess.Popen(
        [*KUBELOOP, "run", "backup_operator.py", "--embedded", "--install-crds"],
        cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HOME": str(folder)}, start_new_session=True,
    )  # fmt: skip
    try:
        assert started.stdout is not None
        lines = [started.stdout.readline() for _ in range(4)]
        assert "kubeloop run: installed 1 CRD(s): backups.example.com\n" in lines, lines
        assert lines[-1] == "kubeloop run: 1 controller(s) starting\n"
    finally:
        started.send_signal(signal.SIGTERM)
        assert started.wait(60) == 0


def test_a_misspelt_kind_names_the_kind_it_was_meant_to_be(folder: pathlib.Path) -> None:
    typo = last_line(kubeloop(folder, "run", "typo_kind.py", "--embedded"), 1)
    assert typo.endswith(
        " serves no Cronjob in batch/v1: did you mean CronJob? (kinds are case-sensitive, as in kubectl api-resources)"
    )


PVC_READER = """\
import kubeloop
from kubeloop import kinds


def setup(manager):
    async def reconcile(request):
        # Read through the cache: a kind only the reconcile touches, not in the generated role.
        await manager.client.get(kinds.PersistentVolumeClaim, request.name, namespace=request.namespace)

    kubeloop.Builder(manager).for_(kinds.ConfigMap).complete(reconcile)
"""


def test_as_operator_runs_with_the_generated_role_and_a_missing_permission_shows_at_once(
    folder: pathlib.Path,
) -> None:
    (folder / "pvc_reader.py").write_text(PVC_READER)
    started = subprocess.Popen(
        [*KUBELOOP, "run", "pvc_reader.py", "--embedded", "--as-operator"],
        cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HOME": str(folder)}, start_new_session=True,
    )  # fmt: skip
    try:
        assert started.stdout is not None and started.stderr is not None
        lines = []
        while not lines or "controller(s) starting" not in lines[-1]:
            lines.append(started.stdout.readline())
            assert lines[-1], "".join(lines)
        user = "system:serviceaccount:default:kubeloop-operator"
        assert (
            f"kubeloop run: --as-operator: running as {user}, bound to ClusterRole kubeloop-operator"
            in "".join(lines)
        )
        kubeconfig = (
            next(line for line in lines if "kubeconfig=" in line).split("kubeconfig=", 1)[1].split()[0]
        )
        from kubeloop.client.config import load_kubeconfig
        from kubeloop.client.sync import SyncClient

        with SyncClient(load_kubeconfig(kubeconfig)) as admin:
            admin.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "data", "namespace": "default"},
                }
            )
        wanted = f'persistentvolumeclaims is forbidden: User "{user}" cannot list resource "persistentvolumeclaims"'
        # The informer's retry warnings aside, the reconcile itself fails with the server's words.
        while not (wanted in (line := started.stderr.readline()) and "reconcile default/data failed" in line):
            assert line, "the reconcile's error never came"
    finally:
        started.send_signal(signal.SIGTERM)
        assert started.wait(60) == 0


def test_as_operator_needs_an_embedded_server(folder: pathlib.Path, shared_server: ServerThread) -> None:
    refused = kubeloop(
        folder, "run", "operator_main", "--as-operator", "--kubeconfig", str(shared_server.kubeconfig)
    )
    assert one_line(refused, 2) == (
        "kubeloop run: --as-operator needs --embedded (it makes a ServiceAccount and a role on the server)"
    )
