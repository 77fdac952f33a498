"""Slow, silent and vanishing clients: header, idle, request and write timeouts close them, and
the server keeps serving everyone else (upstream: 32 s to send headers, 90 s idle keep-alive,
60 s per request; here shortened so the tests run fast)."""

from __future__ import annotations

import asyncio
import logging
import pathlib
import socket
import sqlite3
import ssl
import time
from collections.abc import Callable, Iterator

import pytest
from aiohttp import web

from kubeloop.apiserver.http import http1
from kubeloop.apiserver.http.connections import ConnectionTimeouts, ConnectionWatchdog, ServerConnection
from tests.conftest import Client, ServerThread, start_server

TIMEOUTS = ConnectionTimeouts(header=0.6, idle=1.0, request=1.0, write=1.0)


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    running = start_server(timeouts=TIMEOUTS)
    try:
        yield running
    finally:
        running.stop()


def connect(server: ServerThread, *, tls: bool = True, rcvbuf: int | None = None) -> socket.socket:
    host, port = server.url.split("://", 1)[1].rsplit(":", 1)
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    raw.connect((host, int(port)))
    if not tls:
        return raw
    context = ssl.create_default_context(cafile=server.ca_file)
    return context.wrap_socket(raw, server_hostname=host)


def closed_within(sock: socket.socket, seconds: float) -> float:
    """Seconds until the server closed the connection (reading whatever it sent first)."""
    started = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
    except (ConnectionResetError, ssl.SSLError, BrokenPipeError):
        pass
    except TimeoutError:
        raise AssertionError(f"the server kept the connection open for {seconds}s") from None
    return time.monotonic() - started


def poll_until(check: Callable[[], bool], failure: str, guard: float = 30.0) -> None:
    """Wait for ``check`` to hold; ``guard`` only bounds a test that would otherwise hang."""
    deadline = time.monotonic() + guard
    while not check():
        assert time.monotonic() < deadline, failure
        time.sleep(0.01)


def request_head(server: ServerThread, method: str, path: str, *extra: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: kubeloop", f"Authorization: Bearer {server.token}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def create_head(server: ServerThread, length: int) -> bytes:
    """The head of a ConfigMap create whose body will be ``length`` bytes."""
    return request_head(
        server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "Content-Type: application/json",
        f"Content-Length: {length}",
    )


def test_slowloris_headers_are_cut_off(server: ServerThread) -> None:
    sock = connect(server)
    sock.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n")
    started = time.monotonic()
    cut_off = False
    try:
        while time.monotonic() - started < 30:  # a guard: the server is to end this, not the client
            sock.sendall(b"X-Slow: y\r\n")  # a header line now and then, never the blank line
            time.sleep(0.1)
    except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
        cut_off = True
    assert cut_off, "the server kept reading a head that never ended"
    assert Client(server).get("/version").status_code == 200


def test_silent_connections_are_closed(server: ServerThread) -> None:
    # closed_within fails if the server keeps them: silent connections are never closed otherwise.
    closed_within(connect(server), 30)  # TLS done, no request
    closed_within(connect(server, tls=False), 30)  # not even a TLS handshake


def test_idle_keep_alive_connections_are_closed(server: ServerThread) -> None:
    sock = connect(server)
    sock.sendall(request_head(server, "GET", "/version"))
    sock.settimeout(5)
    assert sock.recv(65536).startswith(b"HTTP/1.1 200")
    assert closed_within(sock, 30) > 0.5  # closed, and not before the idle timeout


def test_a_slow_body_gets_a_timeout(server: ServerThread) -> None:
    sock = connect(server)
    sock.sendall(create_head(server, 1000) + b'{"apiVersion": "v1",')
    sock.settimeout(5)
    answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 504"), answer[:200]
    assert b'"reason":"Timeout"' in answer
    assert Client(server).get("/api/v1/namespaces/default/configmaps").status_code == 200


def test_a_request_that_outlasts_the_bound_gets_a_timeout_and_the_server_goes_on(
    tmp_path: pathlib.Path,
) -> None:
    """A small create whose write waits on a database another process holds: 504 at the request
    bound (1 s here; the sweep cuts it within a quarter of that), the connection closes, and the
    next requests are served once the lock is gone."""
    durable = start_server(tmp_path / "data", timeouts=TIMEOUTS)
    holder = sqlite3.connect(tmp_path / "data" / "state.db", isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        body = b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}}'
        sock = connect(durable)
        started = time.monotonic()
        sock.sendall(create_head(durable, len(body)) + body)
        sock.settimeout(5)
        answer = sock.recv(65536)
        took = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 504"), answer[:200]
        assert b"Connection: close" in answer
        assert b"request did not complete within the allotted timeout of 1s" in answer
        assert took >= 0.9, took  # at the request bound, not before it
        closed_within(sock, 2)
        holder.execute("ROLLBACK")
        api = Client(durable)
        created = api.post(
            "/api/v1/namespaces/default/configmaps",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "on-time"}},
        )
        assert created.status_code == 201, created.text
    finally:
        holder.close()
        durable.stop()


