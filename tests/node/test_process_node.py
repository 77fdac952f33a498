"""The process node (``--local-image``): pods of local images run as processes on this machine,
through kubectl 1.27 and 1.33 and the official client. A container's process sees its command
and args (``$(VAR)`` expanded), its environment (literal, ConfigMap and Secret keys, the
downward API, ``envFrom`` with a prefix, the API server's address); it ends Succeeded or Failed
with its exit code, or starts again after a back-off (CrashLoopBackOff, ``lastState``);
``kubectl logs`` reads what it wrote (``--timestamps``, ``--tail``, ``--previous``, ``-f`` until
it ends); deleting the pod stops its process (SIGKILL after the grace period for one that
ignores SIGTERM); pods of other images stay simulated; bad log queries are 400s in upstream's
words. A server killed with SIGKILL while pods run kills what it left behind when it starts
again and runs each pod once."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kubeloop.node.localimages import LocalImages
from kubeloop.node.processes import ContainerRun, ProcessRuntime
from kubeloop.node.simulation import SimulationOptions
from tests.apiserver.storage.test_durability import apiserver
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import Client, ServerThread, start_server

#: A stand-in for an image whose entrypoint says which of some variables it got, then waits.
ENV_ECHO = (
    f"example.com/env={sys.executable} -c 'import os, sys, time; "
    "print(sorted(k for k in os.environ if k in (\"LD_PRELOAD\", \"PYTHONPATH\", \"BASH_ENV\", \"FOO\"))); "
    "sys.stdout.flush(); time.sleep(600)'"
)
#: A stand-in for an image whose entrypoint is a program: it prints its args, then waits.
ECHO = f"example.com/echo={sys.executable} -u -c 'import sys, time; print(\"args\", sys.argv[1:]); time.sleep(600)'"


#: A container that starts a process in a session of its own (out of reach of its process
#: group, as a daemon goes), says its id, then waits or (with an argument) ends.
DAEMONIZING = (
    "import subprocess, sys, time; "
    "daemon = subprocess.Popen(['sleep', '600'], start_new_session=True); "
    "print('daemon', daemon.pid, flush=True); "
    "time.sleep(0 if sys.argv[1:] else 600)"
)


def daemon_of(kubectl: Kubectl, name: str, namespace: str) -> int:
    while not (said := kubectl("logs", name, "-n", namespace).stdout.split()):
        time.sleep(0.05)  # its first line (the test's timeout bounds it)
    assert said[0] == "daemon", said
    return int(said[1])


@pytest.fixture(scope="module")
def pods_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return tmp_path_factory.mktemp("pods")


@pytest.fixture(scope="module")
def node(pods_dir: pathlib.Path) -> Iterator[ServerThread]:
    options = SimulationOptions(
        pod_start_seconds=0.1,
        node_check_seconds=0.2,
        config_retry_seconds=0.1,
        local_images=("busybox=host", ECHO, ENV_ECHO),
        crash_backoff_seconds=0.3,
        pods_dir=pods_dir,
    )
    # As a user runs it: namespaces get their default ServiceAccount and the cluster's CA.
    server = start_server(simulate=True, simulation=options, namespace_defaults=True)
    yield server
    server.stop()


@pytest.fixture
def api(node: ServerThread) -> Client:
    return Client(node)


@pytest.fixture
def kubectl(node: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    """One kubectl: what most tests here prove is the node's, which every kubectl sees alike."""
    return Kubectl(KUBECTLS[1], node.kubeconfig, tmp_path)


