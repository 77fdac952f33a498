"""The process node's network: each local pod has its own loopback address (so two pods listen on
one port), which its status, probes and Endpoints use; a pod reaches a Service by its name in
each of its forms, and by its ClusterIP, through the proxy the node puts in its environment,
round the Service's ready endpoints; a Service with none is a 503 saying so; the outside world
is reached as from the machine; the Service variables are there."""

# ruff: noqa: F811  (the process node's fixtures are imported, then requested by name)

from __future__ import annotations

import http.server
import json
import sys
import textwrap
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.apiserver.test_kubectl import Kubectl
from tests.node.test_process_node import api, ended, node, pod_json, pods_dir  # noqa: F401  (fixtures)
from tests.node.test_process_node_lifecycle import POD_IP, SERVER
from tests.node.test_process_node_volumes import apply, kubectl, pod  # noqa: F401  (kubectl: a fixture)

#: Asks each URL of its arguments through whatever proxy its environment names; prints one
#: JSON line: url → the answer's first line or the error.
FETCH = textwrap.dedent("""
    import json, sys, urllib.request, urllib.error
    said = {}
    for url in sys.argv[1:]:
        try:
            said[url] = urllib.request.urlopen(url, timeout=20).read().decode().splitlines()[0]
        except urllib.error.HTTPError as refused:
            said[url] = f"{refused.code} {refused.read().decode().strip()}"
    print(json.dumps(said))
""")


def web(namespace: str, replica: int) -> dict[str, Any]:
    """A pod serving, on its own address and port 8080, a page naming it."""
    name = f"web-{replica}"
    spec = pod(name, namespace, "", restartPolicy="Always", container={
        "command": ["sh", "-c", f'mkdir -p site && echo "{name} at $POD_IP" > site/index.html && cd site && '
                    f'exec {sys.executable} -c "{SERVER}" "$POD_IP" 8080'],
        "env": [POD_IP], "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
    })  # fmt: skip
    spec["metadata"]["labels"] = {"app": "web"}
    return spec


@pytest.fixture
def outside() -> Iterator[int]:
    """A server of the machine, outside the cluster, on every address."""

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"from outside\n")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("0.0.0.0", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()


def test_pods_have_addresses_of_their_own_and_reach_services_by_name(
    kubectl: Kubectl, namespace: str, outside: int
) -> None:
    ns = ["-n", namespace]
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": namespace},
               "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}
    empty = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nobody", "namespace": namespace},
             "spec": {"selector": {"app": "nobody"}, "ports": [{"port": 80}]}}  # fmt: skip
    apply(kubectl, service, empty, web(namespace, 0), web(namespace, 1))
    kubectl("wait", *ns, "--for=condition=Ready", "pod/web-0", "pod/web-1", "--timeout=30s")
    addresses = [pod_json(kubectl, f"web-{i}", namespace)["status"]["podIP"] for i in (0, 1)]
    assert all(a.startswith("127.244.") for a in addresses) and addresses[0] != addresses[1]  # one port, two pods
    endpoints = json.loads(kubectl("get", "endpoints", "web", *ns, "-o", "json").stdout)
    assert sorted(a["ip"] for a in endpoints["subsets"][0]["addresses"]) == sorted(addresses)
    cluster_ip = json.loads(kubectl("get", "service", "web", *ns, "-o", "json").stdout)["spec"]["clusterIP"]
    urls = ["http://web/", f"http://web.{namespace}/", f"http://web.{namespace}.svc/",
            f"http://web.{namespace}.svc.cluster.local/", f"http://{cluster_ip}/", "http://web/",
            "http://nobody/", f"http://127.0.0.2:{outside}/"]  # fmt: skip
    client = pod("client", namespace, "", container={
        "command": [sys.executable, "-c", FETCH + "\nimport os; print(os.environ['WEB_SERVICE_HOST'], os.environ['WEB_SERVICE_PORT'])",
                    *urls]})  # fmt: skip
    apply(kubectl, client)
    assert ended(kubectl, "client", namespace)["status"]["phase"] == "Succeeded", kubectl("logs", "client", *ns).stdout
    answers_line, variables = kubectl("logs", "client", *ns).stdout.splitlines()
    answers = json.loads(answers_line)
    served = [answers[url] for url in urls[:6]]
    assert all(a in (f"web-0 at {addresses[0]}", f"web-1 at {addresses[1]}") for a in served), served
    assert {"web-0", "web-1"} <= {a.split()[0] for a in served}  # round the ready endpoints
    assert answers["http://nobody/"] == f'503 service "{namespace}/nobody" has no ready endpoints for port 80'
    assert answers[urls[-1]] == "from outside"
    assert variables == f"{cluster_ip} 80"


def test_the_proxy_names_its_namespace_and_ports_its_service(kubectl: Kubectl, namespace: str) -> None:
    """A Service's port maps to its endpoints' by name; a port the Service lacks is refused."""
    ns = ["-n", namespace]
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": namespace},
               "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 8000, "targetPort": 8080}]}}  # fmt: skip
    apply(kubectl, service, web(namespace, 0))
    kubectl("wait", *ns, "--for=condition=Ready", "pod/web-0", "--timeout=30s")
    apply(kubectl, pod("asker", namespace, "", container={
        "command": [sys.executable, "-c", FETCH, "http://web:8000/", "http://web:9999/"]}))  # fmt: skip
    assert ended(kubectl, "asker", namespace)["status"]["phase"] == "Succeeded"
    answers = json.loads(kubectl("logs", "asker", *ns).stdout)
    assert answers["http://web:8000/"].startswith("web-0 at 127.244.")
    assert answers["http://web:9999/"] == f'503 service "{namespace}/web" has no port 9999'
