"""``kubeloop init`` and ``kubeloop create api`` from an empty folder, as a user runs them: the
project is written, its own tests pass as generated (against the embedded server, pods
simulated), ``kubeloop crd .`` prints its CRD, ``make run`` runs it and a sample becomes
Available, and ``make manifests`` writes config/ again. Mistakes are one line and exit 2."""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import yaml

from tests.apiserver.test_kubectl import KUBECTLS
from tests.conftest import ServerThread, start_server

BIN = pathlib.Path(sys.executable).parent
# The project's make targets are run here in kubeloop's own environment (VENV=..., used as it is),
# but for test_the_readmes_commands_run_as_written, which lets make install the project's.


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
    assert (
        made.stdout == "kubeloop init: wrote blog-operator/: cd blog-operator, then kubeloop create api ...\n"
    )
    root = folder / "blog-operator"
    for kind in ("Website", "Blog"):
        added = kubeloop(
            root, "create", "api", "--group", "web.example.com", "--version", "v1", "--kind", kind
        )
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
    files = sorted(
        str(p.relative_to(project))
        for p in project.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert files == [
        ".gitignore", "Dockerfile", "Makefile", "README.md",
        "blog_operator/__init__.py", "blog_operator/api/__init__.py",
        "blog_operator/api/v1/__init__.py", "blog_operator/api/v1/blog.py", "blog_operator/api/v1/website.py",
        "blog_operator/controllers/__init__.py", "blog_operator/controllers/blog.py", "blog_operator/controllers/website.py",
        "blog_operator/webhooks/__init__.py", "blog_operator/webhooks/website.py",
        "config/crd/kustomization.yaml", "config/crd/web.example.com_blogs.yaml", "config/crd/web.example.com_websites.yaml",
        "config/default/kustomization.yaml", "config/default/manager_webhook_patch.yaml",
        "config/manager/kustomization.yaml", "config/manager/manager.yaml",
        "config/rbac/kustomization.yaml", "config/rbac/metrics_auth_role.yaml", "config/rbac/metrics_reader_role.yaml",
        "config/rbac/role.yaml", "config/rbac/role_binding.yaml", "config/rbac/service_account.yaml",
        "config/samples/kustomization.yaml", "config/samples/web_v1_blog.yaml", "config/samples/web_v1_website.yaml",
        "config/webhook/certificates.yaml", "config/webhook/kustomization.yaml",
        "config/webhook/manifests.yaml", "config/webhook/service.yaml",
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
        linted = subprocess.run(
            [str(BIN / "ruff"), *command], cwd=project, capture_output=True, text=True, timeout=60
        )
        assert linted.returncode == 0, linted.stdout + linted.stderr


def test_the_webhook_configurations_call_the_service(project: pathlib.Path) -> None:
    configurations = list(yaml.safe_load_all((project / "config/webhook/manifests.yaml").read_text()))
    assert [c["kind"] for c in configurations] == [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]
    service = configurations[1]["webhooks"][0]["clientConfig"]["service"]
    assert (service["name"], service["namespace"]) == ("webhook-service", "system")


def test_make_run_serves_it_and_a_sample_becomes_available(project: pathlib.Path) -> None:
    kubectl = str(KUBECTLS[-1])
    run = subprocess.Popen(
        ["make", "run", f"VENV={BIN.parent}"], cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
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
            [kubectl, "--kubeconfig", kubeconfig, "get", "websites"],
            capture_output=True,
            text=True,
            timeout=60,
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
    made = subprocess.run(
        ["make", "manifests", f"VENV={BIN.parent}"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment(project),
    )
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
    again = kubeloop(
        project, "create", "api", "--group", "web.example.com", "--version", "v1", "--kind", "Website"
    )
    assert again.returncode == 2
    assert (
        again.stderr
        == f"kubeloop create: {project}/blog_operator/api/v1/website.py exists: Website is already in web.example.com/v1\n"
    )
    lower = kubeloop(
        project, "create", "api", "--group", "web.example.com", "--version", "v1", "--kind", "website"
    )
    assert (
        lower.stderr
        == "kubeloop create: 'website' is not a kind (CamelCase, starting with an upper-case letter: Website)\n"
    )


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
    assert {"name": "webhook", "containerPort": 9443, "protocol": "TCP"} in spec["containers"][0]["ports"]


def test_deployed_webhooks_are_served_with_a_certificate_the_operator_keeps(
    project: pathlib.Path, cluster: ServerThread, tmp_path: pathlib.Path
) -> None:
    """make deploy's webhooks with no cert-manager: the operator, run with the Deployment's own
    webhook arguments and its ServiceAccount's token (so with the permissions config/ grants),
    makes the serving certificate's Secret and injects its CA; kube-apiserver then calls the
    webhooks through their Service (whose endpoint stands for the pod) and verifies the
    certificate against the Service's name. A restarted replica keeps the same certificate. Its
    metrics, secure as the Deployment says, answer an account bound to metrics-reader and refuse
    one that is not (the operator asking the API server with config/'s metrics-auth-role)."""
    namespace = "blog-operator-system"
    kubectl = [str(KUBECTLS[-1]), "--kubeconfig", str(cluster.kubeconfig)]

    def kube(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*kubectl, *args], input=stdin, capture_output=True, text=True, timeout=60)

    applied = kube("apply", "-k", str(project / "config/default"))
    assert applied.returncode == 0, applied.stderr
    for expected in (
        "service/blog-operator-webhook-service",
        "role.rbac.authorization.k8s.io/blog-operator-webhook-certificates",
        "clusterrole.rbac.authorization.k8s.io/blog-operator-webhook-ca-injection",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/blog-operator-validating-webhook-configuration",
    ):
        assert expected in applied.stdout, applied.stdout
    args = yaml.safe_load(kube("get", "deployment", "blog-operator-controller-manager", "-n", namespace, "-o", "yaml").stdout)[
        "spec"]["template"]["spec"]["containers"][0]["args"]  # fmt: skip
    webhook_args = [
        arg for arg in args if arg.startswith("--webhook-") and not arg.startswith("--webhook-cert-dir")
    ]
    assert "--metrics-secure" in args and "--metrics-bind-address=:8443" in args
    metrics_port = _free_port()
    assert webhook_args == [
        "--webhook-cert-secret=blog-operator-webhook-server-cert", "--webhook-service=blog-operator-webhook-service",
    ]  # fmt: skip

    token = kube("create", "token", "blog-operator-controller-manager", "-n", namespace).stdout.strip()
    assert token
    service_account = tmp_path / "service-account.kubeconfig"
    service_account.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "pod",
        "clusters": [{"name": "c", "cluster": {"server": cluster.url, "certificate-authority": cluster.ca_file}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "pod", "context": {"cluster": "c", "user": "sa", "namespace": namespace}}],
    }))  # fmt: skip
    port = _free_port()
    endpoints = {
        "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "blog-operator-webhook-service", "namespace": namespace},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "webhook", "port": port}]}],
    }  # fmt: skip
    assert kube("apply", "-f", "-", stdin=yaml.safe_dump(endpoints)).returncode == 0

    def run_replica(certs: pathlib.Path) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "kubeloop.cli.main", "run", ".", "--kubeconfig", str(service_account),
             *webhook_args, f"--webhook-cert-dir={certs}", f"--webhook-port={port}",
             "--metrics-secure", f"--metrics-bind-address=127.0.0.1:{metrics_port}",
             "--leader-elect", "--leader-election-id=blog-operator"],
            cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment(project),
            start_new_session=True,
        )  # fmt: skip

    def stop(run: subprocess.Popen[str]) -> str:
        os.killpg(run.pid, signal.SIGTERM)
        output, _ = run.communicate(timeout=60)
        assert run.returncode == 0, output
        return output

    def ca_bundle() -> str:
        return kube("get", "validatingwebhookconfiguration", "blog-operator-validating-webhook-configuration",
                    "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}").stdout  # fmt: skip

    first = run_replica(tmp_path / "first")
    try:
        assert first.stdout is not None
        started = []
        while not started or "controller(s) starting" not in started[-1]:
            started.append(first.stdout.readline())
            assert started[-1], started
        assert (
            "kubeloop run: webhook certificate for blog-operator-webhook-service.blog-operator-system.svc "
            "in Secret blog-operator-system/blog-operator-webhook-server-cert\n"
        ) in started, started
        while not ca_bundle():
            pass  # the CA is injected once the manager runs
        website = (project / "config/samples/web_v1_website.yaml").read_text()
        refused = kube("apply", "-f", "-", stdin=website.replace("nginx:1.27", "nginx"))
        assert refused.returncode == 1
        assert refused.stderr == (  # the validating webhook's words
            'The Website "website-sample" is invalid: spec.image: Invalid value: "nginx": must name a tag, e.g. nginx:1.27\n'
        )
        assert kube("apply", "-f", "-", stdin=website).returncode == 0
        labels = kube("get", "website", "website-sample", "-o", "jsonpath={.metadata.labels}").stdout
        assert '"app.kubernetes.io/name":"website"' in labels  # defaulted by the mutating webhook
        for name in ("prometheus", "stranger"):
            assert kube("create", "serviceaccount", name, "-n", namespace).returncode == 0
        binding = ["create", "clusterrolebinding", "scrape", "--clusterrole=blog-operator-metrics-reader"]
        assert kube(*binding, f"--serviceaccount={namespace}:prometheus").returncode == 0
        metrics = f"https://127.0.0.1:{metrics_port}/metrics"
        scraper = kube("create", "token", "prometheus", "-n", namespace).stdout.strip()
        assert "controller_runtime_reconcile_total" in _scrape(metrics, scraper)
        stranger = kube("create", "token", "stranger", "-n", namespace).stdout.strip()
        with pytest.raises(urllib.error.HTTPError) as refused_scrape:
            _scrape(metrics, stranger)
        assert refused_scrape.value.code == 403
    finally:
        stop(first)
    secret = yaml.safe_load(
        kube("get", "secret", "blog-operator-webhook-server-cert", "-n", namespace, "-o", "yaml").stdout
    )
    assert secret["type"] == "kubernetes.io/tls" and sorted(secret["data"]) == [
        "ca.crt",
        "ca.key",
        "tls.crt",
        "tls.key",
    ]
    assert ca_bundle() == secret["data"]["ca.crt"]

    second = run_replica(tmp_path / "second")  # a new pod: the same certificate, from the Secret
    try:
        assert _served(second)
    finally:
        stop(second)
    assert (tmp_path / "second" / "tls.crt").read_bytes() == (tmp_path / "first" / "tls.crt").read_bytes()


