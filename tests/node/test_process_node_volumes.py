"""What a local pod's process finds on disk: its volumes (ConfigMap and Secret with items and
modes, emptyDir shared by its containers, the downward API, a claim that outlives the pod) at
their mount paths under ``$KUBELOOP_CONTAINER_ROOT``; its ServiceAccount's token, through which
kubeloop's in-cluster configuration and the official client's ``load_config()`` reach the
server as that account; its termination message. A volume that cannot be made holds the pod in
ContainerCreating with the kubelet's FailedMount event, until it can."""

# ruff: noqa: F811  (the process node's fixtures are imported, then requested by name)

from __future__ import annotations

import json
import pathlib
import sys
import textwrap
import time
from typing import Any

import pytest
import yaml

from kubeloop.node.podvolumes import CannotMount, PodVolumes
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import ServerThread
from tests.node.test_process_node import (  # noqa: F401  (fixtures)
    api,
    ended,
    node,
    pod_json,
    pods_dir,
)


@pytest.fixture
def kubectl(node: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    """One kubectl: what is tested here is the node, which every kubectl sees alike."""
    return Kubectl(KUBECTLS[1], node.kubeconfig, tmp_path)


def apply(kubectl: Kubectl, *objects: dict[str, Any]) -> None:
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(objects))


def pod(name: str, namespace: str, script: str, **spec: Any) -> dict[str, Any]:
    """A pod of one busybox (run on the host) container running ``script`` with ``sh -c``."""
    container = {"name": "main", "image": "busybox", "command": ["sh", "-c", script]}
    container.update(spec.pop("container", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "volumes"}},
        "spec": {"restartPolicy": "Never", "containers": [container], **spec},
    }


def events(kubectl: Kubectl, name: str, namespace: str, reason: str) -> list[str]:
    found = json.loads(
        kubectl("get", "events", "-n", namespace, f"--field-selector=involvedObject.name={name}", "-o", "json").stdout
    )
    return [e["message"] for e in found["items"] if e["reason"] == reason]


def test_volumes_are_at_their_mount_paths_under_the_container_root(kubectl: Kubectl, namespace: str) -> None:
    ns = ["-n", namespace]
    kubectl("create", "configmap", "settings", *ns, "--from-literal=level=debug", "--from-literal=mode=fast")
    kubectl("create", "secret", "generic", "creds", *ns, "--from-literal=token=s3cret")
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": namespace},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}  # fmt: skip
    reader = (
        'r=$KUBELOOP_CONTAINER_ROOT; cat $r/etc/config/conf/level; echo; stat -c %a $r/etc/config/conf/level; '
        'ls $r/etc/config/conf; cat $r/etc/creds/token; echo; stat -c %a $r/etc/creds/token; '
        'cat $r/etc/info/labels; echo; cat $r/etc/info/name; echo; '
        'until [ -f $r/scratch/hello ]; do sleep 0.02; done; cat $r/scratch/hello; '
        'echo kept > $r/data/file; cat $r/only-mode; echo; pwd'
    )
    spec = pod("mounts", namespace, reader, container={"volumeMounts": [
        {"name": "config", "mountPath": "/etc/config"},
        {"name": "creds", "mountPath": "/etc/creds", "readOnly": True},
        {"name": "info", "mountPath": "/etc/info"},
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "data", "mountPath": "/data"},
        {"name": "config", "mountPath": "/only-mode", "subPath": "conf/mode"},
    ]})  # fmt: skip
    writer = "echo from-writer > $KUBELOOP_CONTAINER_ROOT/tmp/hello"
    spec["spec"]["containers"].append({"name": "writer", "image": "busybox", "command": ["sh", "-c", writer],
                                       "volumeMounts": [{"name": "scratch", "mountPath": "/tmp"}]})  # fmt: skip
    spec["spec"]["volumes"] = [
        {"name": "config", "configMap": {"name": "settings", "items": [
            {"key": "level", "path": "conf/level", "mode": 0o600}, {"key": "mode", "path": "conf/mode"}]}},
        {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400}},
        {"name": "info", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
        {"name": "scratch", "emptyDir": {}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
    ]  # fmt: skip
    apply(kubectl, claim, spec)
    found = ended(kubectl, "mounts", namespace)
    assert found["status"]["phase"] == "Succeeded", found["status"]
    logged = kubectl("logs", "mounts", *ns, "-c", "main").stdout.splitlines()
    assert logged[:8] == ["debug", "600", "level", "mode", "s3cret", "400", 'app="volumes"', "mounts"]
    assert logged[8:10] == ["from-writer", "fast"]  # the other container's file; a subPath of one key
    assert logged[10].endswith(f"/{found['metadata']['uid']}/main/root")  # the container's root is its directory
    # The claim outlives the pod: the next pod that mounts it finds what the first one wrote.
    kubectl("delete", "pod", "mounts", *ns)
    later = pod("later", namespace, "cat $KUBELOOP_CONTAINER_ROOT/var/lib/data/file",
                container={"volumeMounts": [{"name": "data", "mountPath": "/var/lib/data"}]},
                volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])  # fmt: skip
    apply(kubectl, later)
    assert ended(kubectl, "later", namespace)["status"]["phase"] == "Succeeded"
    assert kubectl("logs", "later", *ns).stdout == "kept\n"


