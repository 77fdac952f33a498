"""Simulated workloads (``--simulate``): a Ready node, pods that are scheduled, run and end as
their annotations say, and Jobs that complete or fail with upstream's status and conditions —
through kubectl 1.27 and 1.33 (`get nodes`, `wait --for=condition=...`) and the kubeloop client."""

from __future__ import annotations

import asyncio
import json
import pathlib
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kubeloop.node.simulation import NODE_NAME, SimulationOptions
from tests.apiserver.storage.test_durability import apiserver, session_for
from tests.apiserver.test_kubectl import DEPLOYMENT_YAML, KUBECTLS, Kubectl
from tests.conftest import Client, ServerThread, eventually, start_server
from tests.node.test_process_node import events_about

FAST = SimulationOptions(
    pod_start_seconds=0.1, pod_run_seconds=0.3, node_check_seconds=0.2, config_retry_seconds=0.1
)


@pytest.fixture(scope="module")
def simulated() -> Iterator[ServerThread]:
    server = start_server(simulate=True, simulation=FAST)
    yield server
    server.stop()


@pytest.fixture
def api(simulated: ServerThread) -> Client:
    return Client(simulated)


@pytest.fixture(params=KUBECTLS, ids=[p.name for p in KUBECTLS])
def kubectl(request: pytest.FixtureRequest, simulated: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(request.param, simulated.kubeconfig, tmp_path)


def test_a_pod_whose_environment_names_what_does_not_exist_waits_for_it(
    kubectl: Kubectl, namespace: str
) -> None:
    """As a kubelet: CreateContainerConfigError with its words until the Secret (and the key the
    ConfigMap lacks) exist, then the pod runs; an optional reference may be missing."""
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "needs", "namespace": namespace},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
            "envFrom": [{"secretRef": {"name": "creds"}}, {"configMapRef": {"name": "maybe", "optional": True}}],
            "env": [{"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "level"}}}]}]},
    }  # fmt: skip
    kubectl("create", "configmap", "settings", "-n", namespace, "--from-literal=other=1")
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(pod))

    def waiting() -> dict[str, Any]:
        status = json.loads(kubectl("get", "pod", "needs", "-n", namespace, "-o", "json").stdout)["status"]
        return next(iter(status.get("containerStatuses") or [{}])).get("state", {}).get("waiting") or {}

    while waiting().get("reason") != "CreateContainerConfigError":
        time.sleep(0.05)  # the kubelet's next look (the test's timeout bounds it)
    assert waiting()["message"] == 'secret "creds" not found'
    assert (
        kubectl("get", "pod", "needs", "-n", namespace).stdout.splitlines()[1].split()[2]
        == "CreateContainerConfigError"
    )
    kubectl("create", "secret", "generic", "creds", "-n", namespace, "--from-literal=token=t")
    while waiting().get("message") != f"couldn't find key level in ConfigMap {namespace}/settings":
        time.sleep(0.05)
    kubectl(
        "patch",
        "configmap",
        "settings",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"data": {"level": "debug"}}',
    )
    kubectl("wait", "-n", namespace, "--for=condition=Ready", "pod/needs", "--timeout=20s")
    # A Warning Failed Event about the container, once for each reason, as the kubelet says it.
    while len(failed := events_about(kubectl, namespace, "needs", "Failed")) < 2:
        time.sleep(0.05)  # written by the recorder's task (the test's timeout bounds it)
    assert sorted((e["type"], e["message"], e["involvedObject"]["fieldPath"], e["count"]) for e in failed) == [
        ("Warning", f"Error: couldn't find key level in ConfigMap {namespace}/settings", "spec.containers{app}", 1),
        ("Warning", 'Error: secret "creds" not found', "spec.containers{app}", 1),
    ]


