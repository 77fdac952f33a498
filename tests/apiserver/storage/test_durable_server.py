"""The durable server (SQLite in a data directory) as users run it: re-creating what they deleted,
storage that fails and recovers, a full disk, a private and exclusive data directory, compaction
by time — over real HTTP, with kubectl where a user would use it."""

from __future__ import annotations

import concurrent.futures
import fcntl
import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import yaml

from kubeloop.apiserver.storage.log import SQLiteLog
from tests import enospc
from tests.apiserver.storage.test_durability import apiserver, session_for
from tests.conftest import Client, ServerThread, start_server
from tests.kubectl_finder import kubectl_binaries, kubectl_env

KUBECTLS = kubectl_binaries()


@pytest.fixture
def durable(tmp_path: pathlib.Path) -> Iterator[ServerThread]:
    server = start_server(tmp_path / "data")
    try:
        yield server
    finally:
        server.stop()


def configmap(name: str, **data: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def wait_until(check: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


@pytest.mark.kubectl
def test_kubectl_recreates_what_it_deleted(durable: ServerThread, tmp_path: pathlib.Path) -> None:
    kubectl = [str(KUBECTLS[-1]), "--kubeconfig", str(durable.kubeconfig)]
    env = kubectl_env(tmp_path)

    def run(*args: str) -> str:
        done = subprocess.run([*kubectl, *args], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    for _ in range(3):
        run("create", "configmap", "x", "--from-literal=k=v")
        run("delete", "configmap", "x")
    run("create", "configmap", "x", "--from-literal=k=v")
    # A namespace deleted with content and created again — what every CI job does.
    for _ in range(2):
        run("create", "namespace", "ci")
        run("-n", "ci", "create", "configmap", "a", "--from-literal=k=v")
        run("delete", "namespace", "ci", "--wait=true", "--timeout=30s")
    run("create", "namespace", "ci")
    run("-n", "ci", "create", "configmap", "a", "--from-literal=k=v")
    # Every other kind still writes, and all of it is there after a restart.
    run("create", "secret", "generic", "s", "--from-literal=k=v")
    durable.stop()
    again = start_server(durable.options.data_dir)
    try:
        kubectl[2] = str(again.kubeconfig)
        names = run("get", "configmaps", "-A", "-o", "name")
        assert "configmap/x" in names and "configmap/a" in names
        run("delete", "configmap", "x")
        run("create", "configmap", "x", "--from-literal=k=again")
    finally:
        again.stop()


def test_concurrent_patches_without_resource_version_all_apply(durable: ServerThread) -> None:
    api = Client(durable)
    assert api.post("/api/v1/namespaces/default/configmaps", configmap("hot")).status_code == 201

    def label(i: int) -> int:
        patch = {"metadata": {"labels": {f"l{i}": "v"}}}
        return api.patch(
            "/api/v1/namespaces/default/configmaps/hot", patch, "application/merge-patch+json"
        ).status_code

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        codes = list(pool.map(label, range(48)))
    assert codes == [200] * 48  # upstream retries a write without a precondition; no spurious 409
    labels = api.get("/api/v1/namespaces/default/configmaps/hot").json()["metadata"]["labels"]
    assert len(labels) == 48
    # With a stale resourceVersion the client's precondition still fails with 409.
    stale = api.patch(
        "/api/v1/namespaces/default/configmaps/hot",
        {"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}},
        "application/merge-patch+json",
    )
    assert stale.status_code == 409


def test_locked_storage_fails_writes_alone_reports_not_ready_and_recovers(durable: ServerThread) -> None:
    api = Client(durable)
    assert api.get("/readyz").text == "ok"
    holder = sqlite3.connect(durable.options.data_dir / "state.db", isolation_level=None)  # type: ignore[operator]
    holder.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
    try:
        failed = api.post("/api/v1/namespaces/default/configmaps", configmap("blocked"))
        assert failed.status_code == 503, failed.text
        status = failed.json()
        assert status["reason"] == "ServiceUnavailable" and "database is locked" in status["message"]
        assert failed.headers["Retry-After"] == "1"
        # Nothing of the failed write is visible.
        assert api.get("/api/v1/namespaces/default/configmaps/blocked").status_code == 404
        ready = api.get("/readyz")
        assert ready.status_code == 500 and "[-]storage failed" in ready.text, ready.text
        assert api.get("/livez").status_code == 200
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    wait_until(lambda: api.get("/readyz").status_code == 200)
    created = api.post("/api/v1/namespaces/default/configmaps", configmap("blocked"))
    assert created.status_code == 201, created.text


def test_full_disk_is_reported_with_its_cause_and_writes_recover(tmp_path: pathlib.Path) -> None:
    """The durable server (its own process) on a disk that fills up: a write fails alone with
    SQLite's cause, nothing of it shows, reads go on, /readyz says why; once space is free again,
    writes work, and everything acknowledged is there after a restart. The disk is made full for
    the server's data directory by an ``ENOSPC`` shim (``tests.enospc``), so no privilege is
    needed."""
    data = tmp_path / "data"
    disk = enospc.FullDisk(enospc.build(tmp_path), data, tmp_path / "disk-is-full")
    with apiserver(data, env=disk.environment()) as (_, url):
        session = session_for(data)

        def post(name: str, **values: str) -> Any:
            return session.post(
                f"{url}/api/v1/namespaces/default/configmaps", json=configmap(name, **values), timeout=30
            )

        def get(path: str) -> Any:
            return session.get(url + path, timeout=30)

        assert post("before").status_code == 201
        disk.fill()
        failed = post("big", v="x" * 300_000)
        assert failed.status_code == 500, failed.text
        assert "database or disk is full" in failed.json()["message"]
        assert get("/api/v1/namespaces/default/configmaps/big").status_code == 404
        ready = get("/readyz")
        assert ready.status_code == 500 and "[-]storage failed" in ready.text, ready.text
        # Reads keep working while the disk is full.
        assert get("/api/v1/namespaces/default/configmaps/before").status_code == 200
        assert post("still-full").status_code == 500
        disk.free()
        wait_until(lambda: get("/readyz").status_code == 200)
        assert post("big", v="x" * 300_000).status_code == 201
        assert post("after").status_code == 201
    with apiserver(data) as (_, url):
        listed = session_for(data).get(f"{url}/api/v1/namespaces/default/configmaps", timeout=30).json()
        names = {item["metadata"]["name"] for item in listed["items"]} - {"kube-root-ca.crt"}
        assert names == {"after", "before", "big"}  # what was refused is nowhere


def test_data_directory_is_private_and_exclusive(tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    server = start_server(data)
    try:
        Client(server).post("/api/v1/namespaces/default/configmaps", configmap("x"))
        assert data.stat().st_mode & 0o777 == 0o700
        for path in data.rglob("*"):
            if path.is_file() and path.suffix != ".crt":  # certificates are public
                assert path.stat().st_mode & 0o777 == 0o600, path
        second = subprocess.run(
            [sys.executable, "-m", "kubeloop.cli.main", "apiserver", "--data-dir", str(data), "--port", "0"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 1
        assert "in use by another kubeloop apiserver" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        server.stop()


def test_default_data_directory_is_private(tmp_path: pathlib.Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubeloop.cli.main", "apiserver", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "stderr.txt").open("w"),  # a file: a pipe nobody reads fills at 64 kB
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert "ready" in proc.stdout.readline()
        data = tmp_path / ".local" / "share" / "kubeloop"
        assert data.stat().st_mode & 0o777 == 0o700
        assert (data / "state.db").stat().st_mode & 0o777 == 0o600
    finally:
        proc.terminate()
        proc.wait(15)


def test_watch_from_a_revision_older_than_the_compaction_window_is_expired(tmp_path: pathlib.Path) -> None:
    server = start_server(tmp_path / "data", compaction_interval=0.3)
    try:
        api = Client(server)
        first = api.post("/api/v1/namespaces/default/configmaps", configmap("old")).json()
        old_rv = first["metadata"]["resourceVersion"]
        api.post("/api/v1/namespaces/default/configmaps", configmap("newer"))
        store = server.server.store
        log = server.server._log
        assert store is not None and isinstance(log, SQLiteLog)
        # Compacted past the first object, in the watch cache and in the log.
        wait_until(
            lambda: (
                store.compacted_revision > int(old_rv)
                and all(revision > 0 for revision, _key, _deleted in log.rows())
            )
        )
        api.post("/api/v1/namespaces/default/configmaps", configmap("newest"))
        response = api.get(
            "/api/v1/namespaces/default/configmaps",
            params={"watch": "1", "resourceVersion": old_rv, "timeoutSeconds": "1"},
        )
        events = [orjson.loads(line) for line in response.content.splitlines() if line]
        assert events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410, events
        listed = api.get(
            "/api/v1/namespaces/default/configmaps",
            params={"resourceVersion": old_rv, "resourceVersionMatch": "Exact"},
        )
        assert listed.status_code == 410
    finally:
        server.stop()


USERS_KUBECONFIG = """\
apiVersion: v1
kind: Config
preferences: {colors: true}
clusters:
- name: kind-dev
  cluster: {server: "https://127.0.0.1:39999", insecure-skip-tls-verify: true}
- name: kubeloop
  cluster: {server: "https://stale.example:1"}
users:
- name: kind-dev
  user: {token: kind-token}
contexts:
- name: kind-dev
  context: {cluster: kind-dev, user: kind-dev, namespace: dev}
current-context: kind-dev
"""


def test_kubeconfig_flag_merges_into_the_users_file(tmp_path: pathlib.Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(USERS_KUBECONFIG)
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "kubeloop.cli.main", "apiserver",
            "--data-dir", str(tmp_path / "data"), "--port", "0", "--kubeconfig", str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "stderr.txt").open("w"),  # a file: a pipe nobody reads fills at 64 kB
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert "ready" in proc.stdout.readline()
        merged = yaml.safe_load(kubeconfig.read_text())
        assert merged["current-context"] == "kubeloop"
        assert merged["preferences"] == {"colors": True}
        clusters = {c["name"]: c["cluster"] for c in merged["clusters"]}
        assert clusters["kind-dev"]["server"] == "https://127.0.0.1:39999"  # the user's own, kept
        assert clusters["kubeloop"]["server"].startswith("https://127.0.0.1:")  # ours, replaced
        assert {u["name"] for u in merged["users"]} == {"kind-dev", "kubeloop", "kubeloop-cert"}
        assert {c["name"] for c in merged["contexts"]} == {"kind-dev", "kubeloop", "kubeloop-cert"}
        assert kubeconfig.stat().st_mode & 0o777 == 0o600
        env = kubectl_env(tmp_path)
        kubectl = [str(KUBECTLS[-1]), "--kubeconfig", str(kubeconfig)]
        contexts = subprocess.run(
            [*kubectl, "config", "get-contexts", "-o", "name"], env=env, capture_output=True, text=True
        )
        assert set(contexts.stdout.split()) == {"kind-dev", "kubeloop", "kubeloop-cert"}
        served = subprocess.run(
            [*kubectl, "get", "namespaces", "-o", "name"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "namespace/default" in served.stdout, served.stderr
    finally:
        proc.terminate()
        proc.wait(15)


def test_a_file_that_is_not_a_kubeconfig_is_left_alone(tmp_path: pathlib.Path) -> None:
    precious = tmp_path / "notes.yaml"
    precious.write_text("- just\n- a list\n")
    done = subprocess.run(
        [
            sys.executable, "-m", "kubeloop.cli.main", "apiserver",
            "--data-dir", str(tmp_path / "data"), "--port", "0", "--kubeconfig", str(precious),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 1 and "not a kubeconfig" in done.stderr
    assert precious.read_text() == "- just\n- a list\n"


def test_an_object_kept_from_before_a_rule_still_runs_and_reports(tmp_path: pathlib.Path) -> None:
    """A data directory written by an older kubeloop may hold an object a newer rule refuses (here
    a pod whose container names an env variable `A=B` and mounts a missing volume). Across a
    SIGKILL and a restart, the scheduler still binds it and the node still writes its status (as
    upstream's binding and status strategies, which do not check the spec): it runs and succeeds. A write of its spec is refused with upstream's
    causes (kubectl 1.33), and it can be deleted (kubectl 1.27)."""
    from tests.apiserver.storage.test_durability import apiserver
    from tests.apiserver.test_kubectl import Kubectl

    data = tmp_path / "data"
    old, new = (Kubectl(binary, data / "kubeconfig", tmp_path) for binary in (KUBECTLS[0], KUBECTLS[-1]))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "legacy", "namespace": "default", "annotations": {"kubeloop.dev/duration": "1"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]},
    }
    with apiserver(data, "--simulate") as (server, _url):
        old("apply", "-f", "-", stdin=orjson.dumps(pod).decode())
        server.kill()  # before the node starts it (a second later)
    # What an older kubeloop accepted, written into the stored object as it would have stored it,
    # once the killed server's storage writer (a process of its own, holding the log's lock with
    # it) has made its last commit and gone: a binding it committed after the edit was the newest
    # row, a valid pod (seen once in a make test).
    with open(data / "state.db.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
    with sqlite3.connect(data / "state.db") as conn:
        row_id, value = conn.execute(
            "SELECT id, value FROM kine WHERE name LIKE '%/pods/default/legacy' ORDER BY id DESC LIMIT 1"
        ).fetchone()
        stored = orjson.loads(value)
        assert stored["status"].get("phase") == "Pending"
        # Unbound, whether or not the scheduler got to it before the kill: the binding, too, must
        # not be refused for what the pod already broke.
        stored["spec"].pop("nodeName", None)
        stored["status"]["conditions"] = [
            c for c in stored["status"].get("conditions") or () if c.get("type") != "PodScheduled"
        ]
        container = stored["spec"]["containers"][0]
        container["env"] = [{"name": "A=B", "value": "1"}]
        container["volumeMounts"] = [{"name": "gone", "mountPath": "/x"}]
        conn.execute("UPDATE kine SET value = ? WHERE id = ?", (orjson.dumps(stored), row_id))
    with apiserver(data, "--simulate"):
        new("wait", "pod/legacy", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=30s")
        refused = new("label", "pod", "legacy", "tier=web", check=False)
        assert refused.returncode == 1
        assert (
            'The Pod "legacy" is invalid: \n* spec.containers[0].env[0].name: Invalid value: "A=B"'
            in refused.stderr
        )
        assert '* spec.containers[0].volumeMounts[0].name: Not found: "gone"' in refused.stderr
        old("delete", "pod", "legacy", "--timeout=30s")
        assert "NotFound" in new("get", "pod", "legacy", check=False).stderr


def test_no_read_shows_a_write_before_it_is_durable(tmp_path: pathlib.Path) -> None:
    """The storage writer process is stopped (SIGSTOP) while one create is in flight: the write
    is not on disk. Meanwhile, over HTTPS: a GET does not find it, a LIST neither, nor does its
    resourceVersion move, a read at the next revision is refused, and a watch that the server
    ends meanwhile shows no event of it. Once the writer goes on (SIGCONT), all of them do."""
    server = start_server(tmp_path / "data", controllers=False)
    try:
        log = server.server._log
        assert isinstance(log, SQLiteLog) and log.writer_pid is not None
        writer_pid = log.writer_pid
        store = server.server.store
        assert store is not None

        def in_flight() -> bool:
            return any(key.endswith("/pending") for key in store._inflight) and log.appends_in_flight > 0

        api = Client(server)
        cms = "/api/v1/namespaces/default/configmaps"
        before = api.get(cms).json()["metadata"]["resourceVersion"]
        answers: list[Any] = []
        writer = threading.Thread(target=lambda: answers.append(api.post(cms, configmap("pending"))))
        os.kill(writer_pid, signal.SIGSTOP)
        writer.start()
        try:
            deadline = time.monotonic() + 30  # a guard: the create is to reach the log
            while not in_flight():
                assert time.monotonic() < deadline, "the create never reached the log"
                time.sleep(0.01)
            assert api.get(f"{cms}/pending").status_code == 404
            listed = api.get(cms).json()
            assert listed["metadata"]["resourceVersion"] == before
            assert "pending" not in [item["metadata"]["name"] for item in listed["items"]]
            ahead = api.get(
                cms,
                params={
                    "resourceVersion": str(int(before) + 1),
                    "resourceVersionMatch": "Exact",
                    "limit": "1",
                },
            )
            assert ahead.status_code == 504 and ahead.json()["reason"] == "Timeout", ahead.text
            # A watch the server ends (timeoutSeconds) while the commit is still held: complete,
            # and without the write.
            ended = api.get(cms, params={"watch": "1", "resourceVersion": before, "timeoutSeconds": "1"})
            assert [
                orjson.loads(line)["object"]["metadata"]["name"] for line in ended.text.splitlines() if line
            ] == []
            assert not answers
        finally:
            os.kill(writer_pid, signal.SIGCONT)
            writer.join(30)
        [created] = answers
        assert created.status_code == 201, created.text
        revision = created.json()["metadata"]["resourceVersion"]
        assert api.get(f"{cms}/pending").status_code == 200
        assert int(api.get(cms).json()["metadata"]["resourceVersion"]) >= int(revision)
        watched = api.get(cms, params={"watch": "1", "resourceVersion": before, "timeoutSeconds": "1"})
        events = [orjson.loads(line) for line in watched.text.splitlines() if line]
        assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in events] == [
            ("ADDED", revision)
        ]
    finally:
        server.stop()
