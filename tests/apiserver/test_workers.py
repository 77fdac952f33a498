"""``kubeloop apiserver --workers 2``: two processes serve one port (the owner of the store and a
front-end over it); the kernel spreads connections over both, clients see one cluster through
any connection, and a front-end that dies is replaced while the owner serves on."""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator

import orjson
import pytest
import requests

from tests.apiserver.storage.test_durability import (
    apiserver,
    established,
    front_ends,
    session_for,
    socket_inodes,
)
from tests.kubectl_finder import newest_kubectl


def exited(pid: int) -> bool:
    """Whether process ``pid`` has ended (gone, or a zombie: its sockets are closed)."""
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before, or while, it was read
        return True


def unix_socket_names(pid: int) -> list[str]:
    """The names of the Unix sockets process ``pid`` holds (a path, or @name in the abstract
    namespace); sockets of a socket pair have none."""
    inodes = socket_inodes(pid)
    names = []
    for line in pathlib.Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[6] in inodes and len(fields) > 7:
            names.append(fields[7])
    return names


def listening(port: int) -> set[str]:
    """The inodes of the sockets listening on ``port`` (whoever holds them)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in pathlib.Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                inodes.add(fields[9])
    return inodes


def open_connections(url: str, ca: pathlib.Path, count: int) -> Iterator[ssl.SSLSocket]:
    host, port = url.removeprefix("https://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(ca))
    for _ in range(count):
        raw = socket.create_connection((host, int(port)))
        yield context.wrap_socket(raw, server_hostname=host)


@pytest.fixture
def two_processes(tmp_path: pathlib.Path) -> Iterator[tuple[subprocess.Popen[str], str, requests.Session]]:
    with apiserver(tmp_path, "--workers", "2", "--no-controllers") as (proc, url):
        yield proc, url, session_for(tmp_path)


def test_connections_are_spread_over_both_and_each_sees_every_acknowledged_write(
    two_processes: tuple[subprocess.Popen[str], str, requests.Session], tmp_path: pathlib.Path
) -> None:
    """Raw connections, then kubectl (each call a new connection)."""
    proc, url, session = two_processes
    [front_end] = front_ends(proc.pid)
    port = int(url.rsplit(":", 1)[1])
    held = list(open_connections(url, tmp_path / "pki" / "ca.crt", 40))
    try:
        # Forty connections, each accepted by one process or the other (by the kernel's hash
        # of its addresses: all on one would be a chance of one in 2^39). Only these forty are
        # counted: the fixture's own session may hold a connection too.
        ours = {connection.getsockname()[1] for connection in held}
        spread = {pid: established(pid, port, ours) for pid in (proc.pid, front_end)}
        assert sum(spread.values()) == 40 and all(spread.values()), spread
        token = session.headers["Authorization"]
        base = "/api/v1/namespaces/default/configmaps"
        for number, (writer, reader) in enumerate(zip(held[::2], held[1::2], strict=True)):
            body = orjson.dumps({"metadata": {"name": f"spread-{number}"}, "data": {"n": str(number)}})
            created = exchange(writer, "POST", base, token, body)
            assert created[0] == 201, created
            read = exchange(reader, "GET", f"{base}/spread-{number}", token)
            assert read[0] == 200 and orjson.loads(read[1])["data"] == {"n": str(number)}, read
    finally:
        for connection in held:
            connection.close()
    kubectl = [str(newest_kubectl()), "--kubeconfig", str(tmp_path / "kubeconfig")]
    for number in range(10):
        subprocess.run([*kubectl, "create", "configmap", f"k-{number}", f"--from-literal=n={number}"], check=True, capture_output=True)
        shown = subprocess.run([*kubectl, "get", "configmap", f"k-{number}", "-o", "jsonpath={.data.n}"], check=True, capture_output=True, text=True)
        assert shown.stdout == str(number)


def exchange(connection: ssl.SSLSocket, method: str, path: str, token: str | bytes, body: bytes = b"") -> tuple[int, bytes]:
    """One HTTP/1.1 request on an open connection, and its answer (a Content-Length body)."""
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: kubeloop\r\nAuthorization: {token!s}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    connection.sendall(head.encode() + body)
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += connection.recv(65536)
    header, _, rest = answer.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in header.split(b"\r\n") if line.lower().startswith(b"content-length:")))
    while len(rest) < length:
        rest += connection.recv(65536)
    return int(header.split(b" ")[1]), rest[:length]


def test_a_killed_front_end_is_replaced_and_the_owner_serves_meanwhile(
    two_processes: tuple[subprocess.Popen[str], str, requests.Session],
) -> None:
    proc, url, session = two_processes
    [front_end] = front_ends(proc.pid)
    port = int(url.rsplit(":", 1)[1])
    its_listener = listening(port) & socket_inodes(front_end)
    assert its_listener
    os.kill(front_end, signal.SIGKILL)
    # Connections the kernel had queued for its listener are reset with it (as an apiserver's
    # behind a load balancer are): new ones go to the owner once its listener is closed. That
    # can be a moment after the process has gone: its io_uring (uvloop's) holds the socket
    # until the kernel has torn the ring down.
    while listening(port) & its_listener:
        time.sleep(0.01)
    base = url + "/api/v1/namespaces/default/configmaps"
    for number in range(20):  # new connections: the kernel sends them to a listener still there
        fresh = requests.Session()
        fresh.headers.update(session.headers)
        fresh.verify = session.verify
        fresh.trust_env = False
        created = fresh.post(base, json={"metadata": {"name": f"meanwhile-{number}"}})
        assert created.status_code == 201, created.text
    replaced: list[int] = []
    while not replaced:  # the owner starts another (after a second's pause)
        replaced = [pid for pid in front_ends(proc.pid) if pid != front_end]
        time.sleep(0.1)
    listed = session.get(base).json()
    assert {f"meanwhile-{n}" for n in range(20)} <= {item["metadata"]["name"] for item in listed["items"]}


def test_the_owner_stops_its_front_ends_and_a_front_end_leaves_when_the_owner_dies(tmp_path: pathlib.Path) -> None:
    with apiserver(tmp_path, "--workers", "3", "--no-controllers") as (proc, _url):
        children = front_ends(proc.pid)
        assert len(children) == 2
        # The store is reached over socket pairs: no socket by a name another process could
        # connect to, and nothing in the file system that a SIGKILL would leave behind.
        assert [unix_socket_names(pid) for pid in (proc.pid, *children)] == [[], [], []]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert not [pid for pid in children if pathlib.Path(f"/proc/{pid}").exists()]
    with apiserver(tmp_path, "--workers", "2", "--no-controllers") as (proc, _url):
        [orphan] = front_ends(proc.pid)
        proc.kill()
        proc.wait(10)
        # Its store gone, the front-end has nothing current to serve: it exits by itself.
        while not exited(orphan):
            time.sleep(0.05)


def test_a_front_end_is_told_to_stop_when_its_owner_dies(tmp_path: pathlib.Path) -> None:
    """The backstop beside the store connection's end (die_with_parent, Linux's PDEATHSIG): a
    process that called it gets SIGTERM once the process that started it is gone."""
    pid_file = tmp_path / "child"
    (tmp_path / "child.py").write_text(
        "import os, sys, time\n"
        "from kubeloop.apiserver.frontends import die_with_parent\n"
        "die_with_parent()\n"
        "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
        "time.sleep(300)\n"
    )
    (tmp_path / "parent.py").write_text(
        "import os, subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, sys.argv[1], sys.argv[2]])\n"
        "while not os.path.exists(sys.argv[2]) or not open(sys.argv[2]).read():\n"
        "    time.sleep(0.01)\n"
    )
    subprocess.run(
        [sys.executable, str(tmp_path / "parent.py"), str(tmp_path / "child.py"), str(pid_file)], check=True, timeout=60
    )
    orphan = int(pid_file.read_text())
    while not exited(orphan):  # without the backstop it would sleep its five minutes
        time.sleep(0.05)


SIGNAL_AS_THE_LOOP_CLOSES = """
import asyncio, os, signal, sys
from kubeloop.apiserver.frontends import stop_taking_signals