def test_a_pod_whose_volumes_name_what_does_not_exist_waits_in_container_creating(
    kubectl: Kubectl, namespace: str
) -> None:
    """As a kubelet: the containers wait in ContainerCreating, and a Warning FailedMount Event
    says why in its words, until the Secret of a volume exists and the ConfigMap of a projected
    one holds the key its items name; an optional source may be missing."""
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mounts", "namespace": namespace},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}], "volumes": [
            {"name": "creds", "secret": {"secretName": "creds"}},
            {"name": "maybe", "configMap": {"name": "maybe", "optional": True}},
            {"name": "bundle", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token", "audience": "x"}},
                {"configMap": {"name": "settings", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}},
        ]},
    }  # fmt: skip
    kubectl("create", "configmap", "settings", "-n", namespace, "--from-literal=other=1")
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(pod))

    def failed_mounts() -> list[str]:
        events = json.loads(
            kubectl(
                "get",
                "events",
                "-n",
                namespace,
                "--field-selector=involvedObject.name=mounts,reason=FailedMount",
                "-o",
                "json",
            ).stdout
        )["items"]
        return [event["message"] for event in events]

    def waiting() -> dict[str, Any]:
        status = json.loads(kubectl("get", "pod", "mounts", "-n", namespace, "-o", "json").stdout)["status"]
        return next(iter(status.get("containerStatuses") or [{}])).get("state", {}).get("waiting") or {}

    unmounted = 'MountVolume.SetUp failed for volume "creds" : secret "creds" not found'
    while unmounted not in failed_mounts():
        time.sleep(0.05)  # the kubelet's next look (the test's timeout bounds it)
    assert waiting() == {"reason": "ContainerCreating"}
    assert (
        kubectl("get", "pod", "mounts", "-n", namespace).stdout.splitlines()[1].split()[2]
        == "ContainerCreating"
    )
    kubectl("create", "secret", "generic", "creds", "-n", namespace, "--from-literal=token=t")
    key = (
        'MountVolume.SetUp failed for volume "bundle" : configmap references non-existent config key: ca.crt'
    )
    while key not in failed_mounts():
        time.sleep(0.05)
    kubectl(
        "patch", "configmap", "settings", "-n", namespace, "--type=merge", "-p", '{"data": {"ca.crt": "x"}}'
    )
    kubectl("wait", "-n", namespace, "--for=condition=Ready", "pod/mounts", "--timeout=20s")


def job(name: str, *, annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            **spec,
            "template": {
                "metadata": {"annotations": annotations or {}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "work", "image": "busybox"}]},
            },
        },
    }


