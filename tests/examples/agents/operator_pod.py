"""The agent platform operator as a deployed pod of it would run, but as a process here: the
simulating server runs no containers, so a test that lays the operator out (``kubectl apply
-k``, ``helm install``) starts what the Deployment describes itself — its container's
arguments and environment (Secret references resolved), with the credentials of its
ServiceAccount's token, so only with the permissions the manifests grant. Its listening ports
move to free ones on 127.0.0.1, and the webhook Service's Endpoints point at the webhook port,
as the endpoints controller would for the pod: kube-apiserver then calls the webhooks through
the Service, verifying the certificate the operator keeps against the Service's name."""

from __future__ import annotations

import base64
import http.client
import json
import os
import pathlib
import signal
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import yaml

from kubeloop.testing import ServerThread
from tests.apiserver.test_kubectl import Kubectl

AGENTS = pathlib.Path(__file__).parents[3] / "examples" / "agents"
#: Where the image has the operator (examples/agents/Dockerfile).
IMAGE_PATH = "/app/examples/agents"


class _ReplicaConnection(http.client.HTTPSConnection):
    """HTTPS to 127.0.0.1:``port``, the certificate checked for ``host`` against ``ca``."""

    def __init__(self, host: str, port: int, ca: bytes) -> None:
        super().__init__(host, port, context=ssl.create_default_context(cadata=ca.decode()), timeout=30)

    def connect(self) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Kube(Kubectl):
    """kubectl against one server (the test's own credentials), which it remembers."""

    def __init__(self, binary: pathlib.Path, server: ServerThread) -> None:
        super().__init__(binary, pathlib.Path(server.kubeconfig), pathlib.Path(server.kubeconfig).parent)
        self.server = server

    def get(self, *args: str) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self("get", *args, "-o", "json").stdout)
        return found