async def main() -> None:
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stopped.set)
    closing = loop._close_self_pipe  # the window: the wakeup pipe closed, the handlers not yet removed

    def close_self_pipe() -> None:
        closing()
        os.kill(os.getpid(), signal.SIGTERM)  # the kernel's SIGTERM of an owner's death, landing there

    loop._close_self_pipe = close_self_pipe
    if sys.argv[1] == "stop":
        stop_taking_signals(loop)

asyncio.run(main())
print("exited cleanly", flush=True)
"""


@pytest.mark.parametrize("stop", [True, False], ids=["stops-taking-signals", "as-asyncio-leaves-it"])
def test_a_signal_while_a_front_ends_loop_closes_is_no_traceback(stop: bool) -> None:
    """A front-end whose owner died stops for its store connection's end and gets the kernel's
    SIGTERM just after: one landing while asyncio's loop closes (its wakeup pipe closed before its
    handlers are removed) printed a BrokenPipeError traceback. ``serve`` stops taking signals
    before its loop closes, SIGTERM's default action back; without that, the same signal is the
    traceback (the second case)."""
    done = subprocess.run(
        [sys.executable, "-c", SIGNAL_AS_THE_LOOP_CLOSES, "stop" if stop else "leave"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if stop:  # SIGTERM's own action: the process ends, without a word
        assert (done.returncode, done.stdout, done.stderr) == (-signal.SIGTERM, "", "")
    else:
        assert "Exception ignored when trying to write to the signal wakeup fd" in done.stderr


#: Runs the command after it on the CPUs named by ``KUBELOOP_TEST_CPUS`` (its affinity).
ON_CPUS = (
    sys.executable, "-c",
    "import os, sys; os.sched_setaffinity(0, map(int, os.environ['KUBELOOP_TEST_CPUS'].split(','))); "
    "os.execvp(sys.argv[1], sys.argv[1:])",
)  # fmt: skip


@pytest.mark.parametrize("memory", [False, True], ids=["durable", "memory"])
def test_without_workers_a_process_serves_for_each_core_and_one_in_memory(
    memory: bool, tmp_path: pathlib.Path
) -> None:
    """``kubeloop apiserver`` as users start it: a process for each core it may run on (its CPU
    affinity, two here if the machine has them), and one with ``--memory``."""
    cpus = sorted(os.sched_getaffinity(0))[:2]
    env = {**os.environ, "KUBELOOP_TEST_CPUS": ",".join(map(str, cpus))}
    flags = ("--memory",) if memory else ()
    with apiserver(tmp_path, "--no-controllers", *flags, wrapper=ON_CPUS, env=env, default_workers=True) as (proc, url):
        assert len(front_ends(proc.pid)) == (0 if memory else len(cpus) - 1)
        assert session_for(tmp_path).get(f"{url}/readyz", timeout=30).text == "ok"
