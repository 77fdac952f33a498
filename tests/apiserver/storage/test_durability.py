"""The `kubeloop apiserver` command: ready line, kubeconfig; no acknowledged write lost and no
write shown that later vanishes across SIGKILLs under load; every answer synced to disk first."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

import orjson
import pytest
import requests
import requests.adapters
import yaml

from kubeloop.testing import eventually
from tests import syscall_trace

KUBELOOP = [sys.executable, "-m", "kubeloop.cli.main"]


@contextmanager
def apiserver(
    data_dir: pathlib.Path,
    *extra: str,
    wrapper: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    default_workers: bool = False,
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``kubeloop apiserver`` on ``data_dir`` and a free port, as one process unless ``extra``
    says ``--workers`` or ``default_workers`` leaves it to the server (a process a core: the
    suite's servers would cost a front-end's start-up each)."""
    if not default_workers and "--workers" not in extra:
        extra = (*extra, "--workers", "1")
    # Its log goes to a file: a pipe nobody reads would stop the server once 64 kB were logged.
    # The server writes it with O_APPEND, and it is read without moving the offset the two
    # share (``server_log``): tempfile opens without O_APPEND, and a read's seek(0) in the middle
    # of the faulthandler's many small writes made the dump land over the log's start, its
    # "in <module>" split (one suite run found no stacks after SIGQUIT).
    with tempfile.TemporaryFile() as log:
        fcntl.fcntl(log.fileno(), fcntl.F_SETFL, fcntl.fcntl(log.fileno(), fcntl.F_GETFL) | os.O_APPEND)
        proc = subprocess.Popen(
            [*wrapper, *KUBELOOP, "apiserver", "--data-dir", str(data_dir), "--port", "0", *extra],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
        )
        _server_logs[proc.pid] = log
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert "ready" in line, (line, server_log(proc))
            url = line.split(" at ", 1)[1].split()[0]
            yield proc, url
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
            del _server_logs[proc.pid]


_server_logs: dict[int, IO[bytes]] = {}


def server_log(proc: subprocess.Popen[str]) -> str:
    """What a server started by :func:`apiserver` has logged so far."""
    fd = _server_logs[proc.pid].fileno()
    return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")


def server_stacks(proc: subprocess.Popen[str]) -> str:
    """Every thread's stack in a running server (SIGQUIT; the server goes on), with its log."""
    os.kill(proc.pid, signal.SIGQUIT)
    try:
        asyncio.run(eventually(lambda: "in <module>" in server_log(proc) or proc.poll() is not None))
    except AssertionError:  # what the server wrote instead, for the failure
        raise AssertionError(f"no stacks after SIGQUIT; the server's log:\n{server_log(proc)[-6000:]}") from None
    return server_log(proc)


def front_ends(owner: int) -> list[int]:
    """The owner's front-end processes (its other children run the storage writer)."""
    children = pathlib.Path(f"/proc/{owner}/task/{owner}/children").read_text().split()
    return [
        int(pid) for pid in children
        if b"kubeloop.apiserver.frontends" in pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
    ]  # fmt: skip


def socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in pathlib.Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def established(pid: int, port: int, peers: set[int] | None = None) -> int:
    """How many TCP connections to ``port`` process ``pid`` holds (accepted ones: their local
    port is the server's); with ``peers``, only those from these client ports."""
    inodes = socket_inodes(pid)
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in pathlib.Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            ours = peers is None or remote_port in peers
            if local_port == port and fields[3] == "01" and fields[9] in inodes and ours:
                count += 1
    return count


def session_for(data_dir: pathlib.Path) -> requests.Session:
    kubeconfig = yaml.safe_load((data_dir / "kubeconfig").read_text())
    session = requests.Session()
    session.trust_env = False  # REQUESTS_CA_BUNDLE would override session.verify
    session.headers["Authorization"] = "Bearer " + kubeconfig["users"][0]["user"]["token"]
    session.verify = str(data_dir / "pki" / "ca.crt")
    adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=16)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session


