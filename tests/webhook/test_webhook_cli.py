"""``kubeloop webhook TARGET`` prints the configurations an operator's webhooks need;
``kubeloop run TARGET --embedded`` installs them into its server, so kubectl's writes go through
the webhooks at once."""

from __future__ import annotations

import base64
import json
import pathlib
import signal
import subprocess
import sys

import pytest
import yaml

from kubeloop import certs
from tests.kubectl_finder import kubectl_env, newest_kubectl

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "website_webhooks")


def kubeloop_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubeloop.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_kubeloop_webhook_prints_configurations_calling_the_service(tmp_path: pathlib.Path) -> None:
    ca = certs.load_or_create_credentials(None, ["localhost"]).ca_cert_pem
    (tmp_path / "ca.crt").write_bytes(ca)
    printed = kubeloop_cli(
        "webhook", EXAMPLE, "--service", "website-webhooks", "--namespace", "web-system",
        "--name-prefix", "web-", "--ca-bundle", str(tmp_path / "ca.crt"),
    )  # fmt: skip
    assert printed.returncode == 0, printed.stderr
    mutating, validating, crd_patch = yaml.safe_load_all(printed.stdout)
    assert (mutating["kind"], mutating["metadata"]["name"]) == (
        "MutatingWebhookConfiguration",
        "web-mutating-webhook-configuration",
    )
    assert validating["metadata"]["name"] == "web-validating-webhook-configuration"
    [defaulting] = mutating["webhooks"]
    [validation] = validating["webhooks"]
    assert defaulting["name"] == "mwebsite-v1.kb.io"
    assert defaulting["clientConfig"] == {
        "service": {
            "name": "website-webhooks",
            "namespace": "web-system",
            "path": "/mutate-web-kubeloop-dev-v1-website",
            "port": 443,
        },
        "caBundle": base64.b64encode(ca).decode(),
    }
    assert defaulting["rules"] == [
        {
            "apiGroups": ["web.kubeloop.dev"],
            "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["websites"],
        }
    ]
    # Websites have a hub and a v1alpha1 that converts: their CRD is patched to call /convert.
    assert crd_patch["metadata"]["name"] == "websites.web.kubeloop.dev"
    assert crd_patch["spec"]["conversion"] == {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {
                "service": {
                    "name": "website-webhooks",
                    "namespace": "web-system",
                    "path": "/convert",
                    "port": 443,
                },
                "caBundle": base64.b64encode(ca).decode(),
            },
            "conversionReviewVersions": ["v1"],
        },
    }
    # The validator has all three methods, so its rule lists all three operations.
    assert validation["rules"][0]["operations"] == ["CREATE", "UPDATE", "DELETE"]
    assert (validation["failurePolicy"], validation["sideEffects"], validation["admissionReviewVersions"]) == (
        "Fail", "None", ["v1"],
    )  # fmt: skip


def test_kubeloop_webhook_says_when_a_target_has_none() -> None:
    printed = kubeloop_cli("webhook", str(ROOT / "examples" / "hello_label"))
    assert printed.returncode == 1
    assert "registers no webhooks" in printed.stderr


@pytest.mark.parametrize("kubectl", [newest_kubectl()], ids=lambda path: path.name)
def test_run_embedded_installs_the_webhooks(kubectl: pathlib.Path, tmp_path: pathlib.Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "kubeloop.cli.main", "run", EXAMPLE, "--embedded", "--install-crds"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        kubeconfig = ""
        for line in process.stdout:
            if "ready at" in line:
                kubeconfig = line.rsplit("kubeconfig=", 1)[1].strip()
            if "installed: MutatingWebhookConfiguration/mutating-webhook-configuration" in line:
                break
        assert kubeconfig, "the embedded server never said it was ready"
        run = [str(kubectl), "--kubeconfig", kubeconfig]
        env = kubectl_env(tmp_path)
        site = {
            "apiVersion": "web.kubeloop.dev/v1",
            "kind": "Website",
            "metadata": {"name": "s"},
            "spec": {"domain": "s.example.com"},
        }
        created = subprocess.run(
            [*run, "create", "-f", "-", "-o", "json"],
            input=json.dumps(site),
            capture_output=True,
            text=True,
            env=env,
        )
        assert created.returncode == 0, created.stderr
        assert json.loads(created.stdout)["spec"] == {
            "domain": "s.example.com",
            "image": "nginx:1.27",
            "replicas": 1,
        }
        too_many = {**site, "metadata": {"name": "t"}, "spec": {"domain": "t.example.com", "replicas": 99}}
        refused = subprocess.run(
            [*run, "create", "-f", "-"], input=json.dumps(too_many), capture_output=True, text=True, env=env
        )
        assert "spec.replicas: Invalid value: 99: must be at most 10" in refused.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