def test_a_ready_node_and_pods_that_run_on_it(kubectl: Kubectl, namespace: str) -> None:
    nodes = kubectl("get", "nodes").stdout.splitlines()
    assert nodes[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert nodes[1].split()[:3] == [NODE_NAME, "Ready", "control-plane"]
    # A deleted node registers again, as a kubelet's does.
    kubectl("delete", "node", NODE_NAME)
    deadline = time.monotonic() + 20
    while kubectl("get", "node", NODE_NAME, check=False).returncode != 0:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    kubectl("wait", "--for=condition=Ready", f"node/{NODE_NAME}", "--timeout=20s")
    kubectl("run", "web", "-n", namespace, "--image=nginx:1.27")
    kubectl("wait", "-n", namespace, "--for=condition=Ready", "pod/web", "--timeout=20s")
    pod = json.loads(kubectl("get", "pod", "web", "-n", namespace, "-o", "json").stdout)
    assert pod["spec"]["nodeName"] == NODE_NAME
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["podIP"].startswith("10.244.")
    [container] = pod["status"]["containerStatuses"]
    assert container["ready"] and container["state"]["running"]["startedAt"]
    wide = kubectl("get", "pod", "web", "-n", namespace, "-o", "wide").stdout.splitlines()[1].split()
    assert wide[2] == "Running" and NODE_NAME in wide


def test_the_scheduler_and_the_kubelet_say_what_they_did_in_events(kubectl: Kubectl, namespace: str) -> None:
    """As on a cluster, `kubectl describe pod` lists the scheduler's Scheduled and the kubelet's
    Pulled, Created and Started (about the container: its fieldPath), Killing when it is
    deleted; a pod that fits no node gets the scheduler's FailedScheduling."""
    ns = ["-n", namespace]
    kubectl("run", "web", *ns, "--image=nginx:1.27")
    kubectl("wait", *ns, "--for=condition=Ready", "pod/web", "--timeout=20s")
    described = asyncio.run(
        eventually(lambda: _with(kubectl("describe", "pod", "web", *ns).stdout, "Started container web"))
    )
    events_part = described.split("Events:")[1]
    rows = [line.split(None, 4) for line in events_part.splitlines()[3:] if line.strip()]
    # kubectl 1.35 starts a message about a part of the object with its fieldPath.
    said = {(row[0], row[1], row[3]): row[4].removeprefix("spec.containers{web}: ") for row in rows}
    assert said == {
        ("Normal", "Scheduled", "default-scheduler"): f"Successfully assigned {namespace}/web to {NODE_NAME}",
        ("Normal", "Pulled", "kubelet"): 'Container image "nginx:1.27" already present on machine',
        ("Normal", "Created", "kubelet"): "Created container: web",
        ("Normal", "Started", "kubelet"): "Started container web",
    }, described
    [started] = events_about(kubectl, namespace, "web", "Started")
    assert started["involvedObject"]["fieldPath"] == "spec.containers{web}"
    assert started["involvedObject"]["kind"] == "Pod" and started["involvedObject"]["uid"]
    assert started["source"] == {"component": "kubelet", "host": NODE_NAME}
    assert started["reportingInstance"] == NODE_NAME and started["count"] == 1
    [scheduled] = events_about(kubectl, namespace, "web", "Scheduled")
    assert "fieldPath" not in scheduled["involvedObject"] and scheduled["reportingComponent"] == "default-scheduler"

    kubectl("delete", "pod", "web", *ns, "--wait=false")
    [killing] = asyncio.run(eventually(lambda: _nonempty(events_about(kubectl, namespace, "web", "Killing"))))
    assert killing["message"] == "Stopping container web"
    assert killing["involvedObject"]["fieldPath"] == "spec.containers{web}"

    kubectl("run", "nowhere", *ns, "--image=nginx:1.27", "--overrides",
            json.dumps({"spec": {"nodeSelector": {"disk": "ssd"}}}))  # fmt: skip
    [failed] = asyncio.run(eventually(lambda: _nonempty(events_about(kubectl, namespace, "nowhere", "FailedScheduling"))))
    assert failed["type"] == "Warning"
    assert failed["message"].startswith("0/1 nodes are available: 1 node(s) didn't match")
    assert events_about(kubectl, namespace, "nowhere", "Scheduled") == []


def _nonempty(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    assert items
    return items


def test_a_job_completes_and_kubectl_wait_sees_it(kubectl: Kubectl, api: Client, namespace: str) -> None:
    body = job(
        "batch", completions=3, parallelism=2, annotations={"kubeloop.dev/termination-message": "all done"}
    )
    assert api.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", body).status_code == 201
    kubectl("wait", "-n", namespace, "--for=condition=complete", "job/batch", "--timeout=30s")
    done = api.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/batch").json()
    assert done["status"]["succeeded"] == 3 and done["status"]["active"] == 0
    assert done["status"]["completionTime"] and done["status"]["startTime"]
    assert {c["type"] for c in done["status"]["conditions"]} == {"SuccessCriteriaMet", "Complete"}
    pods = api.get(
        f"/api/v1/namespaces/{namespace}/pods?labelSelector=batch.kubernetes.io/job-name=batch"
    ).json()
    assert len(pods["items"]) == 3
    for pod in pods["items"]:
        assert pod["status"]["phase"] == "Succeeded"
        [ref] = pod["metadata"]["ownerReferences"]
        assert ref["kind"] == "Job" and ref["uid"] == done["metadata"]["uid"] and ref["controller"]
        terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert terminated["reason"] == "Completed" and terminated["exitCode"] == 0
        assert terminated["message"] == "all done"
    table = kubectl("get", "job", "batch", "-n", namespace).stdout.splitlines()[1].split()
    assert table[:3] == ["batch", "Complete", "3/3"]
    # Deleting the Job takes its pods (the garbage collector).
    kubectl("delete", "job", "batch", "-n", namespace)
    kubectl(
        "wait",
        "-n",
        namespace,
        "--for=delete",
        "pod",
        "-l",
        "batch.kubernetes.io/job-name=batch",
        "--timeout=20s",
    )


def test_a_failing_job_reaches_failed_after_its_backoff_limit(
    kubectl: Kubectl, api: Client, namespace: str
) -> None:
    body = job("flaky", backoffLimit=1, annotations={"kubeloop.dev/outcome": "Failed"})
    assert api.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", body).status_code == 201
    kubectl("wait", "-n", namespace, "--for=condition=failed", "job/flaky", "--timeout=30s")
    failed = api.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/flaky").json()
    assert failed["status"]["failed"] == 2 and failed["status"].get("succeeded", 0) == 0
    reasons = {c["type"]: c["reason"] for c in failed["status"]["conditions"]}
    assert reasons == {"FailureTarget": "BackoffLimitExceeded", "Failed": "BackoffLimitExceeded"}
    pods = api.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=job-name=flaky").json()["items"]
    assert [p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] for p in pods] == [1, 1]


def test_a_job_past_its_deadline_fails_and_its_pods_go(api: Client, namespace: str) -> None:
    body = job("slow", activeDeadlineSeconds=1, annotations={"kubeloop.dev/duration": "60"})
    assert api.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", body).status_code == 201
    deadline = time.monotonic() + 15
    while True:
        status = api.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/slow").json().get("status", {})
        reasons = {c["type"]: c["reason"] for c in status.get("conditions", ())}
        if reasons.get("Failed"):
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.05)
    assert reasons["Failed"] == "DeadlineExceeded"
    assert status["active"] == 0
    # Its running pod is deleted (at once: the embedded server has no kubelet to wait for).
    assert api.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=job-name=slow").json()["items"] == []