def test_ready_line_kubeconfig_mode_and_sigterm(tmp_path: pathlib.Path) -> None:
    with apiserver(tmp_path) as (proc, url):
        assert url.startswith("https://127.0.0.1:")
        mode = (tmp_path / "kubeconfig").stat().st_mode & 0o777
        assert mode == 0o600
        session = session_for(tmp_path)
        assert session.get(url + "/version", timeout=10).status_code == 200
        created = session.post(
            url + "/api/v1/namespaces/default/configmaps",
            json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept"}, "data": {"k": "v"}},
            timeout=10,
        )
        assert created.status_code == 201, created.text
        # Its log is appended to, whatever offset a read of it leaves (``apiserver``).
        flags = pathlib.Path(f"/proc/{proc.pid}/fdinfo/2").read_text().split("flags:")[1].split()[0]
        assert int(flags, 8) & os.O_APPEND
        # SIGQUIT: every thread's stack to stderr, and the server goes on.
        stacks = server_stacks(proc)
        assert "Current thread" in stacks and "kubeloop/cli/main.py" in stacks, stacks
        assert session.get(url + "/api/v1/namespaces/default/configmaps/kept", timeout=10).status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0  # a clean stop, then the process leaves without tearing down
    with apiserver(tmp_path) as (_, url):
        kept = session_for(tmp_path).get(url + "/api/v1/namespaces/default/configmaps/kept", timeout=10)
        assert kept.status_code == 200 and kept.json()["data"] == {"k": "v"}


