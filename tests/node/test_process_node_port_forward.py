"""``pods/portforward`` on the process node, with the official client's checks (its e2e
port-forward tests, raw and HTTP, ported): several ports of one pod at once, what the pod sends
back on each, a port nothing listens on reported on its error channel, the forwarding ending
when the pod's side does; RBAC (``create`` on ``pods/portforward``) and upstream's 400s."""

# ruff: noqa: F811  (the process node's fixtures are imported, then requested by name)

from __future__ import annotations

import contextlib
import pathlib
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import ServerThread
from tests.node.test_process_node import api, node, pods_dir  # noqa: F401  (fixtures)
from tests.node.test_process_node_exec import core  # noqa: F401  (a fixture)
from tests.node.test_process_node_lifecycle import POD_IP, free_port, reserved_port
from tests.node.test_process_node_volumes import apply, pod

kubernetes = pytest.importorskip("kubernetes")
from kubernetes.stream import portforward  # noqa: E402

#: Servers on the pod's address (the first argument), in one process: on the first port each
#: line is answered reversed, the second greets each connection and closes it; HTTP on the
#: third (a stand-in for nginx).
SERVERS = textwrap.dedent("""
    import asyncio, sys, http.server, threading
    address, (echo, greet, web) = sys.argv[1], (int(p) for p in sys.argv[2:5])
    handler = http.server.SimpleHTTPRequestHandler
    threading.Thread(target=http.server.HTTPServer((address, web), handler).serve_forever, daemon=True).start()

    async def reverse(reader, writer):
        while line := await reader.readline():
            writer.write(line.rstrip(b"\\n")[::-1] + b"\\n")
            await writer.drain()
        writer.close()

    async def hello(reader, writer):
        writer.write(b"hello from the pod\\n")
        await writer.drain()
        writer.close()

    async def main():
        await asyncio.start_server(reverse, address, echo)
        await asyncio.start_server(hello, address, greet)
        print("serving", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
""")