def _scrape(url: str, token: str) -> str:
    """GET the operator's metrics with a bearer token (its certificate is its own: not checked)."""
    unchecked = ssl.create_default_context()
    unchecked.check_hostname, unchecked.verify_mode = False, ssl.CERT_NONE
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30, context=unchecked) as answer:
        return str(answer.read().decode())


def _served(run: subprocess.Popen[str]) -> bool:
    """Whether the replica got as far as starting its controllers."""
    assert run.stdout is not None
    return any("controller(s) starting" in line for line in run.stdout)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_readmes_commands_run_as_written(cluster: ServerThread, tmp_path: pathlib.Path) -> None:
    """Every command the generated README suggests, as written, in order, in a shell that has
    kubeloop (as after make demo) and kubectl: the kind and webhook by their short group under
    the project's domain, ``make test`` (which makes the project's .venv: nothing installed by
    hand), ``make run`` until it serves, and ``make deploy`` into a cluster. (The README's
    ``make docker-build`` needs a Docker engine, which these machines do not run.)"""
    made = kubeloop(tmp_path, "init", "shop-operator", "--domain", "shop.dev")
    assert made.returncode == 0, made.stderr
    root = tmp_path / "shop-operator"
    readme = (root / "README.md").read_text()
    commands = [line.split("#")[0].strip() for line in readme.splitlines() if line.startswith("    ")]
    assert [c.split()[:3] for c in commands] == [
        ["kubeloop", "create", "api"],
        ["kubeloop", "create", "webhook"],
        ["make", "test"],
        ["make", "run"],
        ["make", "deploy"],
    ]
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "kubectl").symlink_to(KUBECTLS[-1])
    env = environment(tmp_path)
    env.update(PATH=f"{tools}{os.pathsep}{env['PATH']}", KUBECONFIG=str(cluster.kubeconfig))
    env.pop("VIRTUAL_ENV", None)
    assert not (root / ".venv").exists()
    for command in commands:
        if command == "make run":
            run = subprocess.Popen(
                ["bash", "-c", command], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, env=env, start_new_session=True,
            )  # fmt: skip
            try:
                assert run.stdout is not None
                lines = []
                while not lines or "controller(s) starting" not in lines[-1]:
                    lines.append(run.stdout.readline())
                    assert lines[-1], "make run ended:\n" + "".join(lines)
                assert lines[-1] == "kubeloop run: 1 controller(s) starting\n"
            finally:
                os.killpg(run.pid, signal.SIGTERM)
                run.wait(60)
            continue
        done = subprocess.run(
            ["bash", "-c", command], cwd=root, capture_output=True, text=True, env=env, timeout=600
        )
        assert done.returncode == 0, f"$ {command}\n{done.stdout}\n{done.stderr}"
        if command == "make test":
            assert "4 passed" in done.stdout  # the controller's two tests and the webhooks' two
            assert (root / ".venv" / "bin" / "kubeloop").exists()  # installed by make, not by hand
    model = (root / "shop_operator" / "api" / "v1" / "website.py").read_text()
    assert 'group="web.shop.dev"' in model
    crd = subprocess.run(
        [str(tools / "kubectl"), "get", "crd", "websites.web.shop.dev", "-o", "name"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert crd.stdout == "customresourcedefinition.apiextensions.k8s.io/websites.web.shop.dev\n", crd.stderr


def test_the_environment_is_made_with_the_uv_on_path_or_one_pip_installs(
    project: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """`make test`'s first step, as make would run it (``make -n``): with a uv on PATH (kubeloop's
    own environment has one) .venv is made by it, pip included, and the packages go in with it;
    without one, by ``python -m venv``, whose pip installs uv into .venv first (the README test
    runs the first way whole)."""
    bare = tmp_path / "bare"
    bare.mkdir()
    for tool in ("make", "sh", "bash", "python3"):  # what the recipe needs, and no uv
        found = subprocess.run(["bash", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        (bare / tool).symlink_to(found)
    for path, made_by, uv in (
        (f"{BIN}{os.pathsep}{bare}", f"{BIN / 'uv'} venv --seed --quiet --python python3 .venv", str(BIN / "uv")),
        (str(bare), "python3 -m venv .venv", ".venv/bin/uv"),
    ):
        env = {**environment(tmp_path), "PATH": path}
        planned = subprocess.run(
            ["make", "-n", ".venv/.installed"], cwd=project, capture_output=True, text=True, env=env, check=True
        ).stdout.splitlines()
        assert planned[0] == f"test -x .venv/bin/python || {made_by}"
        assert planned[1] == f"test -x {uv} || .venv/bin/python -m pip install --quiet --disable-pip-version-check uv"
        assert planned[2].startswith(f"UV_NATIVE_TLS=1 {uv} pip install --quiet --python .venv/bin/python ")


def test_manifests_are_computed_whole_before_config_is_touched(tmp_path: pathlib.Path) -> None:
    """A setup that names a kind nothing defines, or that fails, leaves config/ as it was (it used
    to delete a CRD's file and then crash half-way); a model the setup uses but main.py does not
    import still has its CRD written; a setup without controllers is warned about."""
    assert kubeloop(tmp_path, "init", "keep-operator").returncode == 0
    root = tmp_path / "keep-operator"
    empty = kubeloop(root, "manifests", ".")
    assert empty.returncode == 0, empty.stderr
    assert empty.stderr == (
        "kubeloop manifests: warning: the setup registers no controllers (no Builder(...).complete(...) "
        "ran): nothing will be reconciled, and the generated role grants only what the rest of the setup needs\n"
    )
    added = kubeloop(root, "create", "api", "--group", "web", "--version", "v1", "--kind", "Website")
    assert added.returncode == 0, added.stderr
    main = root / "main.py"
    main.write_text(main.read_text().replace("from keep_operator.api.v1 import Website as Website\n", ""))
    unimported = kubeloop(root, "manifests", ".")
    assert unimported.returncode == 0 and unimported.stderr == "", unimported.stderr
    crd = root / "config" / "crd" / "web.example.com_websites.yaml"
    assert yaml.safe_load(crd.read_text())["metadata"]["name"] == "websites.web.example.com"

    def config() -> dict[str, bytes]:
        return {
            str(p.relative_to(root)): p.read_bytes()
            for p in sorted((root / "config").rglob("*"))
            if p.is_file()
        }

    before = config()
    main.write_text(
        main.read_text()
        + "\n\nimport kubeloop  # noqa: E402\nfrom keep_operator import setup as _setup  # noqa: E402\n\n\n"
        "def setup(manager):  # noqa: F811\n    _setup(manager)\n"
        "    gadget = kubeloop.GroupVersionKind('example.com', 'v1', 'Gadget')\n"
        "    kubeloop.Builder(manager).named('gadgets').for_(gadget).complete(lambda request: None)\n"
    )
    unknown = kubeloop(root, "manifests", ".")
    assert unknown.returncode == 2, unknown.stdout + unknown.stderr
    assert unknown.stderr == (
        "kubeloop manifests: the setup uses Gadget of example.com/v1 "
        "(it is not a built-in kind, and no model of the operator's defines it)\n"
    )
    assert config() == before
    main.write_text(
        main.read_text() + "\n\ndef setup(manager):  # noqa: F811\n    raise RuntimeError('broken')\n"
    )
    failing = kubeloop(root, "manifests", ".")
    assert failing.returncode != 0 and "RuntimeError: broken" in failing.stderr
    assert config() == before
