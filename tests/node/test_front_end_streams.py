"""``kubeloop apiserver --workers 2 --simulate``: the node runs in the process that owns the store,
and a pod's logs, exec, attach and port-forwards asked of the front-end process reach it.

Every request here is made on a connection the front-end accepted (:class:`FrontEndPort`: a
local port whose connections are carried to the server on connections the kernel gave the
front-end), by kubectl 1.27 (SPDY) and the newest (WebSocket), through real TLS."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import yaml

from tests.apiserver.storage.test_durability import apiserver, server_log
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.apiserver.test_workers import front_ends, socket_inodes
from tests.conftest import eventually
from tests.node.test_process_node_lifecycle import POD_IP, free_port
from tests.node.test_process_node_volumes import apply, pod

pytestmark = [pytest.mark.kubectl]


def accepted_by(server_port: int, client_port: int) -> str | None:
    """The socket inode of the server's side of the connection from ``client_port`` (None until
    a process has accepted it)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in pathlib.Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if local_port == server_port and remote_port == client_port and fields[9] != "0":
                return fields[9]
    return None


class FrontEndPort:
    """A local port that carries each connection to the server over one that process ``pid``
    accepted (the kernel spreads new connections over the processes sharing the port: it opens
    them until one lands there), byte for byte: TLS stays end to end."""

    def __init__(self, server_port: int, pid: int, others: list[int]) -> None:
        self.server_port = server_port
        self.pid = pid
        self.others = others
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.carried = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = self._to_front_end()
            self.carried += 1
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()

    def _to_front_end(self) -> socket.socket:
        for _ in range(200):  # each lands on the front-end one time in two
            upstream = socket.create_connection(("127.0.0.1", self.server_port))
            client_port = upstream.getsockname()[1]
            for _ in range(2000):
                inode = accepted_by(self.server_port, client_port)
                holders = [pid for pid in (self.pid, *self.others) if inode in socket_inodes(pid)] if inode else []
                if holders:
                    break
                time.sleep(0.001)
            if holders == [self.pid]:
                return upstream
            upstream.close()
        raise AssertionError("no connection landed on the front-end")

    def kubeconfig(self, original: pathlib.Path, into: pathlib.Path) -> pathlib.Path:
        config = yaml.safe_load(original.read_text())
        config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{self.port}"
        into.write_text(yaml.safe_dump(config))
        return into

    def close(self) -> None:
        self.listener.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


#: A stand-in for nginx in a pod: HTTP on the pod's address.
WEB = textwrap.dedent("""
    import http.server, sys
    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"hello from " + self.path.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
    http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), Hello).serve_forever()
""")


class Cluster:
    def __init__(self, owner: subprocess.Popen[str], front_end: FrontEndPort, data: pathlib.Path) -> None:
        self.owner = owner
        self.front_end = front_end
        self.data = data

    def kubectl(self, binary: pathlib.Path, home: pathlib.Path) -> Kubectl:
        """A kubectl whose every connection the front-end serves."""
        return Kubectl(binary, self.front_end.kubeconfig(self.data / "kubeconfig", home / "kubeconfig"), home)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    data = tmp_path_factory.mktemp("two-processes")
    audit = ("--audit-log-path", str(data / "audit.log"))
    with apiserver(data, "--workers", "2", "--simulate", "--local-image", "busybox=host", *audit) as (proc, url):
        [front_end] = front_ends(proc.pid)
        port = FrontEndPort(int(url.rsplit(":", 1)[1]), front_end, [proc.pid])
        try:
            yield Cluster(proc, port, data)
        finally:
            port.close()
            proc.terminate()  # a server that stops stops its pods (a killed one leaves them running)
            proc.wait(60)
        assert "Traceback" not in server_log(proc), server_log(proc)


@pytest.fixture
def newest(cluster: Cluster, tmp_path: pathlib.Path) -> Kubectl:
    return cluster.kubectl(KUBECTLS[-1], tmp_path)


@pytest.fixture
def oldest(cluster: Cluster, tmp_path: pathlib.Path) -> Kubectl:
    """kubectl 1.27: exec, attach and port-forward over an upgrade to SPDY."""
    return cluster.kubectl(KUBECTLS[0], tmp_path)


