"""kopf's own admission webhooks against the embedded server: kopf serves them (its
WebhookServer, with a certificate of the test's: kopf's self-signed one needs oscrypto, which
cannot read OpenSSL 3's version) and registers them itself (``admission.managed``); kubectl of
every version on the machine then writes ConfigMaps through them."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from kubeloop import certs
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import Client, ServerThread

HERE = pathlib.Path(__file__).resolve().parent
ADMISSION = "/apis/admissionregistration.k8s.io/v1"


@pytest.fixture(scope="module")
def kopf_operator(module_server: ServerThread, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    folder = tmp_path_factory.mktemp("kopf-certs")
    credentials = certs.load_or_create_credentials(None, ["127.0.0.1"])
    (folder / "tls.crt").write_bytes(credentials.server_cert_pem)
    (folder / "tls.key").write_bytes(credentials.server_key_pem)
    (folder / "ca.crt").write_bytes(credentials.ca_cert_pem)
    log = folder / "kopf.log"
    env = {**os.environ, "KUBECONFIG": str(module_server.kubeconfig), "WEBHOOK_CERTS": str(folder)}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "kopf", "run", "--standalone", "--all-namespaces", "--verbose",
             str(HERE / "kopf_admission_operator.py")],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    api = Client(module_server)
    try:
        # kopf writes both configurations once its server listens: watch for the second one.
        watch = api.session.get(
            f"{module_server.url}{ADMISSION}/mutatingwebhookconfigurations",
            params={"watch": "1", "fieldSelector": "metadata.name=auto.kopf.dev"},
            stream=True,
        )
        for line in watch.iter_lines():
            event = json.loads(line)
            if event["object"].get("webhooks"):
                break
            assert process.poll() is None, log.read_text()
        watch.close()
        yield api
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


@pytest.fixture(params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def kubectl(request: pytest.FixtureRequest, module_server: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(request.param, module_server.kubeconfig, tmp_path)


_namespaces = iter(range(1, 1000))


def test_kopf_validates_and_mutates_what_kubectl_writes(kopf_operator: Client, kubectl: Kubectl) -> None:
    namespace = f"kopf-{next(_namespaces)}"
    kubectl("create", "namespace", namespace)
    refused = kubectl(
        "create", "-n", namespace, "configmap", "leaky", "--from-literal=password=x", check=False
    )
    assert refused.returncode != 0
    assert (
        'admission webhook "no-secrets.auto.kopf.dev" denied the request: passwords belong in Secrets'
        in refused.stderr
    )
    created = kubectl(
        "create", "-n", namespace, "configmap", "fine", "--from-literal=colour=blue", "-o", "json"
    )
    assert "Warning: kopf looked at this ConfigMap" in created.stderr
    assert json.loads(created.stdout)["metadata"]["labels"] == {"stamped-by": "kopf"}
    assert kopf_operator.get(f"/api/v1/namespaces/{namespace}/configmaps/leaky").status_code == 404