def test_a_finished_job_goes_after_its_ttl_with_its_pods(
    kubectl: Kubectl, api: Client, namespace: str
) -> None:
    """The TTL-after-finished controller: a finished Job is deleted ttlSecondsAfterFinished after
    its Complete (or Failed) condition, in the foreground, its pods with it; one without a TTL,
    or whose TTL is not up, stays."""
    for name, ttl in (("brief", 0), ("failing", 1), ("kept", None), ("later", 3600)):
        spec: dict[str, Any] = {} if ttl is None else {"ttlSecondsAfterFinished": ttl}
        annotations = {"kubeloop.dev/outcome": "Failed"} if name == "failing" else {}
        if name == "failing":
            spec["backoffLimit"] = 0
        body = job(name, annotations=annotations, **spec)
        assert api.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", body).status_code == 201
    kubectl("wait", "-n", namespace, "--for=condition=complete", "job/kept", "job/later", "--timeout=30s")
    kubectl("wait", "-n", namespace, "--for=delete", "job/brief", "job/failing", "--timeout=30s")
    # The foreground deletion took their pods first; "kept" and "later" keep theirs.
    pods = api.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]
    assert sorted(p["metadata"]["labels"]["job-name"] for p in pods) == ["kept", "later"]
    left = api.get(f"/apis/batch/v1/namespaces/{namespace}/jobs").json()["items"]
    assert sorted(j["metadata"]["name"] for j in left) == ["kept", "later"]


DEPLOYMENT = DEPLOYMENT_YAML.replace("replicas: 2", "replicas: 3")


def replica_sets(api: Client, namespace: str) -> dict[str, dict[str, Any]]:
    items = api.get(f"/apis/apps/v1/namespaces/{namespace}/replicasets").json()["items"]
    return {rs["spec"]["template"]["spec"]["containers"][0]["image"]: rs for rs in items}


