"""Simulated StatefulSets, DaemonSets and Service endpoints (``--simulate``): the pods, revisions
and status kube-controller-manager's controllers make, read through kubectl 1.27 and 1.33
(``rollout status``, ``rollout history``, ``rollout undo``, ``describe service``) and the API."""

# ruff: noqa: F811  (the simulated server's fixtures are imported, then requested by name)

from __future__ import annotations

import asyncio
import json
import pathlib
import threading
import time
from collections.abc import Callable
from typing import Any

from kubeloop.node.simulation import NODE_NAME
from tests.apiserver.test_kubectl import Kubectl
from tests.conftest import Client
from tests.controllermanager.test_workload_simulation import api, kubectl, simulated  # noqa: F401  (fixtures)

STATEFULSET = """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 3
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
      - {name: db, image: "postgres:16"}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
"""

DAEMONSET = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
      - {name: agent, image: "fluentd:1"}
"""


def wait_for(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)
    return result


def pods(api: Client, namespace: str, selector: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = api.get(
        f"/api/v1/namespaces/{namespace}/pods", params={"labelSelector": selector}
    ).json()["items"]
    return items


def is_ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", ()))


# ---------------------------------------------------------------------------------- StatefulSets


def test_a_stateful_set_rolls_out_updates_and_undoes_in_order(
    kubectl: Kubectl, api: Client, namespace: str
) -> None:
    ns = ["-n", namespace]
    kubectl("apply", *ns, "-f", "-", stdin=STATEFULSET)
    rolled = kubectl("rollout", "status", *ns, "statefulset/db", "--timeout=30s")
    assert "partitioned roll out complete: 3 new pods have been updated" in rolled.stdout
    first = api.get(f"/apis/apps/v1/namespaces/{namespace}/statefulsets/db").json()
    status = first["status"]
    assert status["observedGeneration"] == first["metadata"]["generation"]
    assert (
        status["replicas"],
        status["readyReplicas"],
        status["currentReplicas"],
        status["updatedReplicas"],
    ) == (
        3,
        3,
        3,
        3,
    )
    assert status["currentRevision"] == status["updateRevision"]
    revision = status["updateRevision"]
    by_name = {p["metadata"]["name"]: p for p in pods(api, namespace, "app=db")}
    assert sorted(by_name) == ["db-0", "db-1", "db-2"]
    for index, (name, pod) in enumerate(sorted(by_name.items())):
        labels = pod["metadata"]["labels"]
        assert labels["statefulset.kubernetes.io/pod-name"] == name
        assert labels["apps.kubernetes.io/pod-index"] == str(index)
        assert labels["controller-revision-hash"] == revision
        assert pod["spec"]["hostname"] == name and pod["spec"]["subdomain"] == "db"
        [volume] = [v for v in pod["spec"]["volumes"] if v["name"] == "data"]
        assert volume["persistentVolumeClaim"]["claimName"] == f"data-{name}"
        assert pod["metadata"]["ownerReferences"][0]["uid"] == first["metadata"]["uid"]
    claims = api.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims").json()["items"]
    assert sorted(c["metadata"]["name"] for c in claims) == ["data-db-0", "data-db-1", "data-db-2"]
    table = kubectl("get", *ns, "statefulset", "db").stdout.splitlines()[1].split()
    assert table[:2] == ["db", "3/3"]

    kubectl("set", "image", *ns, "statefulset/db", "db=postgres:17")
    kubectl("rollout", "status", *ns, "statefulset/db", "--timeout=30s")
    updated = api.get(f"/apis/apps/v1/namespaces/{namespace}/statefulsets/db").json()["status"]
    assert updated["updateRevision"] != revision
    assert updated["currentRevision"] == updated["updateRevision"]
    running = pods(api, namespace, "app=db")
    assert {p["spec"]["containers"][0]["image"] for p in running} == {"postgres:17"}
    assert {p["metadata"]["labels"]["controller-revision-hash"] for p in running} == {
        updated["updateRevision"]
    }
    history = kubectl("rollout", "history", *ns, "statefulset/db").stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]

    kubectl("rollout", "undo", *ns, "statefulset/db")
    kubectl("rollout", "status", *ns, "statefulset/db", "--timeout=30s")

    def back_on_16() -> bool:
        current = pods(api, namespace, "app=db")
        return len(current) == 3 and {p["spec"]["containers"][0]["image"] for p in current} == {"postgres:16"}

    wait_for(back_on_16)
    # Going back renumbers the first revision as the newest, as upstream.
    revisions = api.get(f"/apis/apps/v1/namespaces/{namespace}/controllerrevisions").json()["items"]
    numbers = {r["metadata"]["name"]: r["revision"] for r in revisions}
    assert numbers[revision] == 3 and sorted(numbers.values()) == [2, 3]

    kubectl("scale", *ns, "statefulset/db", "--replicas=1")
    wait_for(lambda: [p["metadata"]["name"] for p in pods(api, namespace, "app=db")] == ["db-0"])
    # Claims outlive their pods (the default retention policy).
    assert len(api.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims").json()["items"]) == 3


def record_pods(
    api: Client, namespace: str, selector: str, until: Callable[[], Any]
) -> list[list[dict[str, Any]]]:
    """Every list of the pods ``selector`` matches, taken every 10 ms until ``until()``."""
    snapshots: list[list[dict[str, Any]]] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            snapshots.append(pods(api, namespace, selector))
            time.sleep(0.01)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        wait_for(until)
    finally:
        stop.set()
        poller.join()
    return snapshots


def test_ordered_ready_makes_each_pod_after_the_one_before_is_ready(api: Client, namespace: str) -> None:
    """OrderedReady: at no moment does pod i exist while pod i-1 is not running and ready.
    Parallel: all pods are made at once, before any is ready."""
    import yaml

    body = yaml.safe_load(STATEFULSET)
    body["spec"]["replicas"] = 4
    assert api.post(f"/apis/apps/v1/namespaces/{namespace}/statefulsets", body).status_code == 201
    snapshots = record_pods(
        api, namespace, "app=db", lambda: sum(is_ready(p) for p in pods(api, namespace, "app=db")) == 4
    )
    for snapshot in snapshots:
        present = {int(p["metadata"]["name"].rsplit("-", 1)[1]): p for p in snapshot}
        for index in present:
            if index:
                assert index - 1 in present and is_ready(present[index - 1]), sorted(present)

    body = yaml.safe_load(STATEFULSET.replace("name: db}", "name: par}").replace("app: db", "app: par"))
    body["spec"].update(replicas=3, podManagementPolicy="Parallel")
    assert api.post(f"/apis/apps/v1/namespaces/{namespace}/statefulsets", body).status_code == 201
    snapshots = record_pods(
        api, namespace, "app=par", lambda: sum(is_ready(p) for p in pods(api, namespace, "app=par")) == 3
    )
    with_a_ready_pod = [s for s in snapshots if any(is_ready(p) for p in s)]
    assert with_a_ready_pod and all(len(s) == 3 for s in with_a_ready_pod)


# ----------------------------------------------------------------------------------- DaemonSets


def test_a_daemon_set_runs_one_pod_per_node_and_rolls_out(
    kubectl: Kubectl, api: Client, namespace: str
) -> None:
    ns = ["-n", namespace]
    kubectl("apply", *ns, "-f", "-", stdin=DAEMONSET)
    rolled = kubectl("rollout", "status", *ns, "daemonset/agent", "--timeout=30s")
    assert 'daemon set "agent" successfully rolled out' in rolled.stdout
    daemon_set = api.get(f"/apis/apps/v1/namespaces/{namespace}/daemonsets/agent").json()
    status = daemon_set["status"]
    assert {
        k: status.get(k) for k in ("desiredNumberScheduled", "currentNumberScheduled", "numberReady")
    } == {
        "desiredNumberScheduled": 1,
        "currentNumberScheduled": 1,
        "numberReady": 1,
    }
    assert status["numberMisscheduled"] == 0 and status["updatedNumberScheduled"] == 1
    assert status["numberAvailable"] == 1 and "numberUnavailable" not in status
    [pod] = pods(api, namespace, "app=agent")
    assert pod["spec"]["nodeName"] == NODE_NAME
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE_NAME]}]}
        ]
    }
    assert {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "spec"
    ]["tolerations"]
    assert pod["metadata"]["labels"]["pod-template-generation"] == "1"
    table = kubectl("get", *ns, "daemonset", "agent").stdout.splitlines()[1].split()
    assert table[:6] == ["agent", "1", "1", "1", "1", "1"]

    kubectl("set", "image", *ns, "daemonset/agent", "agent=fluentd:2")
    kubectl("rollout", "status", *ns, "daemonset/agent", "--timeout=30s")

    def replaced() -> bool:
        current = pods(api, namespace, "app=agent")
        return len(current) == 1 and current[0]["spec"]["containers"][0]["image"] == "fluentd:2"

    wait_for(replaced)
    history = kubectl("rollout", "history", *ns, "daemonset/agent").stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]


def test_daemon_set_status_counters_are_written_even_when_zero(api: Client, namespace: str) -> None:
    """Go writes a DaemonSet's four required counters even at zero: on create, before any
    controller ran, and for a DaemonSet that fits no node."""
    import yaml

    body = yaml.safe_load(DAEMONSET)
    body["spec"]["template"]["spec"]["nodeSelector"] = {"disk": "ssd"}
    created = api.post(f"/apis/apps/v1/namespaces/{namespace}/daemonsets", body)
    assert created.status_code == 201
    zeros = {
        "currentNumberScheduled": 0,
        "numberMisscheduled": 0,
        "desiredNumberScheduled": 0,
        "numberReady": 0,
    }
    assert created.json()["status"] == zeros
    observed = wait_for(
        lambda: (
            (ds := api.get(f"/apis/apps/v1/namespaces/{namespace}/daemonsets/agent").json())["status"].get(
                "observedGeneration"
            )
            and ds
        )
    )
    assert {k: observed["status"][k] for k in zeros} == zeros
    assert pods(api, namespace, "app=agent") == []
    # A status written without them gets them back.
    api.patch(
        f"/apis/apps/v1/namespaces/{namespace}/daemonsets/agent/status",
        [{"op": "replace", "path": "/status", "value": {}}],
        content_type="application/json-patch+json",
    )
    assert {
        k: v
        for k, v in api.get(f"/apis/apps/v1/namespaces/{namespace}/daemonsets/agent").json()["status"].items()
        if k in zeros
    } == zeros
    # A ReplicaSet's replicas likewise.
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "none"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "none"}},
            "template": {
                "metadata": {"labels": {"app": "none"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    assert api.post(f"/apis/apps/v1/namespaces/{namespace}/replicasets", replica_set).json()["status"] == {
        "replicas": 0
    }


def test_a_daemon_set_follows_nodes_as_they_come_and_go(api: Client, namespace: str) -> None:
    """A labelled node that appears gets a pod pinned to it (the simulated scheduler cannot place it
    on its own node, so it is Unschedulable); the pod goes when the node does."""
    import yaml

    body = yaml.safe_load(DAEMONSET)
    assert api.post(f"/apis/apps/v1/namespaces/{namespace}/daemonsets", body).status_code == 201
    wait_for(lambda: sum(is_ready(p) for p in pods(api, namespace, "app=agent")) == 1)
    node = f"extra-{namespace}"
    api.post("/api/v1/nodes", {"metadata": {"name": node}})
    try:
        other = wait_for(
            lambda: [
                p
                for p in pods(api, namespace, "app=agent")
                if p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
                    "nodeSelectorTerms"
                ][0]["matchFields"][0]["values"]
                == [node]
            ]
        )
        [pending] = other
        unscheduled = wait_for(
            lambda: [
                c
                for c in api.get(f"/api/v1/namespaces/{namespace}/pods/{pending['metadata']['name']}")
                .json()["status"]
                .get("conditions", ())
                if c["type"] == "PodScheduled" and c["status"] == "False"
            ]
        )
        assert unscheduled[0]["reason"] == "Unschedulable"
        status = wait_for(
            lambda: (
                (s := api.get(f"/apis/apps/v1/namespaces/{namespace}/daemonsets/agent").json()["status"])[
                    "desiredNumberScheduled"
                ]
                == 2
                and s
            )
        )
        assert status["numberReady"] == 1
    finally:
        api.delete(f"/api/v1/nodes/{node}")
    wait_for(lambda: len(pods(api, namespace, "app=agent")) == 1)
    wait_for(
        lambda: (
            api.get(f"/apis/apps/v1/namespaces/{namespace}/daemonsets/agent").json()["status"][
                "desiredNumberScheduled"
            ]
            == 1
        )
    )


# ------------------------------------------------------------------------------------- Services


def test_a_service_gets_endpoints_and_an_endpoint_slice_of_its_ready_pods(
    kubectl: Kubectl, api: Client, namespace: str
) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "nginx",
                            "image": "nginx",
                            "ports": [{"name": "http", "containerPort": 8080}],
                        }
                    ]
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "labels": {"tier": "front"}},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
    }
    assert api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment).status_code == 201
    assert api.post(f"/api/v1/namespaces/{namespace}/services", service).status_code == 201
    kubectl("rollout", "status", "-n", namespace, "deployment/web", "--timeout=30s")
    ready_pods = [p for p in pods(api, namespace, "app=web") if is_ready(p)]
    ips = sorted(p["status"]["podIP"] for p in ready_pods)

    def endpoints() -> dict[str, Any] | None:
        found = api.get(f"/api/v1/namespaces/{namespace}/endpoints/web")
        if found.status_code != 200:
            return None
        subsets = found.json().get("subsets") or []
        addresses = sorted(a["ip"] for s in subsets for a in s.get("addresses", ()))
        return found.json() if addresses == ips else None

    found = wait_for(endpoints)
    [subset] = found["subsets"]
    assert subset["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert {a["targetRef"]["name"] for a in subset["addresses"]} == {
        p["metadata"]["name"] for p in ready_pods
    }
    assert all(a["nodeName"] == NODE_NAME for a in subset["addresses"])
    assert found["metadata"]["labels"] == {"tier": "front"}
    [endpoint_slice] = api.get(
        f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
        params={"labelSelector": "kubernetes.io/service-name=web"},
    ).json()["items"]
    assert endpoint_slice["metadata"]["name"].startswith("web-")
    assert (
        endpoint_slice["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"]
        == "endpointslice-controller.k8s.io"
    )
    assert endpoint_slice["addressType"] == "IPv4"
    assert endpoint_slice["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert sorted(e["addresses"][0] for e in endpoint_slice["endpoints"]) == ips
    assert all(
        e["conditions"] == {"ready": True, "serving": True, "terminating": False}
        for e in endpoint_slice["endpoints"]
    )
    [owner] = endpoint_slice["metadata"]["ownerReferences"]
    assert owner["kind"] == "Service" and owner["controller"]
    described = kubectl("describe", "service", "web", "-n", namespace).stdout
    endpoints_line = next(line for line in described.splitlines() if line.startswith("Endpoints:"))
    assert all(ip in endpoints_line for ip in ips), endpoints_line

    kubectl("scale", "-n", namespace, "deployment/web", "--replicas=0")
    wait_for(lambda: not api.get(f"/api/v1/namespaces/{namespace}/endpoints/web").json().get("subsets"))
    empty = wait_for(
        lambda: [
            s
            for s in api.get(f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices").json()[
                "items"
            ]
            if not s.get("endpoints")
        ]
    )
    assert len(empty) == 1
    kubectl("delete", "-n", namespace, "service", "web")
    wait_for(lambda: api.get(f"/api/v1/namespaces/{namespace}/endpoints/web").status_code == 404)
    wait_for(
        lambda: (
            not api.get(f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices").json()["items"]
        )
    )


def test_services_without_a_selector_keep_the_endpoints_they_are_given(api: Client, namespace: str) -> None:
    service = {"metadata": {"name": "external"}, "spec": {"ports": [{"port": 5432}]}}
    assert api.post(f"/api/v1/namespaces/{namespace}/services", service).status_code == 201
    given = {
        "metadata": {"name": "external"},
        "subsets": [{"addresses": [{"ip": "192.0.2.10"}], "ports": [{"port": 5432}]}],
    }
    assert api.post(f"/api/v1/namespaces/{namespace}/endpoints", given).status_code == 201
    asyncio.run(api.server.settled())  # the endpoints controllers have seen both and are done
    kept = api.get(f"/api/v1/namespaces/{namespace}/endpoints/external").json()
    assert kept["subsets"][0]["addresses"] == [{"ip": "192.0.2.10"}]
    assert api.get(f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices").json()["items"] == []
    assert json.dumps(kept)  # the object is whole


# ---------------------------------------------------------------------------- ReplicationControllers

REPLICATION_CONTROLLER = """\
apiVersion: v1
kind: ReplicationController
metadata: {name: legacy}
spec:
  replicas: 2
  template:
    metadata: {labels: {app: legacy}}
    spec:
      containers:
      - {name: web, image: "nginx:1.27"}