@pytest.fixture(params=KUBECTLS[:2], ids=[p.name for p in KUBECTLS[:2]])
def each_kubectl(request: pytest.FixtureRequest, node: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    """The oldest kubectl and a newer one, for what kubectl itself asks of the server (logs)."""
    return Kubectl(request.param, node.kubeconfig, tmp_path)


def pod_json(kubectl: Kubectl, name: str, namespace: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(kubectl("get", "pod", name, "-n", namespace, "-o", "json").stdout)
    return found


def ended(kubectl: Kubectl, name: str, namespace: str) -> dict[str, Any]:
    while (pod := pod_json(kubectl, name, namespace))["status"].get("phase") not in ("Succeeded", "Failed"):
        time.sleep(0.05)  # the process's end (the test's timeout bounds it)
    return pod


def pid_of(pods_dir: pathlib.Path, pod: dict[str, Any], container: str) -> int:
    path = pods_dir / pod["metadata"]["uid"] / container / "pid"
    while not (path.exists() and (written := path.read_text().split())):
        time.sleep(0.05)
    return int(written[0])  # the id, then when it started


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_pod_runs_its_command_with_what_a_container_sees(each_kubectl: Kubectl, namespace: str) -> None:
    kubectl = each_kubectl
    ns = ["-n", namespace]
    kubectl("create", "configmap", "settings", *ns, "--from-literal=level=debug", "--from-literal=mode=fast")
    kubectl("create", "secret", "generic", "creds", *ns, "--from-literal=token=s3cret")
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sees", "namespace": namespace, "labels": {"app": "x"}},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "busybox:1.36",
            "command": ["sh", "-c"],
            "args": ['echo "greeting=$(GREETING)" \'$$(literal)\'; echo "level=$LEVEL token=$TOKEN pod=$POD ns=$NS app=$APP"; '
                     'echo "cfg_mode=$CFG_mode api=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"; echo oops >&2'],
            "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
            "env": [
                {"name": "GREETING", "value": "hello"},
                {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "level"}}},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            ],
        }]},
    }  # fmt: skip
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(pod))
    found = ended(kubectl, "sees", namespace)
    assert found["status"]["phase"] == "Succeeded"
    (status,) = found["status"]["containerStatuses"]
    terminated = status["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
    logged = kubectl("logs", "sees", *ns).stdout.splitlines()
    assert logged[0] == "greeting=hello $(literal)"
    assert logged[1] == f"level=debug token=s3cret pod=sees ns={namespace} app=x"
    assert logged[2].startswith("cfg_mode=fast api=127.0.0.1:")
    assert logged[3] == "oops"  # stderr too, in the order written
    tail = kubectl("logs", "sees", *ns, "--tail=1", "--timestamps").stdout
    stamp, _, line = tail.strip().partition(" ")
    assert line == "oops" and stamp.endswith("Z") and "T" in stamp


def test_a_failing_process_fails_its_pod_with_its_exit_code_and_last_words(
    kubectl: Kubectl, namespace: str
) -> None:
    kubectl("run", "fails", "-n", namespace, "--image=busybox", "--restart=Never", "--overrides",
            json.dumps({"spec": {"containers": [{"name": "fails", "image": "busybox",
                                                 "terminationMessagePolicy": "FallbackToLogsOnError",
                                                 "command": ["sh", "-c", "echo working; echo 'cannot go on' >&2; exit 3"]}]}}))  # fmt: skip
    found = ended(kubectl, "fails", namespace)
    assert found["status"]["phase"] == "Failed"
    terminated = found["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
    assert terminated["message"] == "working\ncannot go on"
    assert kubectl("get", "pod", "fails", "-n", namespace).stdout.splitlines()[1].split()[2] == "Error"


def test_a_crashing_container_backs_off_and_keeps_its_last_run(kubectl: Kubectl, namespace: str) -> None:
    ns = ["-n", namespace]
    kubectl("run", "crash", *ns, "--image=busybox", "--", "sh", "-c", "echo run at $(date +%s%N); exit 1")
    while (status := pod_json(kubectl, "crash", namespace)["status"].get("containerStatuses") or [{}])[0].get(
        "restartCount", 0
    ) < 2:
        time.sleep(0.05)
    (container,) = status
    assert container["lastState"]["terminated"]["exitCode"] == 1
    waiting = container["state"].get("waiting")
    if waiting is not None:  # between runs
        assert waiting["reason"] == "CrashLoopBackOff"
        assert waiting["message"].startswith("back-off ")
    previous = kubectl("logs", "crash", *ns, "--previous").stdout
    assert previous.startswith("run at ")
    # The kubelet's words: each start (a repeat counts up), and a back-off between them.
    uid = pod_json(kubectl, "crash", namespace)["metadata"]["uid"]
    started = events_about(kubectl, namespace, "crash", "Started")
    while sum(e["count"] for e in started) < 3:
        time.sleep(0.05)  # written by the recorder's task (the test's timeout bounds it)
        started = events_about(kubectl, namespace, "crash", "Started")
    assert [(e["message"], e["involvedObject"]["fieldPath"]) for e in started] == [
        ("Started container crash", "spec.containers{crash}")
    ]
    assert started[0]["source"]["component"] == "kubelet"
    while not (back_off := events_about(kubectl, namespace, "crash", "BackOff")):
        time.sleep(0.05)
    assert [(e["type"], e["message"]) for e in back_off] == [
        ("Warning", f"Back-off restarting failed container crash in pod crash_{namespace}({uid})")
    ]


def test_a_container_ends_with_its_main_process_and_takes_its_children(
    kubectl: Kubectl, namespace: str, pods_dir: pathlib.Path
) -> None:
    """The main process exits while a child it started still holds its output: the container
    has ended (Failed, exit 1, never started again under Never), and the child is gone with it,
    as a kubelet ends every process of a container."""
    ns = ["-n", namespace]
    kubectl("run", "leaves", *ns, "--image=busybox", "--restart=Never", "--",
            "sh", "-c", "sleep 600 & echo $! > child; echo parent done; exit 1")  # fmt: skip
    found = ended(kubectl, "leaves", namespace)
    (status,) = found["status"]["containerStatuses"]
    assert (found["status"]["phase"], status["state"]["terminated"]["exitCode"], status["restartCount"]) == (
        "Failed",
        1,
        0,
    )
    child = int((pods_dir / found["metadata"]["uid"] / "leaves" / "root" / "child").read_text())
    while not gone(child):
        time.sleep(0.05)  # killed with its group (the test's timeout bounds it)
    assert kubectl("logs", "leaves", *ns).stdout == "parent done\n"


def test_an_entrypoint_image_takes_args_and_refuses_a_command(kubectl: Kubectl, namespace: str) -> None:
    ns = ["-n", namespace]
    kubectl("run", "echoes", *ns, "--image=example.com/echo:2", "--", "one", "two")
    while "args ['one', 'two']" not in kubectl("logs", "echoes", *ns, check=False).stdout:
        time.sleep(0.05)
    pod = pod_json(kubectl, "echoes", namespace)
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["containerStatuses"][0]["ready"] is True
    command = {
        "spec": {"containers": [{"name": "c", "image": "example.com/echo", "command": ["rm", "-rf", "/"]}]}
    }
    kubectl("run", "commands", *ns, "--image=example.com/echo", "--overrides", json.dumps(command))
    while (status := pod_json(kubectl, "commands", namespace)["status"].get("containerStatuses") or [{}])[
        0
    ].get("state", {}).get("waiting", {}).get("reason") != "RunContainerError":
        time.sleep(0.05)
    assert "the pod's command would run on this machine" in status[0]["state"]["waiting"]["message"]
    while not (said := events_about(kubectl, namespace, "commands", "Failed")):
        time.sleep(0.05)
    [failed] = said
    assert failed["type"] == "Warning" and failed["involvedObject"]["fieldPath"] == "spec.containers{c}"
    assert failed["message"] == f"Error: {status[0]['state']['waiting']['message']}"
    assert events_about(kubectl, namespace, "commands", "Started") == []


def test_deleting_a_pod_stops_its_process_within_the_grace_period(
    kubectl: Kubectl, namespace: str, pods_dir: pathlib.Path
) -> None:
    ns = ["-n", namespace]
    stubborn = {"spec": {"terminationGracePeriodSeconds": 1, "containers": [{
        "name": "stubborn", "image": "busybox",
        "command": ["sh", "-c", 'trap "" TERM; echo ready; while true; do sleep 0.1; done']}]}}  # fmt: skip
    kubectl("run", "stubborn", *ns, "--image=busybox", "--overrides", json.dumps(stubborn))
    kubectl("run", "polite", *ns, "--image=busybox", "--", "sleep", "600")
    kubectl("wait", *ns, "--for=condition=Ready", "pod/stubborn", "pod/polite", "--timeout=30s")
    polite = pid_of(pods_dir, pod_json(kubectl, "polite", namespace), "polite")
    pid = pid_of(pods_dir, pod_json(kubectl, "stubborn", namespace), "stubborn")
    kubectl("delete", "pod", "polite", "stubborn", *ns)
    while not (gone(polite) and gone(pid)):
        time.sleep(0.05)  # SIGTERM; the stubborn one SIGKILL a second later
    for name in ("polite", "stubborn"):
        while not (said := events_about(kubectl, namespace, name, "Killing")):
            time.sleep(0.05)
        [killing] = said
        assert (killing["message"], killing["involvedObject"]["fieldPath"]) == (
            f"Stopping container {name}",
            f"spec.containers{{{name}}}",
        )


def events_about(kubectl: Kubectl, namespace: str, name: str, reason: str) -> list[dict[str, Any]]:
    """The Events about the object ``name`` with ``reason``, as ``kubectl get events`` lists them."""
    found = kubectl("get", "events", "-n", namespace, f"--field-selector=involvedObject.name={name},reason={reason}",
                    "-o", "json").stdout  # fmt: skip
    return list(json.loads(found)["items"])


def test_a_deleted_pod_is_terminating_until_its_process_has_stopped(
    kubectl: Kubectl, namespace: str, pods_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """As on a cluster: a delete marks the pod (deletionTimestamp, deletionGracePeriodSeconds)
    and kubectl shows it Terminating while its process has its SIGTERM; a second delete does not
    lengthen the period; the node removes the pod once the process has ended."""
    ns = ["-n", namespace]
    release = tmp_path / "release"
    slow = {"spec": {"terminationGracePeriodSeconds": 60, "containers": [{
        "name": "slow", "image": "busybox", "env": [{"name": "RELEASE", "value": str(release)}],
        "command": ["sh", "-c", 'trap "echo stopping; while [ ! -e $RELEASE ]; do sleep 0.05; done; exit 0" TERM; '
                    "echo ready; while true; do sleep 0.1; done"]}]}}  # fmt: skip
    kubectl("run", "slow", *ns, "--image=busybox", "--overrides", json.dumps(slow))
    kubectl("wait", *ns, "--for=condition=Ready", "pod/slow", "--timeout=30s")
    pid = pid_of(pods_dir, pod_json(kubectl, "slow", namespace), "slow")
    assert 'pod "slow" deleted' in kubectl("delete", "pod", "slow", *ns, "--wait=false").stdout
    while "stopping" not in kubectl("logs", "slow", *ns).stdout:
        time.sleep(0.05)  # its SIGTERM (the test's timeout bounds it)
    kubectl("delete", "pod", "slow", *ns, "--wait=false", "--grace-period=120")
    meta = pod_json(kubectl, "slow", namespace)["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 60 and meta["deletionTimestamp"]
    assert "Terminating" in kubectl("get", "pod", "slow", *ns).stdout
    assert not gone(pid)
    release.touch()
    kubectl("wait", *ns, "--for=delete", "pod/slow", "--timeout=30s")
    while not gone(pid):
        time.sleep(0.05)


def test_a_shorter_or_forced_delete_cuts_a_pods_grace_period(
    kubectl: Kubectl, namespace: str, pods_dir: pathlib.Path
) -> None:
    """A second delete with a shorter grace period brings its SIGKILL forward; ``--force
    --grace-period=0`` removes the pod at once, and its process gets SIGKILL soon after."""
    ns = ["-n", namespace]
    for name in ("shortened", "forced"):
        kubectl("run", name, *ns, "--image=busybox", "--overrides",
                '{"spec": {"terminationGracePeriodSeconds": 600}}', "--",
                "sh", "-c", "trap 'echo ignored' TERM; echo ready; while true; do sleep 0.1; done")  # fmt: skip
    kubectl("wait", *ns, "--for=condition=Ready", "pod/shortened", "pod/forced", "--timeout=30s")
    shortened = pid_of(pods_dir, pod_json(kubectl, "shortened", namespace), "shortened")
    forced = pid_of(pods_dir, pod_json(kubectl, "forced", namespace), "forced")
    kubectl("delete", "pod", "shortened", *ns, "--wait=false")
    while "ignored" not in kubectl("logs", "shortened", *ns).stdout:
        time.sleep(0.05)
    kubectl("delete", "pod", "shortened", *ns, "--grace-period=1", "--wait=false")
    kubectl("wait", *ns, "--for=delete", "pod/shortened", "--timeout=30s")
    assert gone(shortened)  # SIGKILLed before the node removed the pod
    forcing = kubectl("delete", "pod", "forced", *ns, "--grace-period=0", "--force")
    assert 'pod "forced" force deleted' in forcing.stdout
    assert kubectl("get", "pod", "forced", *ns, check=False).returncode != 0
    while not gone(forced):
        time.sleep(0.05)


def test_what_a_container_started_in_a_session_of_its_own_ends_with_it(kubectl: Kubectl, namespace: str) -> None:
    """A cgroup holds every process of a container, wherever it goes; here what left the
    container's process group (``setsid``) still carries its environment, and ends when the
    container ends (its main process exits) or its pod is deleted."""
    ns = ["-n", namespace]
    kubectl("run", "ends", *ns, "--image=busybox", "--restart=Never", "--", sys.executable, "-c", DAEMONIZING, "end")
    kubectl("run", "deleted", *ns, "--image=busybox", "--", sys.executable, "-c", DAEMONIZING)
    ended_daemon, deleted_daemon = daemon_of(kubectl, "ends", namespace), daemon_of(kubectl, "deleted", namespace)
    assert ended(kubectl, "ends", namespace)["status"]["phase"] == "Succeeded"
    kubectl("delete", "pod", "deleted", *ns)
    while not (gone(ended_daemon) and gone(deleted_daemon)):
        time.sleep(0.05)


def test_follow_streams_until_the_run_ends(each_kubectl: Kubectl, namespace: str) -> None:
    kubectl = each_kubectl
    ns = ["-n", namespace]
    kubectl("run", "counts", *ns, "--image=busybox", "--restart=Never", "--",
            "sh", "-c", "for i in 1 2 3; do echo line $i; sleep 0.3; done")  # fmt: skip
    while "line" not in kubectl("logs", "counts", *ns, check=False).stdout:
        time.sleep(0.05)
    followed = kubectl("logs", "-f", "counts", *ns, timeout=60)  # returns once the process ends
    assert followed.stdout.splitlines() == ["line 1", "line 2", "line 3"]


def test_bad_log_queries_are_400s_in_upstreams_words(each_kubectl: Kubectl, namespace: str) -> None:
    kubectl = each_kubectl
    ns = ["-n", namespace]
    two = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "two", "namespace": namespace},
           "spec": {"containers": [{"name": "a", "image": "busybox", "command": ["sleep", "600"]},
                                   {"name": "b", "image": "busybox", "command": ["sleep", "600"]}]}}  # fmt: skip
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(two))
    kubectl("wait", *ns, "--for=condition=Ready", "pod/two", "--timeout=30s")
    refused = kubectl("logs", "two", *ns, "--container=c", check=False)
    assert refused.returncode == 1 and "container c is not valid for pod two" in refused.stderr
    refused = kubectl("logs", "two", *ns, "-c", "a", "--previous", check=False)
    assert 'previous terminated container "a" in pod "two" not found' in refused.stderr
    assert kubectl("logs", "two", *ns, "-c", "b").stdout == ""


def test_the_official_client_reads_and_follows_logs(api: Client, node: ServerThread, namespace: str) -> None:
    kubernetes = pytest.importorskip("kubernetes")
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(node.kubeconfig), client_configuration=configuration)
    with kubernetes.client.ApiClient(configuration) as client:
        core = kubernetes.client.CoreV1Api(client)
        pod = kubernetes.client.V1Pod(
            metadata=kubernetes.client.V1ObjectMeta(name="talks"),
            spec=kubernetes.client.V1PodSpec(
                restart_policy="Never",
                containers=[kubernetes.client.V1Container(
                    name="talks", image="busybox", command=["sh", "-c", "echo first; sleep 0.5; echo second"])],
            ),
        )  # fmt: skip
        core.create_namespaced_pod(namespace, pod)
        while True:
            try:  # 400 until the container has started
                streamed = core.read_namespaced_pod_log(
                    "talks", namespace, follow=True, _preload_content=False
                )
                break
            except kubernetes.client.exceptions.ApiException as refused:
                assert refused.status == 400 and "is waiting to start" in refused.body
                time.sleep(0.05)
        lines = b"".join(streamed.stream()).splitlines()  # to the end of the run
        assert lines == [b"first", b"second"]
        assert core.read_namespaced_pod_log("talks", namespace, tail_lines=1) == "second\n"


