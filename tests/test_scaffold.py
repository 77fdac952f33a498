"""``kubeloop init`` and ``kubeloop create api`` from an empty folder, as a user runs them: the
project is written, its own tests pass as generated (against the embedded server, pods
simulated), ``kubeloop crd .`` prints its CRD, ``make run`` runs it and a sample becomes
Available, and ``make manifests`` writes config/ again. Mistakes are one line and exit 2."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
import yaml

from tests.apiserver.test_kubectl import KUBECTLS
from tests.conftest import ServerThread, start_server

BIN = pathlib.Path(sys.executable).parent


def environment(home: pathlib.Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
    env.update(HOME=str(home), PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    return env


def kubeloop(folder: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubeloop.cli.main", *args],
        cwd=folder, capture_output=True, text=True, timeout=120, env=environment(folder),
    )  # fmt: skip


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    folder = tmp_path_factory.mktemp("empty")
    made = kubeloop(folder, "init", "blog-operator")
    assert made.returncode == 0, made.stderr
    assert made.stdout == "kubeloop init: wrote blog-operator/: cd blog-operator, then kubeloop create api ...\n"
    root = folder / "blog-operator"
    for kind in ("Website", "Blog"):
        added = kubeloop(root, "create", "api", "--group", "web.example.com", "--version", "v1", "--kind", kind)
        assert added.returncode == 0, added.stderr
    hooks = kubeloop(root, "create", "webhook", "--group", "web.example.com", "--version", "v1", "--kind", "Website", "--defaulting", "--validation")  # fmt: skip
    assert hooks.returncode == 0, hooks.stderr
    assert hooks.stdout.splitlines()[:3] == [
        "kubeloop create webhook: wrote blog_operator/webhooks/website.py",
        "kubeloop create webhook: wrote blog_operator/webhooks/__init__.py",
        "kubeloop create webhook: wrote tests/test_website_webhooks.py",
    ]
    return root


def test_the_layout_is_a_kubebuilder_projects(project: pathlib.Path) -> None:
    files = sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert files == [
        ".gitignore", "Dockerfile", "Makefile", "README.md",
        "blog_operator/__init__.py", "blog_operator/api/__init__.py",
        "blog_operator/api/v1/__init__.py", "blog_operator/api/v1/blog.py", "blog_operator/api/v1/website.py",
        "blog_operator/controllers/__init__.py", "blog_operator/controllers/blog.py", "blog_operator/controllers/website.py",
        "blog_operator/webhooks/__init__.py", "blog_operator/webhooks/website.py",
        "config/crd/kustomization.yaml", "config/crd/web.example.com_blogs.yaml", "config/crd/web.example.com_websites.yaml",
        "config/default/kustomization.yaml",
        "config/manager/kustomization.yaml", "config/manager/manager.yaml",
        "config/rbac/kustomization.yaml", "config/rbac/role.yaml", "config/rbac/role_binding.yaml", "config/rbac/service_account.yaml",
        "config/samples/kustomization.yaml", "config/samples/web_v1_blog.yaml", "config/samples/web_v1_website.yaml",
        "config/webhook/manifests.yaml",
        "main.py", "pyproject.toml", "tests/conftest.py", "tests/test_blog.py", "tests/test_website.py",
        "tests/test_website_webhooks.py",
    ]  # fmt: skip
    controllers = (project / "blog_operator/controllers/__init__.py").read_text()
    assert "    setup_website(manager)\n    setup_blog(manager)\n    # kubeloop:scaffold:setup" in controllers
    assert yaml.safe_load((project / "config/crd/kustomization.yaml").read_text())["resources"] == [
        "web.example.com_blogs.yaml", "web.example.com_websites.yaml",
    ]  # fmt: skip
    role = yaml.safe_load((project / "config/rbac/role.yaml").read_text())
    assert {"apiGroups": ["web.example.com"], "resources": ["blogs/status", "websites/status"], "verbs": ["get", "update", "patch"]} in role["rules"]  # fmt: skip


def test_the_generated_tests_pass_and_the_crds_print(project: pathlib.Path) -> None:
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project, capture_output=True, text=True, timeout=300, env=environment(project),
    )  # fmt: skip
    assert tested.returncode == 0, tested.stdout[-3000:]
    assert "6 passed" in tested.stdout  # per kind: the operator test and the unit test; the webhooks
    printed = kubeloop(project, "crd", ".")
    assert printed.returncode == 0, printed.stderr
    names = sorted(crd["metadata"]["name"] for crd in yaml.safe_load_all(printed.stdout))
    assert names == ["blogs.web.example.com", "websites.web.example.com"]


def test_what_is_written_passes_ruff(project: pathlib.Path) -> None:
    for command in (["check", "."], ["format", "--check", "."]):
        linted = subprocess.run([str(BIN / "ruff"), *command], cwd=project, capture_output=True, text=True, timeout=60)
        assert linted.returncode == 0, linted.stdout + linted.stderr


def test_the_webhook_configurations_call_the_service(project: pathlib.Path) -> None:
    configurations = list(yaml.safe_load_all((project / "config/webhook/manifests.yaml").read_text()))
    assert [c["kind"] for c in configurations] == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
    service = configurations[1]["webhooks"][0]["clientConfig"]["service"]
    assert (service["name"], service["namespace"]) == ("webhook-service", "system")


def test_make_run_serves_it_and_a_sample_becomes_available(project: pathlib.Path) -> None:
    kubectl = str(KUBECTLS[-1])
    run = subprocess.Popen(
        ["make", "run"], cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=environment(project), start_new_session=True,
    )  # fmt: skip
    try:
        assert run.stdout is not None
        kubeconfig = ""
        while True:
            line = run.stdout.readline()
            assert line, "make run ended"
            if "kubeconfig=" in line:
                kubeconfig = line.split("kubeconfig=", 1)[1].split()[0]
            if "controller(s) starting" in line:
                break
        assert line == "kubeloop run: 2 controller(s) starting\n"
        applied = subprocess.run(
            [kubectl, "--kubeconfig", kubeconfig, "apply", "-k", "config/samples"],
            cwd=project, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert applied.returncode == 0, applied.stderr
        waited = subprocess.run(
            [kubectl, "--kubeconfig", kubeconfig, "wait", "websites/website-sample", "--for=condition=Available", "--timeout=60s"],
            cwd=project, capture_output=True, text=True, timeout=90,
        )  # fmt: skip
        assert waited.returncode == 0, waited.stderr
        shown = subprocess.run(
            [kubectl, "--kubeconfig", kubeconfig, "get", "websites"], capture_output=True, text=True, timeout=60
        )
        assert shown.stdout.split("\n")[1].split() == ["website-sample", "2", "True"]
    finally:
        os.killpg(run.pid, signal.SIGTERM)
        run.wait(60)


def test_manifests_are_written_again_from_the_code(project: pathlib.Path) -> None:
    crd = project / "config/crd/web.example.com_blogs.yaml"
    crd.write_text("stale\n")
    stale = project / "config/crd/gone.example.com_things.yaml"
    stale.write_text("stale\n")
    made = subprocess.run(["make", "manifests"], cwd=project, capture_output=True, text=True, timeout=120, env=environment(project))
    assert made.returncode == 0, made.stderr
    assert yaml.safe_load(crd.read_text())["metadata"]["name"] == "blogs.web.example.com"
    assert not stale.exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["init", "Blog_Operator"], "kubeloop init: 'Blog_Operator' is not a project name (lower-case letters, digits and '-', starting with a letter, at most 40 characters)"),
        (["create", "api", "--group", "web.example.com", "--version", "v1", "--kind", "Website"], "kubeloop create: {folder} is not a kubeloop project (run kubeloop init NAME first, then cd NAME)"),
    ],
)  # fmt: skip
def test_mistakes_are_one_line(tmp_path: pathlib.Path, args: list[str], expected: str) -> None:
    result = kubeloop(tmp_path, *args)
    assert result.returncode == 2
    assert result.stderr == expected.format(folder=tmp_path) + "\n"


def test_a_kind_twice_and_a_bad_kind_are_refused(project: pathlib.Path) -> None:
    again = kubeloop(project, "create", "api", "--group", "web.example.com", "--version", "v1", "--kind", "Website")
    assert again.returncode == 2
    assert again.stderr == f"kubeloop create: {project}/blog_operator/api/v1/website.py exists: Website is already in web.example.com/v1\n"
    lower = kubeloop(project, "create", "api", "--group", "web.example.com", "--version", "v1", "--kind", "website")
    assert lower.stderr == "kubeloop create: 'website' is not a kind (CamelCase, starting with an upper-case letter: Website)\n"


@pytest.fixture
def cluster() -> Iterator[ServerThread]:
    """A server of this test's own: the project's CRDs (websites.web.example.com) must not meet
    other tests' kinds of the same name on the session's server."""
    server = start_server()
    yield server
    server.stop()


def test_config_default_applies_to_a_cluster(project: pathlib.Path, cluster: ServerThread) -> None:
    """What make deploy applies, applied to a server as to a cluster: the CRDs, the role and its
    binding, the ServiceAccount, the operator's Namespace and Deployment."""
    kubectl = [str(KUBECTLS[-1]), "--kubeconfig", str(cluster.kubeconfig)]
    applied = subprocess.run([*kubectl, "apply", "-k", "config/default"], cwd=project, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    for expected in (
        "customresourcedefinition.apiextensions.k8s.io/websites.web.example.com",
        "clusterrole.rbac.authorization.k8s.io/blog-operator-manager-role",
        "clusterrolebinding.rbac.authorization.k8s.io/blog-operator-manager-rolebinding",
        "serviceaccount/blog-operator-controller-manager",
        "deployment.apps/blog-operator-controller-manager",
    ):
        assert expected in applied.stdout, applied.stdout
    deployment = subprocess.run(
        [*kubectl, "get", "deployment", "blog-operator-controller-manager", "-n", "blog-operator-system", "-o", "yaml"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    spec = yaml.safe_load(deployment.stdout)["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "blog-operator-controller-manager"
    assert spec["containers"][0]["image"] == "blog-operator:dev"
    assert spec["containers"][0]["args"][:2] == ["run", "/app"]
