"""What a cluster creates by itself: every namespace's ``default`` ServiceAccount and
``kube-root-ca.crt`` (kept there), the ``kubernetes`` Service with endpoints naming the server,
and Services' cluster IPs and node ports as kube-apiserver allocates them."""

from __future__ import annotations

import ipaddress
import urllib.parse
from collections.abc import Iterator

import pytest

from kubeloop.testing.server import start_server as start_cluster
from tests.conftest import Client, ServerThread, eventually


@pytest.fixture(scope="module")
def cluster() -> Iterator[ServerThread]:
    server = start_cluster()  # as users get it: namespace defaults on
    yield server
    server.stop()


@pytest.fixture
def client(cluster: ServerThread) -> Client:
    return Client(cluster)


def _names(client: Client, path: str) -> list[str]:
    answer = client.get(path)
    assert answer.status_code == 200, answer.text
    return [item["metadata"]["name"] for item in answer.json()["items"]]


async def test_every_namespace_gets_its_service_account_and_ca(client: Client, cluster: ServerThread) -> None:
    assert client.post("/api/v1/namespaces", {"metadata": {"name": "team"}}).status_code == 201
    base = "/api/v1/namespaces/team"

    def present() -> None:
        assert _names(client, f"{base}/serviceaccounts") == ["default"]
        assert _names(client, f"{base}/configmaps") == ["kube-root-ca.crt"]

    await eventually(present)
    credentials = cluster.server.credentials
    assert credentials is not None
    ca = client.get(f"{base}/configmaps/kube-root-ca.crt").json()
    assert ca["data"] == {"ca.crt": credentials.ca_cert_pem.decode()}
    assert "kubernetes.io/description" in ca["metadata"]["annotations"]

    assert client.delete(f"{base}/serviceaccounts/default").status_code == 200
    assert (
        client.put(f"{base}/configmaps/kube-root-ca.crt", {**ca, "data": {"ca.crt": "forged"}}).status_code
        == 200
    )

    def restored() -> None:
        assert _names(client, f"{base}/serviceaccounts") == ["default"]
        now = client.get(f"{base}/configmaps/kube-root-ca.crt").json()
        assert now["data"] == {"ca.crt": credentials.ca_cert_pem.decode()}

    await eventually(restored)
    assert "default" in _names(client, "/api/v1/namespaces/default/serviceaccounts")


def test_the_kubernetes_service_points_at_the_server(client: Client, cluster: ServerThread) -> None:
    service = client.get("/api/v1/namespaces/default/services/kubernetes").json()
    port = urllib.parse.urlsplit(cluster.url).port
    assert service["spec"]["clusterIP"] == "10.96.0.1"
    assert service["spec"]["clusterIPs"] == ["10.96.0.1"]
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]
    assert service["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}
    endpoints = client.get("/api/v1/namespaces/default/endpoints/kubernetes").json()
    assert endpoints["subsets"][0]["ports"][0]["port"] == port
    assert endpoints["subsets"][0]["addresses"] == [{"ip": "127.0.0.1"}]
    slice_ = client.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes").json()
    assert slice_["endpoints"][0]["addresses"] == ["127.0.0.1"]
    assert slice_["metadata"]["labels"]["kubernetes.io/service-name"] == "kubernetes"


def _service(name: str, **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80}], **spec},
    }


def test_services_get_cluster_ips_and_node_ports(client: Client) -> None:
    assert client.post("/api/v1/namespaces", {"metadata": {"name": "svc"}}).status_code == 201
    base = "/api/v1/namespaces/svc/services"
    first = client.post(base, _service("a")).json()["spec"]
    second = client.post(base, _service("b", type="NodePort")).json()["spec"]
    assert first["clusterIP"] != second["clusterIP"]
    for spec in (first, second):
        assert ipaddress.ip_address(spec["clusterIP"]) in ipaddress.ip_network("10.96.0.0/12")
        assert spec["clusterIPs"] == [spec["clusterIP"]]
        assert (spec["ipFamilies"], spec["ipFamilyPolicy"]) == (["IPv4"], "SingleStack")
    assert 30000 <= second["ports"][0]["nodePort"] <= 32767
    assert second["externalTrafficPolicy"] == "Cluster"
    headless = client.post(base, _service("h", clusterIP="None")).json()["spec"]
    assert headless["clusterIPs"] == ["None"]

    # An update that leaves them out keeps them; changing the IP is refused.
    kept = client.put(f"{base}/b", {**_service("b", type="NodePort")}).json()
    assert kept["spec"]["clusterIP"] == second["clusterIP"]
    assert kept["spec"]["ports"][0]["nodePort"] == second["ports"][0]["nodePort"]
    changed = client.put(f"{base}/a", _service("a", clusterIP="10.96.77.77"))
    assert changed.status_code == 422
    assert "spec.clusterIPs[0]" in changed.json()["message"]

    taken = client.post(base, _service("c", clusterIP=first["clusterIP"]))
    assert taken.status_code == 422
    assert "provided IP is already allocated" in taken.json()["message"]
    outside = client.post(base, _service("d", clusterIP="192.168.1.1"))
    assert outside.status_code == 422 and "not in the valid range" in outside.json()["message"]
    port_taken = client.post(
        base, _service("e", type="NodePort", ports=[{"port": 80, "nodePort": second["ports"][0]["nodePort"]}])
    )
    assert port_taken.status_code == 422 and "already allocated" in port_taken.json()["message"]
    assert client.get(f"{base}/c").status_code == 404  # nothing half-written
