"""What a cluster creates by itself: every namespace's ``default`` ServiceAccount and
``kube-root-ca.crt`` (kept there), the ``kubernetes`` Service with endpoints naming the server,
and Services' cluster IPs and node ports as kube-apiserver allocates them."""

from __future__ import annotations

import ipaddress
import pathlib
import signal
import time
import urllib.parse
from collections.abc import Callable, Iterator

import pytest

from kubeloop.testing.serverthread import start_server as start_cluster
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


def test_cluster_objects_on_the_durable_server_across_a_sigkill(tmp_path: pathlib.Path) -> None:
    # `kubeloop apiserver --data-dir`, killed and started again on another port: the kubernetes
    # Service's endpoints follow the port, Services keep their IPs and new ones get others, and
    # the namespace defaults are still (or again) in place with the same CA.
    from tests.apiserver.storage.test_durability import apiserver, session_for

    services = "/api/v1/namespaces/default/services"
    with apiserver(tmp_path) as (proc, url):
        session = session_for(tmp_path)
        first = session.post(url + services, json=_service("a"), timeout=10).json()["spec"]["clusterIP"]
        assert session.post(url + "/api/v1/namespaces", json={"metadata": {"name": "team"}}, timeout=10).ok

        def defaults_present() -> None:
            listed = session.get(url + "/api/v1/namespaces/team/configmaps", timeout=10).json()["items"]
            assert [item["metadata"]["name"] for item in listed] == ["kube-root-ca.crt"]

        _poll(defaults_present)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    with apiserver(tmp_path) as (_proc, url):
        session = session_for(tmp_path)
        port = urllib.parse.urlsplit(url).port
        endpoints = session.get(url + "/api/v1/namespaces/default/endpoints/kubernetes", timeout=10).json()
        assert endpoints["subsets"][0]["ports"][0]["port"] == port
        kept = session.get(url + services + "/a", timeout=10).json()["spec"]["clusterIP"]
        assert kept == first
        second = session.post(url + services, json=_service("b"), timeout=10).json()["spec"]["clusterIP"]
        assert second not in (first, "10.96.0.1")
        ca = session.get(url + "/api/v1/namespaces/team/configmaps/kube-root-ca.crt", timeout=10).json()
        assert ca["data"]["ca.crt"] == (tmp_path / "pki" / "ca.crt").read_text()
        assert session.get(url + "/api/v1/namespaces/team/serviceaccounts/default", timeout=10).ok


def _poll(check: Callable[[], None], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            check()
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_bad_bindings_evictions_and_reviews_get_statuses(client: Client) -> None:
    assert client.post("/api/v1/namespaces", {"metadata": {"name": "bad"}}).status_code == 201
    base = "/api/v1/namespaces/bad"
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    assert client.post(f"{base}/pods", pod).status_code == 201
    cases = [
        (f"{base}/pods/p/binding", {"metadata": {"name": "p"}}, 422, "target.name"),
        (
            f"{base}/pods/p/binding",
            {"metadata": {"name": "p"}, "target": {"kind": "Pod", "name": "n"}},
            422,
            "target.kind",
        ),
        (f"{base}/bindings", {"target": {"name": "n"}}, 422, "metadata.name"),
        (f"{base}/pods/p/binding", [1, 2], 400, "unrecognized (must be of type Binding)"),
        ("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", [1], 400, "SelfSubjectAccessReview"),
        ("/apis/authentication.k8s.io/v1/tokenreviews", "token", 400, "TokenReview"),
        (
            f"{base}/pods/p/eviction",
            {"metadata": {"name": "p"}, "deleteOptions": "now"},
            400,
            "deleteOptions",
        ),
        (f"{base}/pods/p/eviction", {"metadata": {"name": "q"}}, 400, "does not match"),
        (
            "/apis/authentication.k8s.io/v1/tokenreviews",
            {"spec": {"token": "x", "audiences": "api"}},
            422,
            "spec.audiences",
        ),
    ]
    for path, body, code, named in cases:
        answer = client.post(path, body)
        assert answer.status_code == code, (path, body, answer.text)
        assert answer.json()["kind"] == "Status" and named in answer.json()["message"]
    deep_body = (
        '{"metadata": {"name": "p"}, "target": {"name": "n"}, "x": ' + '{"a": ' * 5000 + "1" + "}" * 5001
    )
    deep = client.request(
        "POST", f"{base}/pods/p/binding", data=deep_body, headers={"Content-Type": "application/json"}
    )
    assert deep.status_code == 400 and "nest" in deep.json()["message"], deep.text[:300]
    huge = client.post(
        f"{base}/pods/p/binding",
        {"metadata": {"name": "p", "annotations": {"a": "x" * (4 << 20)}}, "target": {"name": "n"}},
    )
    assert huge.status_code in (413, 422), huge.text[:300]
    assert "nodeName" not in client.get(f"{base}/pods/p").json()["spec"]  # nothing half-written
    assert client.put(f"{base}/pods/p/binding", {}).status_code == 405


def test_a_dry_run_eviction_spends_nothing(client: Client) -> None:
    assert client.post("/api/v1/namespaces", {"metadata": {"name": "dry"}}).status_code == 201
    base = "/api/v1/namespaces/dry"
    pod = {
        "metadata": {"name": "p", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    made = client.post(f"{base}/pods", pod).json()
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    client.put(f"{base}/pods/p/status", {**made, "status": ready})
    pdbs = "/apis/policy/v1/namespaces/dry/poddisruptionbudgets"
    client.post(
        pdbs,
        {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 0, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    # The disruption controller allows one disruption: one healthy pod, none required.
    deadline = time.monotonic() + 20
    while client.get(f"{pdbs}/web").json().get("status", {}).get("disruptionsAllowed") != 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "p"},
        "deleteOptions": {"dryRun": ["All"]},
    }
    assert client.post(f"{base}/pods/p/eviction", eviction).status_code == 201
    assert client.get(f"{base}/pods/p").status_code == 200
    status = client.get(f"{pdbs}/web").json()["status"]
    assert status["disruptionsAllowed"] == 1 and "disruptedPods" not in status