@dataclass
class OperatorPod:
    """One replica of ``deployment`` (in ``namespace``), run from this checkout."""

    kube: Kube
    namespace: str
    deployment: str
    #: The Service whose Endpoints should reach the webhook server (None: no webhooks).
    webhook_service: str | None
    folder: pathlib.Path
    probe_port: int = field(default_factory=free_port)
    webhook_port: int = field(default_factory=free_port)
    inbound_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    process: subprocess.Popen[str] | None = None
    output: list[str] = field(default_factory=list)

    def start(self) -> OperatorPod:
        pod = self.kube.get("deployment", self.deployment, "-n", self.namespace)["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        args = [AGENTS.as_posix() if arg == IMAGE_PATH else arg for arg in container["args"]]
        assert args[0] == "run", args
        env = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
        env.update(self._environment(container.get("env") or []))
        # Where this process listens instead of the pod's ports (argparse keeps the last value),
        # and keeps its files instead of the pod's folders.
        env["AGENTS_WEBHOOK_BIND_ADDRESS"] = f"127.0.0.1:{self.inbound_port}"
        if "AGENTS_WEBHOOK_CERT_DIR" in env:
            env["AGENTS_WEBHOOK_CERT_DIR"] = str(self.folder / "inbound-certs")
        args += [
            f"--kubeconfig={self._service_account_kubeconfig(pod['serviceAccountName'])}",
            f"--health-probe-bind-address=127.0.0.1:{self.probe_port}",
            f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
            f"--webhook-port={self.webhook_port}",
            f"--webhook-cert-dir={self.folder / 'certs'}",
        ]
        if self.webhook_service is not None:
            endpoints = {
                "apiVersion": "v1",
                "kind": "Endpoints",
                "metadata": {"name": self.webhook_service, "namespace": self.namespace},
                "subsets": [
                    {
                        "addresses": [{"ip": "127.0.0.1"}],
                        "ports": [{"name": "webhook", "port": self.webhook_port}],
                    }
                ],
            }
            self.kube("apply", "-f", "-", stdin=yaml.safe_dump(endpoints))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kubeloop.cli.main", *args],
            cwd=AGENTS, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
            start_new_session=True,
        )  # fmt: skip
        return self

    def wait_for_line(self, text: str) -> str:
        """The first line of the operator's output holding ``text`` (fails if it exits first)."""
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)
            if text in line:
                return line
        raise AssertionError(f"the operator exited before saying {text!r}:\n{''.join(self.output)}")

    def post_run(
        self, body: dict[str, Any], *, token: str, delivery: str, ca: bytes
    ) -> tuple[int, dict[str, Any]]:
        """POST ``body`` to this replica's ``/runs`` over HTTPS, checking the certificate against
        the CA ``ca`` for the inbound Service's name, as a sender through the Service would."""
        connection = _ReplicaConnection(self.inbound_service_host, self.inbound_port, ca)
        try:
            connection.request(
                "POST", "/runs", json.dumps(body),
                {"Authorization": f"Bearer {token}", "X-Delivery-ID": delivery, "Content-Type": "application/json"},
            )  # fmt: skip
            answer = connection.getresponse()
            return answer.status, json.loads(answer.read())
        finally:
            connection.close()

    @property
    def inbound_service_host(self) -> str:
        """The name the inbound endpoint's certificate is for: its Service's, in the cluster."""
        pod = self.kube.get("deployment", self.deployment, "-n", self.namespace)["spec"]["template"]["spec"]
        env = {var["name"]: var.get("value") for var in pod["containers"][0].get("env") or ()}
        return f"{env['AGENTS_WEBHOOK_SERVICE']}.{self.namespace}.svc"

    def scrape(self, token: str) -> tuple[int, str]:
        """GET its /metrics over HTTPS with ``token`` (the certificate is the process's own, not
        checked): the status and the body."""
        unchecked = ssl.create_default_context()
        unchecked.check_hostname, unchecked.verify_mode = False, ssl.CERT_NONE
        request = urllib.request.Request(
            f"https://127.0.0.1:{self.metrics_port}/metrics", headers={"Authorization": f"Bearer {token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30, context=unchecked) as answer:
                return int(answer.status), answer.read().decode()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read().decode()

    def output_so_far(self) -> str:
        """What the operator has said: it is stopped (SIGTERM) to read the rest."""
        assert self.process is not None
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        rest, _ = self.process.communicate(timeout=60)
        return "".join(self.output) + rest

    def ready(self) -> bool:
        """Whether its readiness probe (the pod's ``/readyz``) answers 200."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.probe_port}/readyz", timeout=10) as answer:
                return int(answer.status) == 200
        except (urllib.error.URLError, ConnectionError):
            return False

    def stop(self) -> str:
        """SIGTERM, as the kubelet sends; the operator's output. It must exit 0."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGTERM)
        rest, _ = self.process.communicate(timeout=60)
        output = "".join(self.output) + rest
        assert self.process.returncode == 0, output
        return output

    def _environment(self, entries: list[dict[str, Any]]) -> dict[str, str]:
        env: dict[str, str] = {}
        for entry in entries:
            if "value" in entry:
                env[entry["name"]] = entry["value"]
                continue
            ref = entry["valueFrom"]["secretKeyRef"]
            found = self.kube("get", "secret", ref["name"], "-n", self.namespace, "-o", "json", check=False)
            if found.returncode != 0:
                assert ref.get("optional"), f"the pod would not start: Secret {ref['name']} is missing"
                continue
            env[entry["name"]] = base64.b64decode(json.loads(found.stdout)["data"][ref["key"]]).decode()
        return env

    def _service_account_kubeconfig(self, account: str) -> pathlib.Path:
        token = self.kube("create", "token", account, "-n", self.namespace).stdout.strip()
        server = self.kube.server
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "pod",
            "clusters": [
                {"name": "c", "cluster": {"server": server.url, "certificate-authority": server.ca_file}}
            ],
            "users": [{"name": "sa", "user": {"token": token}}],
            "contexts": [
                {"name": "pod", "context": {"cluster": "c", "user": "sa", "namespace": self.namespace}}
            ],
        }
        path = self.folder / f"{account}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return path