def test_rollout_status_completes_and_again_after_an_image_change(
    kubectl: Kubectl, api: Client, namespace: str
) -> None:
    ns = ["-n", namespace]
    kubectl("apply", *ns, "-f", "-", stdin=DEPLOYMENT)
    rolled = kubectl("rollout", "status", *ns, "deployment/web", "--timeout=30s")
    assert 'deployment "web" successfully rolled out' in rolled.stdout
    deployment = api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/web").json()
    status = deployment["status"]
    assert status["observedGeneration"] == deployment["metadata"]["generation"]
    assert (
        status["replicas"],
        status["updatedReplicas"],
        status["readyReplicas"],
        status["availableReplicas"],
    ) == (3, 3, 3, 3)
    reasons = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert reasons == {
        "Available": ("True", "MinimumReplicasAvailable"),
        "Progressing": ("True", "NewReplicaSetAvailable"),
    }
    [first] = replica_sets(api, namespace).values()
    assert first["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    hashed = first["metadata"]["labels"]["pod-template-hash"]
    assert first["metadata"]["name"] == f"web-{hashed}"
    table = kubectl("get", *ns, "deployment", "web").stdout.splitlines()[1].split()
    assert table[:4] == ["web", "3/3", "3", "3"]

    kubectl("set", "image", *ns, "deployment/web", "nginx=nginx:1.28")
    rolled = kubectl("rollout", "status", *ns, "deployment/web", "--timeout=30s")
    assert 'deployment "web" successfully rolled out' in rolled.stdout
    sets = replica_sets(api, namespace)
    assert sets["nginx:1.28"]["status"]["readyReplicas"] == 3
    assert sets["nginx:1.28"]["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    assert sets["nginx:1.27"]["spec"]["replicas"] == 0
    pods = api.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=app=web").json()["items"]
    running = [p for p in pods if p["status"]["phase"] == "Running"]
    assert len(running) == 3
    assert {p["spec"]["containers"][0]["image"] for p in running} == {"nginx:1.28"}
    assert {p["metadata"]["labels"]["pod-template-hash"] for p in running} == {
        sets["nginx:1.28"]["metadata"]["labels"]["pod-template-hash"]
    }

    kubectl("scale", *ns, "deployment/web", "--replicas=1")
    kubectl("rollout", "status", *ns, "deployment/web", "--timeout=30s")
    deadline = time.monotonic() + 15
    while len(api.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=app=web").json()["items"]) != 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    # Deleting the Deployment takes its ReplicaSets and their pods.
    kubectl("delete", *ns, "deployment", "web")
    kubectl("wait", *ns, "--for=delete", "pod", "-l", "app=web", "--timeout=20s")
    assert api.get(f"/apis/apps/v1/namespaces/{namespace}/replicasets").json()["items"] == []


def test_kubeloop_apiserver_simulate_finishes_a_job_across_a_sigkill(tmp_path: pathlib.Path) -> None:
    """`kubeloop apiserver --simulate --data-dir`: a Job's pod is running when the server is
    killed; after the restart the simulation picks it up from what is stored and the Job completes."""
    data = tmp_path / "data"
    jobs = "/apis/batch/v1/namespaces/default/jobs"
    pods = "/api/v1/namespaces/default/pods?labelSelector=job-name=survivor"
    with apiserver(data, "--simulate") as (proc, url):
        session = session_for(data)
        body = job("survivor", annotations={"kubeloop.dev/duration": "2"})
        assert session.post(url + jobs, json=body).status_code == 201
        deadline = time.monotonic() + 20
        while not [p for p in session.get(url + pods).json()["items"] if p["status"]["phase"] == "Running"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    with apiserver(data, "--simulate") as (proc, url):
        session = session_for(data)
        deadline = time.monotonic() + 20
        while True:
            status = session.get(f"{url}{jobs}/survivor").json().get("status", {})
            if any(c["type"] == "Complete" for c in status.get("conditions", ())):
                break
            assert time.monotonic() < deadline, status
            time.sleep(0.05)
        assert status["succeeded"] == 1
        [pod] = session.get(url + pods).json()["items"]  # the same pod: no second one was started
        assert pod["status"]["phase"] == "Succeeded"


def test_pod_security_and_a_jobs_ttl_hold_across_a_sigkill(tmp_path: pathlib.Path) -> None:
    """`kubeloop apiserver --simulate --data-dir`, SIGKILLed: a namespace's Pod Security label
    still refuses pods after the restart, and a Job that finished before the kill, its TTL not up
    then, is deleted by the restarted TTL controller (its schedule was only in the old process)."""
    data = tmp_path / "data"
    jobs = "/apis/batch/v1/namespaces/default/jobs"
    labels = {"pod-security.kubernetes.io/enforce": "baseline"}
    privileged = {"metadata": {"name": "root"}, "spec": {"containers": [{"name": "c", "image": "busybox",
                  "securityContext": {"privileged": True}}]}}  # fmt: skip
    with apiserver(data, "--simulate") as (proc, url):
        session = session_for(data)
        made = session.post(
            url + "/api/v1/namespaces", json={"metadata": {"name": "guarded", "labels": labels}}
        )
        assert made.status_code == 201
        assert session.post(url + "/api/v1/namespaces/guarded/pods", json=privileged).status_code == 403
        body = job("brief", ttlSecondsAfterFinished=4)
        assert session.post(url + jobs, json=body).status_code == 201
        deadline = time.monotonic() + 20
        while not any(
            c["type"] == "Complete"
            for c in session.get(f"{url}{jobs}/brief").json().get("status", {}).get("conditions", ())
        ):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)  # before its TTL is up
        proc.wait(10)
    with apiserver(data, "--simulate") as (proc, url):
        session = session_for(data)
        refused = session.post(url + "/api/v1/namespaces/guarded/pods", json=privileged)
        assert refused.status_code == 403
        assert (
            'violates PodSecurity "baseline:latest": privileged (container "c"' in refused.json()["message"]
        )
        deadline = time.monotonic() + 30
        while session.get(f"{url}{jobs}/brief").status_code != 404:
            assert time.monotonic() < deadline, "the Job outlived its TTL across the restart"
            time.sleep(0.1)


def test_a_replica_set_made_by_an_earlier_reconcile_is_taken_not_made_twice(
    simulated: ServerThread, api: Client, namespace: str
) -> None:
    """A reconcile that runs before the cache shows the ReplicaSet an earlier one created meets
    AlreadyExists: it carries on with that ReplicaSet."""
    body = {**yaml.safe_load(DEPLOYMENT), "metadata": {"name": "twice", "namespace": namespace}}
    body["spec"]["replicas"] = 0
    deployment = api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", body).json()
    controllers = simulated.server.controllers
    assert controllers is not None and controllers.deployments is not None
    create = controllers.deployments._create_replica_set
    template = deployment["spec"]["template"]
    first = simulated.call(create(deployment, template, 0, 1, []))
    again = simulated.call(create(deployment, template, 0, 1, []))
    assert again["metadata"]["uid"] == first["metadata"]["uid"]


FRONTEND_REPLICASET = """\
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: frontend
  labels: {app: guestbook, tier: frontend}
spec:
  replicas: 3
  selector:
    matchLabels: {app: guestbook, tier: frontend}
  template:
    metadata:
      labels: {app: guestbook, tier: frontend}
    spec:
      containers:
      - name: php-redis
        image: gcr.io/google_samples/gb-frontend:v3
        resources:
          requests: {cpu: 100m, memory: 100Mi}
        env:
        - name: GET_HOSTS_FROM
          value: dns
        - name: POD_NAME
          valueFrom:
            fieldRef: {fieldPath: metadata.name}
        ports:
        - containerPort: 80
"""


def test_kubectls_own_describe_checks_of_a_replica_set_and_its_pods(kubectl: Kubectl, namespace: str) -> None:
    """What kubectl's command tests (test/cmd/apps.sh, core.sh) ask of `describe rs` and
    `describe pods`, and what a cluster prints besides: the pod's env var from a fieldRef with its
    value and its defaulted apiVersion, and the ReplicaSet controller's events."""
    ns = ["-n", namespace]
    kubectl("create", "-f", "-", *ns, stdin=FRONTEND_REPLICASET)
    kubectl("wait", *ns, "--for=condition=Ready", "pod", "-l", "tier=frontend", "--timeout=30s")
    # The controller's events are written beside its pods, not before them: wait for them.
    described = asyncio.run(
        eventually(lambda: _with(kubectl("describe", "rs", "frontend", *ns).stdout, "Created pod: frontend-"))
    )
    for label in ("Name:", "Pod Template:", "Labels:", "Selector:", "Replicas:", "Pods Status:", "Volumes:"):
        assert label in described, described
    assert "3 current / 3 desired" in described
    assert "POD_NAME:         (v1:metadata.name)" in described
    assert "Events:" in described
    assert "SuccessfulCreate" in described
    assert "Events:" not in kubectl("describe", "rs", "frontend", "--show-events=false", *ns).stdout
    assert "Events:" in kubectl("describe", "rs", *ns).stdout

    pods = kubectl("describe", "pods", *ns).stdout
    for label in ("Name:", "Image:", "Node:", "Labels:", "Status:", "Controlled By"):
        assert label in pods, pods
    pod_name = kubectl("get", "pods", *ns, "-o", "jsonpath={.items[0].metadata.name}").stdout
    one = kubectl("describe", "pod", pod_name, *ns).stdout
    assert f"POD_NAME:        {pod_name} (v1:metadata.name)" in one, one
    assert "Controlled By:  ReplicaSet/frontend" in one

    kubectl("scale", "rs", "frontend", "--replicas=1", *ns)
    asyncio.run(
        eventually(lambda: _with(kubectl("describe", "rs", "frontend", *ns).stdout, "Deleted pod: frontend-"))
    )


def _with(text: str, words: str) -> str:
    assert words in text, text
    return text