#: Reaches the server from inside a pod, as its ServiceAccount, with kubeloop's in-cluster
#: configuration and with the official client's load_config(); prints what each was answered.
IN_CLUSTER = textwrap.dedent("""
    import asyncio, json, os
    from kubeloop import APIClient, errors, kinds
    from kubeloop.client.config import in_cluster_config

    name, namespace = os.environ["HOSTNAME"], os.environ["NS"]

    async def kubeloop_side():
        async with APIClient(in_cluster_config()) as client:
            try:
                found = await client.get(kinds.Pod, name, namespace=namespace)
            except errors.Forbidden as refused:
                return "forbidden: " + str(refused)
            return "uid " + found["metadata"]["uid"]

    def official_side():
        import kubernetes
        kubernetes.config.load_config()
        try:
            found = kubernetes.client.CoreV1Api().read_namespaced_pod(name, namespace)
        except kubernetes.client.exceptions.ApiException as refused:
            return f"status {refused.status}"
        return "uid " + found.metadata.uid

    print(json.dumps({"kubeloop": asyncio.run(kubeloop_side()), "official": official_side()}))
""")


def test_a_pod_reaches_the_server_as_its_service_account(kubectl: Kubectl, namespace: str) -> None:
    ns = ["-n", namespace]

    def run(name: str) -> tuple[dict[str, Any], dict[str, str]]:
        spec = pod(name, namespace, "")
        spec["spec"]["containers"][0].update(
            command=[sys.executable, "-c", IN_CLUSTER],
            env=[{"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
        )
        apply(kubectl, spec)
        found = ended(kubectl, name, namespace)
        assert found["status"]["phase"] == "Succeeded", kubectl("logs", name, *ns).stdout
        return found, json.loads(kubectl("logs", name, *ns).stdout.splitlines()[-1])

    found, answers = run("unbound")
    # Admission gave the pod its account and the account's credentials as a volume.
    spec = found["spec"]
    assert spec["serviceAccountName"] == "default"
    (volume,) = [v for v in spec["volumes"] if v["name"].startswith("kube-api-access-")]
    assert spec["containers"][0]["volumeMounts"] == [
        {"name": volume["name"], "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
    ]
    account = f"system:serviceaccount:{namespace}:default"
    assert answers["kubeloop"].startswith("forbidden: ") and account in answers["kubeloop"]
    assert answers["official"] == "status 403"
    kubectl("create", "role", "read-pods", *ns, "--verb=get", "--resource=pods")
    kubectl("create", "rolebinding", "read-pods", *ns, "--role=read-pods", f"--serviceaccount={namespace}:default")
    found, answers = run("bound")
    assert answers == {"kubeloop": "uid " + found["metadata"]["uid"], "official": "uid " + found["metadata"]["uid"]}


def test_a_pod_without_automount_has_no_credentials(kubectl: Kubectl, namespace: str) -> None:
    script = 'ls $KUBELOOP_CONTAINER_ROOT/var/run/secrets 2>&1; echo "kubeconfig=$KUBECONFIG"'
    apply(kubectl, pod("closed", namespace, script, automountServiceAccountToken=False))
    found = ended(kubectl, "closed", namespace)
    assert not any(v["name"].startswith("kube-api-access-") for v in found["spec"].get("volumes") or ())
    listed, kubeconfig = kubectl("logs", "closed", "-n", namespace).stdout.splitlines()
    assert "No such file or directory" in listed and kubeconfig == "kubeconfig="


def test_the_termination_message_is_what_the_process_wrote_at_its_path(kubectl: Kubectl, namespace: str) -> None:
    apply(
        kubectl,
        pod("default-path", namespace, "printf 'all done' > $KUBELOOP_CONTAINER_ROOT/dev/termination-log; exit 3"),
        pod("own-path", namespace, "head -c 5000 /dev/zero | tr '\\0' x > $KUBELOOP_CONTAINER_ROOT/tmp/said",
            container={"terminationMessagePath": "/tmp/said", "terminationMessagePolicy": "FallbackToLogsOnError"}),
    )  # fmt: skip
    first = ended(kubectl, "default-path", namespace)["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (first["exitCode"], first["message"]) == (3, "all done")
    second = ended(kubectl, "own-path", namespace)["status"]["containerStatuses"][0]["state"]["terminated"]
    assert second["message"] == "x" * 4096  # cut to 4 KiB, as upstream


def test_a_volume_that_cannot_be_made_holds_the_pod_until_it_can(kubectl: Kubectl, namespace: str) -> None:
    ns = ["-n", namespace]
    apply(kubectl, pod("ghostly", namespace, "echo ran", serviceAccountName="ghost"))
    while not (said := events(kubectl, "ghostly", namespace, "FailedMount")):
        time.sleep(0.05)
    assert said[0].startswith('MountVolume.SetUp failed for volume "kube-api-access-')
    assert said[0].endswith(': failed to fetch token: serviceaccounts "ghost" not found')
    status = pod_json(kubectl, "ghostly", namespace)["status"]
    assert status["phase"] == "Pending"
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    kubectl("create", "serviceaccount", "ghost", *ns)
    assert ended(kubectl, "ghostly", namespace)["status"]["phase"] == "Succeeded"
    nfs = pod("remote", namespace, "echo ran", volumes=[{"name": "share", "nfs": {"server": "nas", "path": "/x"}}])
    apply(kubectl, nfs)
    while not (said := events(kubectl, "remote", namespace, "FailedMount")):
        time.sleep(0.05)
    assert said == ['MountVolume.SetUp failed for volume "share" : volume type nfs is not supported by the process node']


def test_a_pod_deleted_at_once_is_forgotten_by_the_kubelet(
    kubectl: Kubectl, node: ServerThread, namespace: str
) -> None:
    """A forced delete removes the pod before the kubelet sees it ending: what the kubelet kept
    of it (its bind time, the FailedMount it said) goes when it finds the pod gone."""
    nfs = pod("stuck", namespace, "echo ran", volumes=[{"name": "share", "nfs": {"server": "nas", "path": "/x"}}])
    apply(kubectl, nfs)
    while not events(kubectl, "stuck", namespace, "FailedMount"):
        time.sleep(0.05)
    assert node.server._controllers is not None
    kubelet = node.server._controllers.kubelet
    assert kubelet is not None
    uid = pod_json(kubectl, "stuck", namespace)["metadata"]["uid"]
    assert uid in kubelet._unmounted and uid in kubelet._bound
    kubectl("delete", "pod", "stuck", "-n", namespace, "--grace-period=0", "--force")
    deadline = time.monotonic() + 30  # bounds a test that would otherwise hang
    while uid in kubelet._unmounted or uid in kubelet._bound or (namespace, "stuck") in kubelet._uids:
        assert time.monotonic() < deadline, "the kubelet kept what it knew of a pod that is gone"
        time.sleep(0.05)


def test_a_changed_config_map_reaches_the_running_pods_files(kubectl: Kubectl, namespace: str) -> None:
    """The kubelet watches what its pods name: the file changes as soon as the object does."""
    ns = ["-n", namespace]
    kubectl("create", "configmap", "flags", *ns, "--from-literal=state=v1")
    script = "until grep -q v2 $KUBELOOP_CONTAINER_ROOT/etc/flags/state; do sleep 0.02; done; echo seen"
    apply(kubectl, pod("watcher", namespace, script, container={"volumeMounts": [{"name": "f", "mountPath": "/etc/flags"}]},
                       volumes=[{"name": "f", "configMap": {"name": "flags"}}]))  # fmt: skip
    kubectl("wait", *ns, "--for=condition=Ready", "pod/watcher", "--timeout=30s")
    kubectl("patch", "configmap", "flags", *ns, "-p", '{"data":{"state":"v2"}}')
    assert ended(kubectl, "watcher", namespace)["status"]["phase"] == "Succeeded"
    assert kubectl("logs", "watcher", *ns).stdout == "seen\n"


# ---------------------------------------------------------------------------- the volumes alone


async def test_a_projected_token_is_asked_again_when_most_of_its_life_is_over(tmp_path: pathlib.Path) -> None:
    asked: list[tuple[str, list[str], int]] = []

    async def issue(namespace: str, account: str, audiences: list[str], seconds: int, pod: str, uid: str) -> tuple[str, float]:
        asked.append((account, audiences, seconds))
        return f"token-{len(asked)}", time.time() + 100

    async def nothing(kind: str, namespace: str, name: str) -> None:
        return None

    volumes = PodVolumes(tmp_path / "pod", tmp_path / "claims", nothing, issue)
    spec = {"metadata": {"name": "p", "namespace": "n", "uid": "u"}, "spec": {"serviceAccountName": "robot", "volumes": [
        {"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "tok", "audience": "vault", "expirationSeconds": 600}}]}}]}}  # fmt: skip
    again = await volumes.sync(spec)
    assert 0 < again <= 80  # 80 % of its life
    assert asked == [("robot", ["vault"], 600)]
    token_file = tmp_path / "pod" / "volumes" / "t" / "tok"
    assert token_file.read_text() == "token-1"
    await volumes.sync(spec)
    assert len(asked) == 1  # still fresh: not asked again
    for held in volumes.tokens.values():
        held.refresh_at = time.time() - 1
    await volumes.sync(spec)
    assert token_file.read_text() == "token-2"


async def test_paths_that_climb_out_of_a_volume_are_refused(tmp_path: pathlib.Path) -> None:
    async def config_map(kind: str, namespace: str, name: str) -> dict[str, Any]:
        return {"data": {"k": "v"}}

    async def no_token(*request: object) -> tuple[str, float]:
        raise AssertionError("no token is asked for")

    volumes = PodVolumes(tmp_path / "pod", tmp_path / "claims", config_map, no_token)
    spec = {"metadata": {"name": "p", "namespace": "n"}, "spec": {"volumes": [
        {"name": "c", "configMap": {"name": "x", "items": [{"key": "k", "path": "../../escaped"}]}}]}}  # fmt: skip
    with pytest.raises(CannotMount, match="climbs out"):
        await volumes.sync(spec)
    assert not (tmp_path / "escaped").exists()