"""


def test_a_replication_controller_keeps_its_pods_running(
    kubectl: Kubectl, api: Client, namespace: str
) -> None:
    ns = ["-n", namespace]
    kubectl("apply", *ns, "-f", "-", stdin=REPLICATION_CONTROLLER)
    base = f"/api/v1/namespaces/{namespace}/replicationcontrollers/legacy"

    def settled(replicas: int) -> bool:
        status = api.get(base).json().get("status", {})
        running = [
            p
            for p in pods(api, namespace, "app=legacy")
            if is_ready(p) and not p["metadata"].get("deletionTimestamp")
        ]
        return (
            status.get("readyReplicas") == replicas == len(running)
            and status.get("availableReplicas") == replicas
        )

    wait_for(lambda: settled(2))
    owners = {
        ref["name"] for p in pods(api, namespace, "app=legacy") for ref in p["metadata"]["ownerReferences"]
    }
    assert owners == {"legacy"}
    assert api.get(base).json()["status"]["observedGeneration"] == 1
    kubectl("scale", *ns, "rc/legacy", "--replicas=3")
    wait_for(lambda: settled(3))
    table = kubectl("get", *ns, "rc", "legacy").stdout.splitlines()[1].split()
    assert table[:4] == ["legacy", "3", "3", "3"]
    # A pod deleted by hand is replaced.
    victim = pods(api, namespace, "app=legacy")[0]["metadata"]["name"]
    kubectl("delete", *ns, "pod", victim, "--wait=false")
    wait_for(
        lambda: (
            victim not in {p["metadata"]["name"] for p in pods(api, namespace, "app=legacy")} and settled(3)
        )
    )
    kubectl("scale", *ns, "rc/legacy", "--replicas=0")
    wait_for(lambda: not pods(api, namespace, "app=legacy"))


# ---------------------------------------------------------------------------- disruption budgets


def test_a_budget_counts_the_scale_of_its_pods_controllers(
    kubectl: Kubectl, api: Client, namespace: str
) -> None:
    ns = ["-n", namespace]
    kubectl("create", "deployment", "web", "--image=nginx:1.27", "--replicas=3", *ns)
    kubectl("create", "poddisruptionbudget", "web", "--selector=app=web", "--max-unavailable=34%", *ns)
    base = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/web"

    def status_is(**wanted: Any) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            status: dict[str, Any] = api.get(base).json().get("status", {})
            return status if all(status.get(k) == v for k, v in wanted.items()) else None

        return wait_for(check)  # type: ignore[no-any-return]

    # 34% of the Deployment's 3 replicas, rounded up: 2 may be unavailable, 1 must stay healthy.
    status = status_is(expectedPods=3, desiredHealthy=1, currentHealthy=3, disruptionsAllowed=2)
    assert status["conditions"][0]["reason"] == "SufficientPods"
    table = kubectl("get", *ns, "pdb", "web").stdout.splitlines()[1].split()
    assert table[:4] == ["web", "N/A", "34%", "2"]
    kubectl("scale", *ns, "deployment/web", "--replicas=5")
    status_is(expectedPods=5, desiredHealthy=3, currentHealthy=5, disruptionsAllowed=2)
    # A Job's pods have no scale to count: the budget cannot be computed, and allows nothing.
    kubectl("create", "job", "once", "--image=busybox", *ns, "--", "sleep", "60")
    kubectl(
        "create",
        "poddisruptionbudget",
        "once",
        "--selector=batch.kubernetes.io/job-name=once",
        "--min-available=50%",
        *ns,
    )

    def failed() -> bool:
        status = (
            api.get(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/once")
            .json()
            .get("status", {})
        )
        conditions = status.get("conditions") or [{}]
        return conditions[0].get("reason") == "SyncFailed" and status.get("disruptionsAllowed") == 0

    wait_for(failed)


def test_the_durable_server_resumes_sets_and_endpoints_across_a_sigkill(tmp_path: pathlib.Path) -> None:
    """`kubeloop apiserver --simulate --data-dir`, killed with SIGKILL while a StatefulSet is half
    made: after the restart (another port) the controllers go on from what is stored — the set
    completes with each pod made once and one revision, the DaemonSet keeps its one pod, the
    Service's endpoints name the set's pods. kubectl 1.27 before the kill, 1.33 after."""
    import signal

    from tests.apiserver.storage.test_durability import apiserver, session_for
    from tests.apiserver.test_kubectl import KUBECTLS

    data = tmp_path / "data"
    service = "apiVersion: v1\nkind: Service\nmetadata: {name: db}\nspec:\n  selector: {app: db}\n  ports: [{port: 5432}]\n"
    with apiserver(data, "--simulate") as (proc, url):
        old, new = (
            Kubectl(KUBECTLS[0], data / "kubeconfig", tmp_path),
            Kubectl(KUBECTLS[-1], data / "kubeconfig", tmp_path),
        )
        for manifest in (STATEFULSET, DAEMONSET, service):
            old("apply", "-f", "-", stdin=manifest)
        session = session_for(data)

        def made() -> list[str]:
            items = session.get(
                url + "/api/v1/namespaces/default/pods", params={"labelSelector": "app=db"}
            ).json()
            return sorted(p["metadata"]["name"] for p in items["items"])

        wait_for(lambda: len(made()) >= 2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    with apiserver(data, "--simulate") as (proc, url):
        session = session_for(data)
        new("rollout", "status", "statefulset/db", "--timeout=60s")
        new("rollout", "status", "daemonset/agent", "--timeout=60s")
        pods = session.get(url + "/api/v1/namespaces/default/pods").json()["items"]
        names = sorted(p["metadata"]["name"] for p in pods if p["metadata"]["labels"].get("app") == "db")
        assert names == ["db-0", "db-1", "db-2"]
        assert len([p for p in pods if p["metadata"]["labels"].get("app") == "agent"]) == 1
        revisions = session.get(url + "/apis/apps/v1/namespaces/default/controllerrevisions").json()["items"]
        assert sorted(r["metadata"]["ownerReferences"][0]["kind"] for r in revisions) == [
            "DaemonSet",
            "StatefulSet",
        ]
        ips = sorted(p["status"]["podIP"] for p in pods if p["metadata"]["labels"].get("app") == "db")

        def endpoint_ips() -> list[str]:
            found = session.get(url + "/api/v1/namespaces/default/endpoints/db").json()
            return sorted(a["ip"] for s in found.get("subsets") or () for a in s.get("addresses", ()))

        wait_for(lambda: endpoint_ips() == ips, timeout=30)
        daemon = session.get(url + "/apis/apps/v1/namespaces/default/daemonsets/agent").json()["status"]
        assert (daemon["desiredNumberScheduled"], daemon["numberReady"], daemon["numberMisscheduled"]) == (
            1,
            1,
            0,
        )
        described = new("describe", "statefulset", "db").stdout
        assert "Pods Status:" in described and "3 Running" in described


def test_the_durable_server_keeps_autoscalers_budgets_and_rbac_checks_across_a_sigkill(
    tmp_path: pathlib.Path,
) -> None:
    """`kubeloop apiserver --simulate --data-dir`, killed with SIGKILL just after an eviction
    spent a budget's disruption: after the restart the v1 view of an autoscaler still carries
    what only v2 says, the disruption controller recounts the budget from what is stored, and the
    escalation check refuses as before. kubectl 1.27 before the kill, 1.33 after."""
    import signal

    from tests.apiserver.storage.test_durability import apiserver, session_for
    from tests.apiserver.test_kubectl import KUBECTLS

    data = tmp_path / "data"
    budgets = "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web"
    old = Kubectl(KUBECTLS[0], data / "kubeconfig", tmp_path)
    new = Kubectl(KUBECTLS[-1], data / "kubeconfig", tmp_path)

    def budget(session: Any, url: str, **wanted: Any) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            status: dict[str, Any] = session.get(url + budgets).json().get("status", {})
            return status if all(status.get(k) == v for k, v in wanted.items()) else None

        return wait_for(check, timeout=30)  # type: ignore[no-any-return]

    with apiserver(data, "--simulate") as (proc, url):
        session = session_for(data)
        old("create", "deployment", "web", "--image=nginx:1.27", "--replicas=3")
        old("autoscale", "deployment", "web", "--min=3", "--max=6", "--cpu-percent=70")
        behavior = {"spec": {"behavior": {"scaleDown": {"stabilizationWindowSeconds": 45}}}}
        old(
            "patch",
            "horizontalpodautoscalers.v2.autoscaling",
            "web",
            "--type=merge",
            "-p",
            json.dumps(behavior),
        )
        old("create", "poddisruptionbudget", "web", "--selector=app=web", "--min-available=2")
        old("rollout", "status", "deployment/web", "--timeout=60s")
        budget(session, url, expectedPods=3, currentHealthy=3, disruptionsAllowed=1)
        listed = session.get(url + "/api/v1/namespaces/default/pods", params={"labelSelector": "app=web"})
        victim = listed.json()["items"][0]["metadata"]["name"]
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": victim}}
        evicted = session.post(f"{url}/api/v1/namespaces/default/pods/{victim}/eviction", json=eviction)
        assert evicted.status_code == 201, evicted.text
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    with apiserver(data, "--simulate") as (proc, url):
        session = session_for(data)
        new("rollout", "status", "deployment/web", "--timeout=60s")
        # The evicted pod is gone and replaced: its record is dropped, one disruption is allowed again.
        status = budget(session, url, expectedPods=3, currentHealthy=3, disruptionsAllowed=1)
        assert "disruptedPods" not in status and status["conditions"][0]["reason"] == "SufficientPods"
        v1 = json.loads(new("get", "horizontalpodautoscalers.v1.autoscaling", "web", "-o", "json").stdout)
        assert v1["spec"]["targetCPUUtilizationPercentage"] == 70
        assert (
            '"StabilizationWindowSeconds":45'
            in v1["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/behavior"]
        )
        new(
            "patch",
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "--type=merge",
            "-p",
            '{"spec": {"maxReplicas": 9}}',
        )
        v2 = json.loads(new("get", "horizontalpodautoscalers.v2.autoscaling", "web", "-o", "json").stdout)
        assert (
            v2["spec"]["maxReplicas"] == 9
            and v2["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 45
        )
        assert new("get", "hpa", "web").stdout.splitlines()[1].split()[1:3] == ["Deployment/web", "cpu:"]
        # Escalation: alice may write Roles, but not one granting what she does not hold.
        new("create", "role", "role-writer", "--verb=create,get", "--resource=roles")
        new("create", "rolebinding", "alice-writes", "--role=role-writer", "--user=alice")
        refused = new(
            "--as=alice", "create", "role", "deleters", "--verb=delete", "--resource=pods", check=False
        )
        assert (
            'roles.rbac.authorization.k8s.io "deleters" is forbidden: user "alice" (groups=["system:authenticated"]) '
            "is attempting to grant RBAC permissions not currently held:\n"
            '{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}' in refused.stderr
        )
        new("--as=alice", "create", "role", "role-readers", "--verb=get", "--resource=roles")


def test_the_durable_server_keeps_fixed_fields_fixed_across_a_sigkill(tmp_path: pathlib.Path) -> None:
    """`kubeloop apiserver --data-dir`, killed with SIGKILL right after the last write: what
    upstream's update rules protect (an immutable ConfigMap's data, a binding's roleRef, a Job's
    template, a Deployment's selector) stays protected, as kubectl 1.33 finds after kubectl 1.27
    wrote it; and nothing a refused write carried was stored."""
    import signal

    from tests.apiserver.storage.test_durability import apiserver
    from tests.apiserver.test_kubectl import KUBECTLS

    data = tmp_path / "data"
    old = Kubectl(KUBECTLS[0], data / "kubeconfig", tmp_path)
    new = Kubectl(KUBECTLS[-1], data / "kubeconfig", tmp_path)
    with apiserver(data, "--simulate") as (proc, _):
        old("create", "configmap", "frozen", "--from-literal=k=v")
        old("patch", "configmap", "frozen", "--type=merge", "-p", '{"immutable": true}')
        old("create", "rolebinding", "viewers", "--clusterrole=view", "--group=auditors")
        old("create", "job", "once", "--image=busybox:1.36")
        old("create", "deployment", "web", "--image=nginx:1.27")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    with apiserver(data, "--simulate"):
        refused = new(
            "patch", "configmap", "frozen", "--type=merge", "-p", '{"data": {"k": "w"}}', check=False
        )
        assert "data: Forbidden: field is immutable when `immutable` is set" in refused.stderr
        assert json.loads(new("get", "configmap", "frozen", "-o", "json").stdout)["data"] == {"k": "v"}

        binding = json.loads(new("get", "rolebinding", "viewers", "-o", "json").stdout)
        assert binding["subjects"] == [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "auditors"}
        ]
        binding["roleRef"]["name"] = "edit"
        changed = new("replace", "-f", "-", stdin=json.dumps(binding), check=False)
        assert "cannot change roleRef" in changed.stderr

        image = new("set", "image", "job/once", "once=busybox:1.37", check=False)
        assert "spec.template: Invalid value:" in image.stderr and "field is immutable" in image.stderr
        job = json.loads(new("get", "job", "once", "-o", "json").stdout)
        assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.36"

        patch = '{"spec": {"selector": {"matchLabels": {"app": "api"}}, "template": {"metadata": {"labels": {"app": "api"}}}}}'
        moved = new("patch", "deployment", "web", "--type=merge", "-p", patch, check=False)
        assert (
            'spec.selector: Invalid value: {"matchLabels":{"app":"api"}}: field is immutable' in moved.stderr
        )
        # What may change still does.
        new("set", "image", "deployment/web", "nginx=nginx:1.28")
        new("rollout", "status", "deployment/web", "--timeout=60s")


def test_update_strategies_are_defaulted_field_by_field_and_judged(
    kubectl: Kubectl, api: Client, namespace: str
) -> None:
    """SetDefaults_DaemonSet/StatefulSet then their validation: a DaemonSet's rolling update
    surges or takes pods down, exactly one of the two; a StatefulSet's policies are known ones.
    A refused object is not written."""
    ns = ["-n", namespace]
    daemon_sets = f"/apis/apps/v1/namespaces/{namespace}/daemonsets"

    def daemon_set(name: str, update_strategy: str) -> str:
        return (
            DAEMONSET.replace("name: agent}", f"name: {name}}}", 1) + f"  updateStrategy: {update_strategy}\n"
        )

    stuck = kubectl(
        "apply",
        *ns,
        "-f",
        "-",
        stdin=daemon_set("stuck", "{rollingUpdate: {maxUnavailable: 0}}"),
        check=False,
    )
    assert stuck.returncode != 0
    assert (
        "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"
        in (stuck.stderr)
    )
    assert api.get(f"{daemon_sets}/stuck").status_code == 404
    both = kubectl(
        "apply", *ns, "-f", "-", stdin=daemon_set("both", "{rollingUpdate: {maxSurge: 1}}"), check=False
    )
    assert (
        "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when maxUnavailable is non-zero"
        in (both.stderr)
    )

    kubectl(
        "apply",
        *ns,
        "-f",
        "-",
        stdin=daemon_set("surge", "{rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}"),
    )
    kubectl("apply", *ns, "-f", "-", stdin=daemon_set("typed", "{type: RollingUpdate}"))
    assert api.get(f"{daemon_sets}/surge").json()["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    assert api.get(f"{daemon_sets}/typed").json()["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
    }

    at_once = STATEFULSET.replace("replicas: 3", "replicas: 1\n  podManagementPolicy: AllAtOnce")
    refused = kubectl("apply", *ns, "-f", "-", stdin=at_once, check=False)
    assert "spec.podManagementPolicy: Invalid value: \"AllAtOnce\": must be 'OrderedReady' or 'Parallel'" in (
        refused.stderr
    )
    assert api.get(f"/apis/apps/v1/namespaces/{namespace}/statefulsets/db").status_code == 404