def test_pods_of_other_images_stay_simulated(kubectl: Kubectl, namespace: str) -> None:
    kubectl("run", "simulated", "-n", namespace, "--image=nginx:1.27")
    kubectl("wait", "-n", namespace, "--for=condition=Ready", "pod/simulated", "--timeout=30s")
    status = pod_json(kubectl, "simulated", namespace)["status"]["containerStatuses"][0]
    assert status["imageID"].startswith("simulated://")
    assert kubectl("logs", "simulated", "-n", namespace).stdout == ""  # it wrote nothing


def test_a_killed_server_leaves_no_process_behind_and_runs_each_pod_once(tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    marker = tmp_path / "runs"
    image = ("--local-image", "busybox=host", "--simulate")
    with apiserver(data, *image) as (first, _url):
        kubectl = Kubectl(KUBECTLS[-1], data / "kubeconfig", tmp_path)
        kubectl("run", "long", "--image=busybox", "--", "sh", "-c", f"echo run >> {marker}; exec sleep 600")
        kubectl("run", "daemonizing", "--image=busybox", "--", sys.executable, "-c", DAEMONIZING)
        kubectl("wait", "--for=condition=Ready", "pod/long", "--timeout=30s")
        pod = pod_json(kubectl, "long", "default")
        pid = pid_of(data / "pods", pod, "long")
        daemon = daemon_of(kubectl, "daemonizing", "default")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert not gone(pid) and not gone(daemon)  # what a killed server leaves behind
    with apiserver(data, *image) as (second, _url):
        while not (gone(pid) and gone(daemon)):
            time.sleep(0.05)  # killed by the new server (the daemon out of its group too)
        while (status := pod_json(kubectl, "long", "default")["status"]["containerStatuses"][0])[
            "restartCount"
        ] < 1 or not status["ready"]:
            time.sleep(0.05)
        assert marker.read_text() == "run\nrun\n"  # once per server: never twice at once
        again = pid_of(data / "pods", pod, "long")
        kubectl("run", "newer", "--image=busybox", "--", "sleep", "600")
        kubectl("wait", "--for=condition=Ready", "pod/newer", "--timeout=30s")
        addresses = [pod_json(kubectl, name, "default")["status"]["podIP"] for name in ("long", "newer")]
        assert addresses[0] != addresses[1]  # the new server gives no address a kept pod has
        second.send_signal(signal.SIGTERM)  # a server that stops stops its pods
        assert second.wait(60) == 0
    assert gone(again)


async def test_a_pod_whose_container_has_run_is_running_while_it_backs_off(tmp_path: pathlib.Path) -> None:
    """The phase a kubelet reports: Pending until a container has started, Running after, even
    while the only container waits out its back-off before its first restart."""

    async def nothing(kind: str, namespace: str, name: str) -> None:
        return None

    async def no_token(*request: object) -> tuple[str, float]:
        raise AssertionError("no token is asked for")

    runtime = ProcessRuntime(
        tmp_path, LocalImages.parse(["busybox=host"]), nothing, no_token, api_host="127.0.0.1", api_port=1
    )
    pod = {"metadata": {"name": "p", "namespace": "n", "uid": "u"},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}  # fmt: skip
    assert runtime.status(pod).phase == "Pending"
    state = runtime.pod_run(pod).containers["c"] = ContainerRun("c")
    state.waiting = {"reason": "RunContainerError", "message": "no such file"}
    assert runtime.status(pod).phase == "Pending"  # never started
    state.started_at = "2026-11-28T00:00:00Z"
    state.terminated = {"exitCode": 1, "reason": "Error"}
    state.waiting = {"reason": "CrashLoopBackOff", "message": "back-off 10s"}
    found = runtime.status(pod)
    (status,) = found.containers
    assert (found.phase, status["restartCount"], found.ready) == ("Running", 0, False)
    assert status["lastState"] == {"terminated": {"exitCode": 1, "reason": "Error"}}


def test_a_pods_grace_period_holds_up_no_other_pod(kubectl: Kubectl, namespace: str, pods_dir: pathlib.Path) -> None:
    """Pods that ignore SIGTERM, deleted together, wait out their grace periods in the
    background: a pod created meanwhile starts while their processes still live."""
    ns = ["-n", namespace]
    stubborn = [f"stubborn-{i}" for i in range(5)]  # more than the kubelet's four workers
    for name in stubborn:
        kubectl("run", name, *ns, "--image=busybox", "--overrides",
                '{"spec": {"terminationGracePeriodSeconds": 10}}', "--",
                "sh", "-c", "trap '' TERM; while true; do sleep 0.1; done")  # fmt: skip
    kubectl("wait", *ns, "--for=condition=Ready", *(f"pod/{n}" for n in stubborn), "--timeout=30s")
    pids = [pid_of(pods_dir, pod_json(kubectl, name, namespace), name) for name in stubborn]
    kubectl("delete", "pod", *ns, *stubborn, "--wait=false")
    kubectl("run", "fresh", *ns, "--image=busybox", "--", "sleep", "600")
    kubectl("wait", *ns, "--for=condition=Ready", "pod/fresh", "--timeout=30s")
    assert not any(gone(pid) for pid in pids)  # still in their grace periods (their end is
    # test_deleting_a_pod_stops_its_process_within_the_grace_period's to prove)


def test_the_folders_of_pods_deleted_while_no_server_ran_are_removed(tmp_path: pathlib.Path) -> None:
    pods = tmp_path / "pods"
    (pods / "0f0f0f0f-gone" / "main").mkdir(parents=True)
    (pods / "0f0f0f0f-gone" / "main" / "0.log").write_text("what a pod deleted meanwhile wrote\n")
    (pods / "claims" / "a-claim").mkdir(parents=True)
    options = SimulationOptions(local_images=("busybox=host",), pods_dir=pods)
    server = start_server(simulate=True, simulation=options)
    try:
        while (pods / "0f0f0f0f-gone").exists():
            time.sleep(0.05)  # removed once the node has seen which pods exist
        assert (pods / "claims" / "a-claim").is_dir()  # claims outlive pods
    finally:
        server.stop()


def test_left_behind_processes_are_killed_only_if_they_are_the_very_ones(tmp_path: pathlib.Path) -> None:
    """A pid file names a process by its id and start: a process that has the id now but
    started at another time (after a reboot, or the id's reuse) is left alone."""
    import subprocess

    from kubeloop.node.processgroups import process_mark

    async def nothing(kind: str, namespace: str, name: str) -> None:
        return None

    async def no_token(*request: object) -> tuple[str, float]:
        raise AssertionError("no token is asked for")

    runtime = ProcessRuntime(
        tmp_path, LocalImages.parse(["busybox=host"]), nothing, no_token, api_host="127.0.0.1", api_port=1
    )
    bystander = subprocess.Popen(["sleep", "600"], start_new_session=True)
    ours = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        (tmp_path / "pod-a" / "main").mkdir(parents=True)
        pid, started, boot = process_mark(bystander.pid).split()
        (tmp_path / "pod-a" / "main" / "pid").write_text(f"{pid} {int(started) + 1} {boot}")
        (tmp_path / "pod-b" / "main").mkdir(parents=True)
        (tmp_path / "pod-b" / "main" / "pid").write_text(process_mark(ours.pid))
        assert runtime.clean_up_left_behind() == [ours.pid]
        assert ours.wait(10) == -signal.SIGKILL
        assert bystander.poll() is None  # not the process the file meant
    finally:
        bystander.kill()
        ours.kill()
        bystander.wait()
        ours.wait()


def test_an_entrypoint_image_gets_no_variables_or_probes_that_would_run_other_code(
    kubectl: Kubectl, namespace: str
) -> None:
    """An IMAGE=COMMAND image runs its entrypoint only: a pod does not pass it the variables that
    make a loader, shell or interpreter run code of the pod's choosing, and its exec probes are
    refused (they would run on this machine)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "guarded", "namespace": namespace},
           "spec": {"containers": [{"name": "main", "image": "example.com/env", "env": [
               {"name": "LD_PRELOAD", "value": "/tmp/evil.so"}, {"name": "PYTHONPATH", "value": "/tmp/evil"},
               {"name": "BASH_ENV", "value": "/tmp/evil.sh"}, {"name": "FOO", "value": "bar"}],
               "livenessProbe": {"exec": {"command": ["touch", "/tmp/should-not-exist"]}, "periodSeconds": 1,
                                 "failureThreshold": 1000}}]}}  # fmt: skip
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(pod))
    while not (logged := kubectl("logs", "guarded", "-n", namespace, check=False).stdout):
        time.sleep(0.05)
    assert logged == "['FOO']\n"
    while not (said := json.loads(kubectl("get", "events", "-n", namespace, "-o", "json").stdout)["items"]):
        time.sleep(0.05)
    while not any(e["reason"] == "Unhealthy" for e in said):
        time.sleep(0.05)
        said = json.loads(kubectl("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    (unhealthy,) = {e["message"] for e in said if e["reason"] == "Unhealthy"}
    assert unhealthy.startswith("Liveness probe failed: image example.com/env runs ")
    assert unhealthy.endswith("an exec probe would run on this machine (name the image with =host to allow that)")


def test_a_server_that_stops_leaves_no_process_in_its_grace_period(tmp_path: pathlib.Path) -> None:
    """A pod ignoring SIGTERM with a long grace period, being deleted when the server stops:
    the server's stop kills it rather than leaving it behind."""
    options = SimulationOptions(pod_start_seconds=0.1, local_images=("busybox=host",), pods_dir=tmp_path / "pods")
    server = start_server(simulate=True, simulation=options)
    try:
        kubectl = Kubectl(KUBECTLS[-1], server.kubeconfig, tmp_path)
        kubectl("run", "stubborn", "--image=busybox", "--overrides", '{"spec": {"terminationGracePeriodSeconds": 600}}',
                "--", "sh", "-c", "trap '' TERM; while true; do sleep 0.1; done")  # fmt: skip
        kubectl("wait", "--for=condition=Ready", "pod/stubborn", "--timeout=30s")
        pid = pid_of(tmp_path / "pods", pod_json(kubectl, "stubborn", "default"), "stubborn")
        kubectl("delete", "pod", "stubborn", "--wait=false")
    finally:
        server.stop()
    while not gone(pid):
        time.sleep(0.05)  # killed by the stop (the test's timeout bounds it; before, it lived on)


def test_a_relative_data_dir_gives_pods_a_root_they_can_reach(tmp_path: pathlib.Path) -> None:
    """``kubeloop apiserver --data-dir data`` as a user types it: a container runs in a folder of
    its own, so the root named in its environment must not be relative to the server's."""
    server = subprocess.Popen(
        [sys.executable, "-m", "kubeloop.cli.main", "apiserver", "--data-dir", "data", "--port", "0",
         "--simulate", "--local-image", "busybox=host"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None and "ready" in server.stdout.readline()
        kubectl = Kubectl(KUBECTLS[0], tmp_path / "data" / "kubeconfig", tmp_path)
        script = 'cd / && echo "written from $PWD" > "$KUBELOOP_CONTAINER_ROOT/dev/termination-log"'
        kubectl("run", "rooted", "--image=busybox", "--restart=Never", "--", "sh", "-c", script)
        pod = ended(kubectl, "rooted", "default")
        assert pod["status"]["phase"] == "Succeeded", pod["status"]
        terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert terminated["message"] == "written from /\n"
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


def test_kubectl_logs_of_a_job_reads_that_jobs_own_pod(each_kubectl: Kubectl, namespace: str) -> None:
    """Two Jobs whose pods carry the same labels: each Job's generated selector (its uid) picks
    its own pod, so ``kubectl logs job/<name>`` never reads the other's."""
    for name in ("first", "second"):
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "template": {
                    "metadata": {"labels": {"app": "same"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox", "command": ["echo", f"I am {name}"]}],
                    },
                }
            },
        }
        each_kubectl("apply", "-f", "-", stdin=json.dumps(job))
    for name in ("first", "second"):
        while each_kubectl("get", "job", name, "-n", namespace, "-o", "jsonpath={.status.succeeded}").stdout != "1":
            time.sleep(0.05)  # the pod's run (the test's timeout bounds it)
        assert each_kubectl("logs", f"job/{name}", "-n", namespace).stdout == f"I am {name}\n"
        selector = json.loads(each_kubectl("get", "job", name, "-n", namespace, "-o", "json").stdout)["spec"]["selector"]
        assert list(selector["matchLabels"]) == ["batch.kubernetes.io/controller-uid"]