def test_a_watcher_that_reads_nothing_is_dropped(server: ServerThread) -> None:
    api = Client(server)
    namespace = "stalled-watch"
    api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    store = server.server.store
    assert store is not None

    def ours() -> list[object]:
        # This watch's own watcher: the server's controllers add and drop watchers of their own
        # meanwhile (a fresh server is still starting them), so a count would not tell.
        return [w for w in list(store._watchers) if f"/{namespace}/" in w.prefix and "configmaps" in w.prefix]

    sock = connect(server, rcvbuf=4096)
    sock.sendall(request_head(server, "GET", f"/api/v1/namespaces/{namespace}/configmaps?watch=1"))
    poll_until(lambda: len(ours()) == 1, "the watch never started")
    value = "x" * 400_000
    for i in range(40):  # 16 MB of events the client never reads
        created = api.post(
            f"/api/v1/namespaces/{namespace}/configmaps",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"big{i}"}, "data": {"v": value}},
        )
        assert created.status_code == 201
    poll_until(lambda: not ours(), "the stalled watcher was never dropped")
    # A new connection: the server closes keep-alive connections idle for a second here, and the
    # one the creates used may be closed just as a request on it goes out.
    assert Client(server).get("/version").status_code == 200
    sock.close()


def test_a_client_that_vanishes_mid_body_is_not_a_server_error(
    server: ServerThread, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kubeloop")
    watchdog = server.server._watchdog
    assert watchdog is not None
    sock = connect(server)
    sock.sendall(create_head(server, 100_000) + b"{" + b" " * 20000)
    # The server is in the request, reading its body, when the client goes.
    poll_until(
        lambda: any(c.active_requests for c in list(watchdog.connections.values())), "no request began"
    )
    sock.close()

    def disconnected() -> bool:
        return any("disconnected" in record.getMessage() for record in caplog.records)

    poll_until(disconnected, "the server never noticed the client had gone")
    assert Client(server).get("/version").status_code == 200
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("kubeloop")]
    assert not errors, [r.getMessage() for r in errors]


@pytest.fixture(scope="module")
def plain_server() -> Iterator[ServerThread]:
    """Plain HTTP: the send buffer's flow control reaches the server's protocol directly."""
    running = start_server(timeouts=TIMEOUTS, insecure_http=True)
    try:
        yield running
    finally:
        running.stop()


def test_a_large_answer_to_a_slow_but_reading_client_is_not_cut_off(plain_server: ServerThread) -> None:
    import concurrent.futures

    server = plain_server
    api = Client(server)
    namespace = "slow-reader"
    api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    value = "y" * 10_000

    def create(i: int) -> None:
        api.post(
            f"/api/v1/namespaces/{namespace}/configmaps",
            {"metadata": {"name": f"c{i}"}, "data": {"v": value}},
        )

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(700)))  # a ~7 MB list: more than loopback's socket buffers
    sock = connect(server, tls=False, rcvbuf=16384)
    sock.sendall(request_head(server, "GET", f"/api/v1/namespaces/{namespace}/configmaps"))
    sock.settimeout(10)
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(16384)
    head, _, body = received.partition(b"\r\n\r\n")
    length = int(
        next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")).split(b":")[
            1
        ]
    )
    slow_until = time.monotonic() + 2.5 * TIMEOUTS.idle  # slow for longer than the idle and write timeouts
    while len(body) < length:
        chunk = sock.recv(16384 if time.monotonic() < slow_until else 1 << 20)
        assert chunk, f"cut off after {len(body)} of {length} bytes"
        body += chunk
        if time.monotonic() < slow_until:
            time.sleep(0.1)  # ~160 KB/s
    assert len(body) == length
    sock.close()


class _SocketTransport(asyncio.Transport):
    """A connection's transport over one end of a real socket pair: the watchdog asks the
    kernel what waits on it."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.closed = False

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: object = None) -> object:
        return self.sock if name == "socket" else default

    def get_write_buffer_size(self) -> int:
        return 0


def _served_connection() -> tuple[ServerConnection, socket.socket, socket.socket]:
    """A connection that has answered one request and gone idle, and the client's end."""

    async def never(request: http1.BufferedRequest) -> web.StreamResponse:
        raise AssertionError("nothing is answered here")

    ours, theirs = socket.socketpair()
    connection = ServerConnection(asyncio.Protocol, never, ConnectionWatchdog(TIMEOUTS))
    connection.connection_made(_SocketTransport(ours))
    connection.request_started()
    connection.request_finished()
    return connection, ours, theirs


def test_a_request_the_loop_has_not_read_yet_is_not_idleness() -> None:
    """The sweep can run before the loop reads a request that came in time: closing then would
    reset the connection under the client's request (what a busy CI machine hit)."""
    connection, ours, theirs = _served_connection()
    later = connection.idle_since + TIMEOUTS.idle + 0.5
    assert connection.overdue(TIMEOUTS, later) == "idle for 1s"
    theirs.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
    assert connection.overdue(TIMEOUTS, later) is None
    ours.recv(65536)  # read: idle again
    assert connection.overdue(TIMEOUTS, later) == "idle for 1s"
    ours.close()
    theirs.close()


def test_a_heads_bound_counts_from_its_first_byte() -> None:
    """Upstream's ReadHeaderTimeout starts when the next request's first bytes come, not when
    the last answer went: a request sent after a quiet spell is not cut off at once."""
    connection, ours, theirs = _served_connection()
    quiet = TIMEOUTS.header + 0.2  # idle longer than the head's bound, shorter than the idle one
    connection.idle_since -= quiet
    connection.data_received(b"GET /version HTTP/1.1\r\nHost: x\r\n")  # the head, in part
    now = time.monotonic()
    assert connection.overdue(TIMEOUTS, now) is None
    assert connection.overdue(TIMEOUTS, now + TIMEOUTS.header + 0.1) == "no complete request head within 0.6s"
    ours.close()
    theirs.close()