def running(kubectl: Kubectl, name: str, namespace: str, script: str, **spec: Any) -> None:
    apply(kubectl, pod(name, namespace, script, restartPolicy="Always", **spec))
    kubectl("wait", "-n", namespace, "--for=condition=Ready", f"pod/{name}", "--timeout=60s")


def test_logs_and_a_followed_log_come_from_the_owners_node(newest: Kubectl, oldest: Kubectl, cluster: Cluster) -> None:
    newest("create", "namespace", "logs")
    apply(newest, pod("ticker", "logs", "for i in 1 2 3; do echo tick $i; sleep 0.2; done"))
    carried = cluster.front_end.carried
    followed = newest("logs", "-n", "logs", "-f", "ticker").stdout  # from before it ran to its end
    assert followed == "tick 1\ntick 2\ntick 3\n"
    for kubectl in (newest, oldest):
        assert kubectl("logs", "-n", "logs", "ticker", "--tail=1").stdout == "tick 3\n"
    missing = newest("logs", "-n", "logs", "nothing", check=False)
    assert missing.returncode == 1 and 'pods "nothing" not found' in missing.stderr
    assert cluster.front_end.carried > carried


def test_exec_over_websocket_and_spdy_with_input_and_exit_codes(
    newest: Kubectl, oldest: Kubectl, cluster: Cluster
) -> None:
    newest("create", "namespace", "execs")
    running(newest, "shell", "execs", "exec sleep 600")
    for kubectl in (newest, oldest):
        echoed = kubectl("exec", "-n", "execs", "-i", "shell", "--", "sh", "-c", "read line; echo got $line; echo err >&2",
                         stdin="typed\n")  # fmt: skip
        assert (echoed.stdout, echoed.stderr) == ("got typed\n", "err\n")
        failed = kubectl("exec", "-n", "execs", "shell", "--", "sh", "-c", "exit 3", check=False)
        assert failed.returncode == 3, failed.stderr
    # Audited once each, by the front-end that was asked: the node's server records none. The
    # audit log is written in batches, after the answer (as upstream's batching backend): the
    # last exec's line may land after kubectl has exited.

    def execs() -> list[Any]:
        events = [orjson.loads(line) for line in (cluster.data / "audit.log").read_bytes().splitlines()]
        return [e for e in events if "/pods/shell/exec" in e["requestURI"] and e["stage"] == "ResponseComplete"]

    asyncio.run(eventually(lambda: len(execs()) >= 4))
    audited = execs()
    assert len(audited) == 4 and len({e["auditID"] for e in audited}) == 4, audited


def test_attach_feeds_and_reads_the_running_container(newest: Kubectl) -> None:
    """(Once: after the upgrade the relay carries bytes whatever the protocol, as exec shows for both.)"""
    newest("create", "namespace", "attach")
    script = "echo before; while read line; do echo got $line; done; echo after"
    apply(newest, pod("reader", "attach", script, container={"stdin": True, "stdinOnce": True}))
    while not newest("logs", "-n", "attach", "reader", check=False).stdout:  # it has started
        time.sleep(0.05)
    attached = newest("attach", "-n", "attach", "-i", "reader", stdin="one\ntwo\n")
    assert attached.stdout == "got one\ngot two\nafter\n", attached.stderr


def test_port_forward_reaches_the_pod_over_spdy_and_websocket(newest: Kubectl, oldest: Kubectl) -> None:
    newest("create", "namespace", "forward")
    port = free_port()
    container = {"command": [sys.executable, "-c", WEB, "$(POD_IP)", str(port)], "env": [POD_IP],
                 "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1}}  # fmt: skip
    running(newest, "web", "forward", "", container=container)
    for kubectl in (newest, oldest):  # a SPDY session tunneled in a WebSocket; an upgrade to SPDY
        local = free_port()
        forwarding = kubectl.start("port-forward", "-n", "forward", "pod/web", f"{local}:{port}")
        try:
            assert forwarding.stdout is not None
            assert "Forwarding from" in forwarding.stdout.readline()
            for path in ("/one", "/two"):
                with socket.create_connection(("127.0.0.1", local)) as web:
                    web.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
                    answer = b""
                    while chunk := web.recv(65536):
                        answer += chunk
                assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(f"hello from {path}".encode()), answer
        finally:
            forwarding.terminate()
            forwarding.wait(10)