def test_acknowledged_writes_survive_sigkill(tmp_path: pathlib.Path) -> None:
    acknowledged: list[str] = []
    with apiserver(tmp_path) as (proc, url):
        session = session_for(tmp_path)
        stop = threading.Event()

        def writer(worker: int) -> None:
            i = 0
            while not stop.is_set():
                name = f"w{worker}-{i}"
                try:
                    response = session.post(
                        url + "/api/v1/namespaces/default/configmaps",
                        json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}},
                        timeout=10,
                    )
                except requests.RequestException:
                    return
                if response.status_code == 201:
                    acknowledged.append(name)
                i += 1

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        while len(acknowledged) < 200:
            threading.Event().wait(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        stop.set()
        for t in threads:
            t.join(15)
    with apiserver(tmp_path) as (_proc, url):
        listed = session_for(tmp_path).get(url + "/api/v1/namespaces/default/configmaps", timeout=30).json()
        present = {item["metadata"]["name"] for item in listed["items"]}
        lost = [name for name in acknowledged if name not in present]
        assert not lost, f"{len(lost)} acknowledged writes lost: {lost[:5]}"
        revisions = [int(item["metadata"]["resourceVersion"]) for item in listed["items"]]
        assert len(set(revisions)) == len(revisions)


# ----------------------------------------------------------------- SIGKILL cycles under load

#: Kill cycles per run (the closing note's figures come from KUBELOOP_KILL_CYCLES=12).
KILL_CYCLES = int(os.environ.get("KUBELOOP_KILL_CYCLES", "4"))
#: Acknowledged writes before a cycle's kill (at least).
KILL_ACKS = int(os.environ.get("KUBELOOP_KILL_ACKS", "150"))


class Observations:
    """What writers were told and readers were shown, across every cycle."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acknowledged: dict[str, int] = {}  # name → resourceVersion of the 201
        self.counter_acked = 0  # the highest value an update of "counter" was acknowledged with
        self.seen: dict[str, int] = {}  # name → a resourceVersion some reader saw it at
        self.counter_seen = 0
        self.revisions: dict[int, str] = {}  # resourceVersion → the one object it names

    def saw(self, obj: dict[str, object]) -> None:
        meta = obj["metadata"]
        assert isinstance(meta, dict)
        name, revision = str(meta["name"]), int(meta["resourceVersion"])
        with self.lock:
            if name == "counter":
                self.counter_seen = max(self.counter_seen, int((obj.get("data") or {}).get("n", "0")))  # type: ignore[union-attr]
            else:
                self.seen.setdefault(name, revision)
            owner = self.revisions.setdefault(revision, name)
        assert owner == name, f"resourceVersion {revision} named {owner} and then {name}"

    def held_by(self, items: list[dict[str, Any]], when: str) -> None:
        """Assert that the server's ConfigMaps (``items``) hold what it promised: every create
        acknowledged, at the revision its 201 named; every object a reader was shown; the
        counter at least at any value an update was told or a reader saw."""
        present = {item["metadata"]["name"]: item for item in items}
        for item in items:
            self.saw(item)
        lost = [name for name in self.acknowledged if name not in present]
        assert not lost, f"{when}: {len(lost)} acknowledged creates lost: {lost[:5]}"
        vanished = [name for name in self.seen if name not in present]
        assert not vanished, f"{when}: readers saw {len(vanished)} objects that vanished: {vanished[:5]}"
        counter = int(present["counter"]["data"]["n"])
        assert counter >= self.counter_acked, (when, counter, self.counter_acked)
        assert counter >= self.counter_seen, (when, counter, self.counter_seen)
        for name, revision in self.acknowledged.items():
            assert int(present[name]["metadata"]["resourceVersion"]) == revision, (when, name)


class Killer:
    """SIGKILLs the server once, from whichever thread decides first."""

    def __init__(self, pid: int, before: Callable[[], None] | None = None) -> None:
        self.pid = pid
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._before = before  # called just before the kill

    def __call__(self) -> None:
        with self._lock:
            if not self.done.is_set():
                if self._before is not None:
                    self._before()
                os.kill(self.pid, signal.SIGKILL)
                self.done.set()


def load_until_killed(
    url: str,
    session: requests.Session,
    cycle: int,
    seen: Observations,
    kill: Killer,
    *,
    acks: int,
    eager: bool,
) -> int:
    """Writers create and update while readers list, get and watch, until ``kill`` fires: once
    ``acks`` writes were acknowledged or — ``eager`` — the moment a reader is shown an object its
    creator has not heard back about (visible before acknowledged: the riskiest moment to crash).
    Returns how many writes were acknowledged."""
    path = url + "/api/v1/namespaces/default/configmaps"
    acknowledged = [0]
    next_index = [0] * 4

    def creator(worker: int) -> None:
        for i in range(1_000_000):
            if kill.done.is_set():
                return
            next_index[worker] = i
            name = f"c{cycle}-w{worker}-{i}"
            try:
                answer = session.post(path, json={"metadata": {"name": name}}, timeout=10)
            except requests.RequestException:
                return
            if answer.status_code == 201:
                with seen.lock:
                    seen.acknowledged[name] = int(answer.json()["metadata"]["resourceVersion"])
                    acknowledged[0] += 1

    def updater() -> None:
        while not kill.done.is_set():
            try:
                current = session.get(path + "/counter", timeout=10).json()
                value = int(current["data"]["n"]) + 1
                current["data"]["n"] = str(value)
                answer = session.put(path + "/counter", json=current, timeout=10)
            except (requests.RequestException, KeyError, ValueError):
                return
            if answer.status_code == 200:
                with seen.lock:
                    seen.counter_acked = max(seen.counter_acked, value)
                    acknowledged[0] += 1

    def lister() -> None:
        while not kill.done.is_set():
            try:
                listed = session.get(path, timeout=10).json()
            except (requests.RequestException, ValueError):
                return
            for item in listed.get("items", ()):
                seen.saw(item)

    def chaser(worker: int) -> None:
        # GETs the object a writer is creating right now: the first read that can see it.
        while not kill.done.is_set():
            name = f"c{cycle}-w{worker}-{next_index[worker]}"
            try:
                answer = session.get(f"{path}/{name}", timeout=10)
            except requests.RequestException:
                return
            if answer.status_code == 200:
                seen.saw(answer.json())
                with seen.lock:
                    ahead = name not in seen.acknowledged
                if eager and ahead and acknowledged[0] >= acks // 4:
                    kill()

    def watcher() -> None:
        try:
            with session.get(path, params={"watch": "1"}, stream=True, timeout=10) as response:
                for line in response.iter_lines():
                    if line:
                        event = orjson.loads(line)
                        if event["type"] in ("ADDED", "MODIFIED"):
                            seen.saw(event["object"])
        except (requests.RequestException, ValueError):
            return

    threads = [threading.Thread(target=creator, args=(w,)) for w in range(4)]
    threads += [threading.Thread(target=chaser, args=(w,)) for w in range(4)]
    threads += [threading.Thread(target=f) for f in (updater, lister, watcher)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while acknowledged[0] < acks and time.monotonic() < deadline and not kill.done.wait(0.002):
        pass
    kill()
    for thread in threads:
        thread.join(20)
    return acknowledged[0]


def server_pid(proc: subprocess.Popen[str], wrapped: bool) -> int:
    """The server's pid (under strace, strace's child)."""
    if not wrapped:
        return proc.pid
    return int(pathlib.Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()[0])


@pytest.mark.parametrize("workers", ["1", "2"], ids=["one-process", "two-processes"])
def test_kill_cycles_lose_no_acknowledged_write_and_show_none_that_vanish(tmp_path: pathlib.Path, workers: str) -> None:
    """SIGKILL under concurrent writers and readers, again and again. Every other cycle runs on a
    slow disk (each fsync delayed 20 ms by strace's fault injection) and is killed the moment a
    reader sees an object before its creator's 201 — where a server that shows writes before they
    are durable loses them. With two processes, the writers' and readers' connections are spread
    over the owner of the store and its front-end, and the owner is killed."""
    seen = Observations()
    total_acked = 0
    strace = syscall_trace.strace()
    # Two processes: a fast-disk and a slow-disk cycle (the owner's log is the same code as one
    # process's, which runs them all).
    for cycle in range(KILL_CYCLES if workers == "1" else min(2, KILL_CYCLES)):
        slow_disk = cycle % 2 == 1
        wrapper = (strace, *syscall_trace.SLOW_FSYNC) if slow_disk else ()
        with apiserver(tmp_path, "--workers", workers, wrapper=wrapper) as (proc, url):
            session = session_for(tmp_path)
            if cycle == 0:
                created = session.post(
                    url + "/api/v1/namespaces/default/configmaps",
                    json={"metadata": {"name": "counter"}, "data": {"n": "0"}},
                )
                assert created.status_code == 201
            kill = Killer(server_pid(proc, bool(wrapper)))
            total_acked += load_until_killed(
                url, session, cycle, seen, kill, acks=KILL_ACKS + 50 * (cycle % 3), eager=cycle % 2 == 1
            )
            proc.wait(10)
        with apiserver(tmp_path, "--workers", workers) as (_proc, url):
            listed = (
                session_for(tmp_path).get(url + "/api/v1/namespaces/default/configmaps", timeout=30).json()
            )
            seen.held_by(listed["items"], f"cycle {cycle}")
    print(f"kill cycles: {KILL_CYCLES}, acknowledged writes: {total_acked}, lost: 0, seen then vanished: 0")


def test_a_front_end_killed_under_load_loses_no_acknowledged_write_and_the_owner_serves_on(
    tmp_path: pathlib.Path,
) -> None:
    """Two processes under the same writers and readers as the kill cycles; the front-end is
    SIGKILLed the moment a reader sees an object before its creator's 201 (or after enough
    writes). The owner serves on, unrestarted: every write acknowledged through either process
    is there at the revision its 201 named, nothing a reader saw has vanished, and the counter
    is at least what any update was told."""
    seen = Observations()
    with apiserver(tmp_path, "--workers", "2") as (proc, url):
        session = session_for(tmp_path)
        path = url + "/api/v1/namespaces/default/configmaps"
        created = session.post(path, json={"metadata": {"name": "counter"}, "data": {"n": "0"}})
        assert created.status_code == 201
        [front_end] = front_ends(proc.pid)
        port = int(url.rsplit(":", 1)[1])
        serving: list[int] = []  # the front-end's connections (its share of the load) as it is killed
        kill = Killer(front_end, before=lambda: serving.append(established(front_end, port)))
        acked = load_until_killed(url, session, 0, seen, kill, acks=KILL_ACKS, eager=True)
        assert acked > 0 and serving and serving[0] > 0 and proc.poll() is None
        listed = session_for(tmp_path).get(path, timeout=30).json()  # new connections: a live process
        seen.held_by(listed["items"], "after the front-end's kill")
        assert proc.poll() is None


# ----------------------------------------------------------------- synced before acknowledged


@pytest.mark.parametrize("fsync", [True, False], ids=["durable", "no-fsync"])
def test_every_create_is_synced_to_disk_before_it_is_acknowledged(
    tmp_path: pathlib.Path, fsync: bool
) -> None:
    """Traces the live server's system calls: each 201 Created must follow an fsync of the WAL
    that follows the WAL write holding the object. With ``--no-fsync`` the same check must catch
    answers sent before any sync — the test fails when durability is switched off."""
    trace = tmp_path / "trace"
    wrapper = (syscall_trace.strace(), *syscall_trace.STRACE_ARGS, "-o", str(trace))
    extra = ("--insecure-http",) if fsync else ("--insecure-http", "--no-fsync")
    names = [f"synced-{i}" for i in range(20)]
    with apiserver(tmp_path / "data", *extra, wrapper=wrapper) as (proc, url):
        kubeconfig = yaml.safe_load((tmp_path / "data" / "kubeconfig").read_text())
        session = requests.Session()
        session.trust_env = False
        session.headers["Authorization"] = "Bearer " + kubeconfig["users"][0]["user"]["token"]
        for name in names[:10]:  # one at a time
            answer = session.post(
                url + "/api/v1/namespaces/default/configmaps", json={"metadata": {"name": name}}
            )
            assert answer.status_code == 201
        threads = [  # and ten at once, so group commits hold several
            threading.Thread(
                target=session_for_thread(session, url + "/api/v1/namespaces/default/configmaps", name)
            )
            for name in names[10:]
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        with sqlite3.connect(tmp_path / "data" / "state.db") as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        # Stop the server itself (strace's child); strace ends with it and flushes the trace.
        children = pathlib.Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        for child in children:
            os.kill(int(child), signal.SIGTERM)
        proc.wait(30)
    unsynced = syscall_trace.acknowledged_before_sync(trace.read_text(errors="replace"), names)
    if fsync:
        assert unsynced == [], f"answered before their write was on disk: {unsynced}"
    else:
        assert unsynced, "the check did not notice a server that never syncs"


def every_write_verb(session: requests.Session, url: str) -> int:
    """One write of each kind a client can make, one at a time; returns how many were answered."""
    cms = url + "/api/v1/namespaces/default/configmaps"
    deployments = url + "/apis/apps/v1/namespaces/default/deployments"
    merge, json_patch = "application/merge-patch+json", "application/json-patch+json"
    strategic, apply = "application/strategic-merge-patch+json", "application/apply-patch+yaml"

    def patch(path: str, body: object, content_type: str, **params: str) -> requests.Response:
        return session.patch(
            path, data=orjson.dumps(body), headers={"Content-Type": content_type}, params=params, timeout=30
        )

    deployment = {
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }
    created = session.post(cms, json={"metadata": {"name": "a", "labels": {"batch": "x"}}}, timeout=30)
    answers = [created]
    current = created.json()
    current["data"] = {"put": "1"}
    answers.append(session.put(f"{cms}/a", json=current, timeout=30))
    answers.append(patch(f"{cms}/a", {"data": {"merge": "1"}}, merge))
    answers.append(patch(f"{cms}/a", [{"op": "add", "path": "/data/json", "value": "1"}], json_patch))
    answers.append(patch(f"{cms}/a", {"data": {"strategic": "1"}}, strategic))
    applied = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"applied": "1"}}
    answers.append(patch(f"{cms}/a", applied, apply, fieldManager="tester", force="true"))
    answers.append(session.post(deployments, json=deployment, timeout=30))
    status = answers[-1].json()
    status["status"] = {"replicas": 1}
    answers.append(session.put(f"{deployments}/d/status", json=status, timeout=30))
    answers.append(patch(f"{deployments}/d/status", {"status": {"replicas": 2}}, merge))
    answers.append(session.delete(f"{cms}/a", timeout=30))
    for name in ("b1", "b2"):
        answers.append(
            session.post(cms, json={"metadata": {"name": name, "labels": {"batch": "y"}}}, timeout=30)
        )
    answers.append(session.delete(cms, params={"labelSelector": "batch=y"}, timeout=30))
    for answer in answers:
        assert answer.status_code in (200, 201), (
            answer.request.method,
            answer.request.url,
            answer.text[:300],
        )
    return len(answers)


@pytest.mark.parametrize("fsync", [True, False], ids=["durable", "no-fsync"])
def test_every_write_verb_is_synced_before_it_is_acknowledged(tmp_path: pathlib.Path, fsync: bool) -> None:
    """Create, update, every patch type, apply, status by PUT and by patch, delete and
    deletecollection, one at a time against the server alone under strace: every 2xx follows a
    completed fsync of the WAL after the WAL write its request caused. With --no-fsync the same
    check must fail."""
    trace = tmp_path / "trace"
    wrapper = (syscall_trace.strace(), *syscall_trace.STRACE_ARGS, "-o", str(trace))
    extra = ("--insecure-http", "--no-controllers", *(() if fsync else ("--no-fsync",)))
    with apiserver(tmp_path / "data", *extra, wrapper=wrapper) as (proc, url):
        session = session_for(tmp_path / "data")
        assert session.get(url + "/version", timeout=30).status_code == 200  # fences off start-up
        writes = every_write_verb(session, url)
        children = pathlib.Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        for child in children:
            os.kill(int(child), signal.SIGTERM)
        proc.wait(30)
    text = trace.read_text(errors="replace")
    unsynced = syscall_trace.answers_before_sync(text)
    assert text.count("HTTP/1.1 20") >= writes + 1
    if fsync:
        assert unsynced == [], f"answers sent before their write was on disk: {unsynced} of {writes}"
    else:
        assert len(unsynced) == writes, "the check did not notice a server that never syncs"


def session_for_thread(session: requests.Session, path: str, name: str) -> Callable[[], None]:
    def create() -> None:
        answer = session.post(path, json={"metadata": {"name": name}}, timeout=30)
        assert answer.status_code == 201

    return create


def test_what_was_deleted_stays_deleted_across_a_sigkill(tmp_path: pathlib.Path) -> None:
    """Deleted by DELETE, by deletecollection, and by the removal of the last finalizer: each
    answered, then the server is SIGKILLed; restarted on its data, none of them is back."""
    data = tmp_path / "data"
    cms = "/api/v1/namespaces/default/configmaps"
    with apiserver(data, "--no-controllers") as (proc, url):
        session = session_for(data)
        for name, labels in (
            ("plain", {}),
            ("batch-1", {"batch": "y"}),
            ("batch-2", {"batch": "y"}),
            ("kept", {}),
        ):
            assert (
                session.post(url + cms, json={"metadata": {"name": name, "labels": labels}}).status_code
                == 201
            )
        held = {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
        assert session.post(url + cms, json=held).status_code == 201
        assert session.delete(f"{url}{cms}/plain").status_code == 200
        assert session.delete(url + cms, params={"labelSelector": "batch=y"}).status_code == 200
        marked = session.delete(f"{url}{cms}/held")
        assert marked.status_code == 200 and marked.json()["metadata"]["deletionTimestamp"]
        released = session.patch(
            f"{url}{cms}/held",
            data=b'{"metadata": {"finalizers": null}}',
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert released.status_code == 200
        assert session.get(f"{url}{cms}/held").status_code == 404
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    with apiserver(data, "--no-controllers") as (_proc, url):
        session = session_for(data)
        for name in ("plain", "batch-1", "batch-2", "held"):
            assert session.get(f"{url}{cms}/{name}").status_code == 404, name
        listed = session.get(url + cms).json()
        assert [item["metadata"]["name"] for item in listed["items"]] == ["kept"]
        # Their names are free again: each can be made anew.
        assert session.post(url + cms, json={"metadata": {"name": "plain"}}).status_code == 201