@pytest.fixture
def kubectl(node: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(KUBECTLS[-1], node.kubeconfig, tmp_path)


@pytest.fixture
def servers(kubectl: Kubectl, namespace: str) -> Iterator[tuple[int, int, int]]:
    """The pod's three servers' ports, listening on its own address. Each port stays bound on
    the node's address (127.0.0.1), not listening, while the test runs: a connection there is
    refused, and no other process of the suite (a server on port 0) can take it meanwhile."""
    with contextlib.ExitStack() as held:
        ports = tuple(reserved_port(held) for _ in range(3))
        yield started_servers(kubectl, namespace, ports)


def started_servers(kubectl: Kubectl, namespace: str, ports: tuple[int, ...]) -> tuple[int, int, int]:
    spec = pod("servers", namespace, "", restartPolicy="Always", container={
        "command": [sys.executable, "-c", SERVERS, "$(POD_IP)", *map(str, ports)], "env": [POD_IP],
        "readinessProbe": {"tcpSocket": {"port": ports[1]}, "periodSeconds": 1},
    })  # fmt: skip
    apply(kubectl, spec)
    kubectl("wait", "-n", namespace, "--for=condition=Ready", "pod/servers", "--timeout=30s")
    return ports[0], ports[1], ports[2]


def read_line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        data += sock.recv(4096)
    return data


def read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def test_the_official_clients_raw_port_forward(core: Any, namespace: str, servers: tuple[int, int, int]) -> None:
    echo, greet, _ = servers
    with contextlib.ExitStack() as held:
        closed = reserved_port(held)  # nothing listens there, nor can while the test runs
        forward = portforward(core.connect_get_namespaced_pod_portforward, "servers", namespace,
                              ports=f"{echo},{greet},{closed}")  # fmt: skip
        to_echo = forward.socket(echo)
        to_echo.setblocking(True)
        to_echo.sendall(b"forwarded\n")
        assert to_echo.recv(100) == b"dedrawrof\n"
        to_greet = forward.socket(greet)
        to_greet.setblocking(True)
        assert read_line(to_greet) == b"hello from the pod\n"  # no per-port end in v4: the line is all
        to_closed = forward.socket(closed)
        to_closed.setblocking(True)
        assert read_all(to_closed) == b""
        assert forward.error(closed) is not None and f"error forwarding port {closed} to pod" in forward.error(closed)
        to_echo.close()
        forward.close()


def test_the_official_clients_http_port_forward(core: Any, namespace: str, servers: tuple[int, int, int]) -> None:
    web = servers[2]
    forward = portforward(core.connect_get_namespaced_pod_portforward, "servers", namespace, ports=str(web))
    through = forward.socket(web)
    through.setblocking(True)
    through.sendall(b"GET / HTTP/1.0\r\nHost: servers\r\n\r\n")
    answer = read_all(through)
    assert answer.startswith(b"HTTP/1.0 200 OK") and b"Directory listing" in answer
    assert forward.error(web) is None
    forward.close()


def test_port_forward_needs_create_and_names_its_ports(
    api: Any, kubectl: Kubectl, namespace: str, servers: tuple[int, int, int]
) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods/servers/portforward"
    for query, message in {
        "": 'query parameter "ports" is required',
        "?ports=0": 'invalid port "0": must be a number from 1 to 65535',
        "?ports=80,http": 'invalid port "http": must be a number from 1 to 65535',
        f"?ports={servers[0]}": "Upgrade request required",
    }.items():
        answer = api.post(base + query, None)
        assert (answer.status_code, answer.json()["message"]) == (400, message), query
    ns = ["-n", namespace]
    kubectl("create", "role", "look", *ns, "--verb=get", "--resource=pods,pods/portforward")
    kubectl("create", "rolebinding", "look", *ns, "--role=look", f"--serviceaccount={namespace}:default")
    token = kubectl("create", "token", "default", *ns).stdout.strip()
    refused = api.session.post(api.server.url + base + f"?ports={servers[0]}",
                               headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert refused.status_code == 403
    assert 'cannot create resource "pods/portforward"' in refused.json()["message"]


@pytest.mark.parametrize("tunnel", [True, False], ids=["websocket-tunnel", "spdy-upgrade"])
def test_kubectl_port_forward_reaches_the_pod(
    node: ServerThread, namespace: str, servers: tuple[int, int, int], tmp_path: pathlib.Path, tunnel: bool
) -> None:
    """kubectl 1.35 tunnels SPDY in a WebSocket; without it (its feature gate off) it upgrades
    to SPDY itself: both reach the pod's ports, several connections each."""
    echo, _, web = servers
    local_echo, local_web = free_port(), free_port()
    kubectl = Kubectl(KUBECTLS[-1], node.kubeconfig, tmp_path)
    if not tunnel:
        kubectl.env["KUBECTL_PORT_FORWARD_WEBSOCKETS"] = "false"
    forwarding = subprocess.Popen(
        [*kubectl.argv, "port-forward", "-n", namespace, "pod/servers", f"{local_echo}:{echo}", f"{local_web}:{web}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=kubectl.env,
    )  # fmt: skip
    try:
        assert forwarding.stdout is not None
        said = ""  # kubectl says "Forwarding from <address>:<port> -> <port>" once it listens
        while not said.startswith(f"Forwarding from 127.0.0.1:{local_web} "):
            said = forwarding.stdout.readline()
            assert said, "kubectl port-forward ended"
        for attempt in range(3):  # a connection per request, over one session
            with socket.create_connection(("127.0.0.1", local_echo)) as to_echo:
                to_echo.sendall(f"round {attempt}\n".encode())
                assert read_line(to_echo) == f"{attempt} dnuor\n".encode()
        with socket.create_connection(("127.0.0.1", local_web)) as to_web:
            to_web.sendall(b"GET / HTTP/1.0\r\nHost: servers\r\n\r\n")
            assert read_all(to_web).startswith(b"HTTP/1.0 200 OK")
    finally:
        forwarding.terminate()
        forwarding.wait(30)


def test_a_pod_ip_written_elsewhere_does_not_aim_the_port_forward(
    core: Any, api: Any, namespace: str, servers: tuple[int, int, int]
) -> None:
    """Port-forwards dial the pod's own loopback address: a status.podIP rewritten to another
    host (by whoever may write pods/status) is not followed."""
    echo = servers[0]
    with socket.socket() as elsewhere:  # where a rewritten podIP would lead
        elsewhere.bind(("127.0.0.77", echo))
        elsewhere.listen()
        elsewhere.setblocking(False)
        patch = {"status": {"podIP": "127.0.0.77", "podIPs": [{"ip": "127.0.0.77"}]}}
        answer = api.patch(f"/api/v1/namespaces/{namespace}/pods/servers/status", patch, "application/merge-patch+json")
        assert answer.status_code == 200, answer.text
        forward = portforward(core.connect_get_namespaced_pod_portforward, "servers", namespace, ports=str(echo))
        to_echo = forward.socket(echo)
        to_echo.setblocking(True)
        assert read_all(to_echo) == b""  # the node's own address: the pod's servers are not there
        assert f"error forwarding port {echo} to pod" in (forward.error(echo) or "")
        with pytest.raises(BlockingIOError):
            elsewhere.accept()  # and nothing came here
        forward.close()
