"""The server's own HTTP/1.1 for small requests (``apiserver/http/http1.py``): which requests it
reads, how it frames answers, and a connection that goes on through aiohttp once a request it
does not read comes (a watch, a large body, a malformed head)."""

from __future__ import annotations

import asyncio
import json
import logging
import pathlib
import socket
import time
from collections.abc import Iterator

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from kubeloop.apiserver import kubeconfig
from kubeloop.apiserver.http import aiohttpserving, http1
from kubeloop.apiserver.http.connections import (
    ANSWER_SLICE_BYTES,
    ConnectionTimeouts,
    ConnectionWatchdog,
    ServerConnection,
)
from tests.apiserver.http.test_slow_clients import closed_within, connect, request_head
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import Client, ServerThread, start_server

HEAD = (
    b"PATCH /apis/example.com/v1/namespaces/ns/widgets/w1/status?fieldManager=me&dryRun=All HTTP/1.1\r\n"
    b"Host: 127.0.0.1:6443\r\n"
    b"Authorization: Bearer abc\r\n"
    b"Content-Type: application/merge-patch+json\r\n"
    b"X-Spaced:   padded value \t\r\n"
    b"Content-Length: 2\r\n"
    b"\r\n"
)


def test_a_small_request_head_is_read() -> None:
    head = http1.read_head(HEAD + b"{}")
    assert head is not None
    assert (head.method, head.path, head.query_string) == (
        "PATCH",
        "/apis/example.com/v1/namespaces/ns/widgets/w1/status",
        "fieldManager=me&dryRun=All",
    )
    assert head.headers["content-type"] == "application/merge-patch+json"
    assert head.headers["X-Spaced"] == "padded value"
    assert (head.content_length, head.keep_alive, head.size) == (2, True, len(HEAD))
    request = http1.BufferedRequest(head, b"{}", None)
    assert request.query.getall("dryRun") == ["All"]
    assert request.content_type == "application/merge-patch+json"


def test_an_incomplete_head_waits_for_more() -> None:
    assert http1.read_head(HEAD[:-2]) is None
    assert http1.read_head(b"") is None


def test_connection_close_and_defaults() -> None:
    head = http1.read_head(b"GET /api HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n")
    assert head is not None and not head.keep_alive and head.content_length == 0
    request = http1.BufferedRequest(head, b"", None)
    assert request.content_type == "application/octet-stream"  # aiohttp's word for "none given"
    assert not request.can_read_body


@pytest.mark.parametrize(
    "raw",
    [
        b"GET /api/v1/namespaces/a/pods?watch=true HTTP/1.1\r\n\r\n",
        b"GET /api/v1/namespaces/a/pods?labelSelector=x&watch=1 HTTP/1.1\r\n\r\n",
        b"GET /api/v1/watch/namespaces/a/pods HTTP/1.1\r\n\r\n",
        b"GET /api/v1/namespaces/a/pods?wat%63h=true HTTP/1.1\r\n\r\n",  # an escaped name too
        b"POST /api/v1/namespaces/a/pods HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST /api/v1/namespaces/a/pods HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
        b"GET /api HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n",
        b"GET /api HTTP/1.0\r\n\r\n",
        b"HEAD /api HTTP/1.1\r\n\r\n",
        b"OPTIONS /api HTTP/1.1\r\n\r\n",
        b"GET /version HTTP/1.1\r\n\r\n",
        b"GET /openapi/v3 HTTP/1.1\r\n\r\n",
        b"GET /apisx HTTP/1.1\r\n\r\n",
        b"GET /api/v1/namespaces/a%2Fb HTTP/1.1\r\n\r\n",
        b"GET /api/v1/../v1/namespaces HTTP/1.1\r\n\r\n",
        b"GET /api/v1/./namespaces HTTP/1.1\r\n\r\n",
        b"GET /api//v1 HTTP/1.1\r\n\r\n",
        b"GET http://host/api HTTP/1.1\r\n\r\n",
        b"GET /api HTTP/1.1 \r\n\r\n",
        b"POST /api/v1/namespaces HTTP/1.1\r\nContent-Length: 65536\r\n\r\n",
        b"POST /api/v1/namespaces HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n",
        b"POST /api/v1/namespaces HTTP/1.1\r\nContent-Length: +2\r\n\r\n",
        b"POST /api/v1/namespaces HTTP/1.1\r\nContent-Length: \xd9\xa2\r\n\r\n",  # an Arabic-Indic 2
        b"GET /api HTTP/1.1\r\nX-A: b\x00c\r\n\r\n",
        b"GET /api HTTP/1.1\r\nX-A: b\nX-B: c\r\n\r\n",
        b"GET /api HTTP/1.1\r\nX-A: b\rc\r\n\r\n",
        b"GET /api HTTP/1.1\r\nX-A: b\r\n folded\r\n\r\n",
        b"GET /api HTTP/1.1\r\nX-A : b\r\n\r\n",
        b"GET /api HTTP/1.1\r\nno colon\r\n\r\n",
        b"GET /api HTTP/1.1\r\nHost: a\r\nHost\r\n\r\n",  # a name read before, without its colon now
    ],
)
def test_what_is_left_to_aiohttp(raw: bytes) -> None:
    with pytest.raises(http1.NotForUs):
        http1.read_head(raw)


def test_a_head_is_read_up_to_kube_apiservers_bound() -> None:
    start = b"GET /api HTTP/1.1\r\nX-A: "
    largest = start + b"b" * (http1.MAX_HEAD_BYTES - len(start) - 4) + b"\r\n\r\n"
    assert len(largest) == http1.MAX_HEAD_BYTES
    head = http1.read_head(largest + b"GET /api")
    assert head is not None and head.size == http1.MAX_HEAD_BYTES
    assert len(head.headers["X-A"]) == http1.MAX_HEAD_BYTES - len(start) - 4
    assert http1.read_head(largest[:-1]) is None  # not whole yet, and within the bound
    past = start + b"b" + largest[len(start) :]
    with pytest.raises(http1.HeadTooLarge):
        http1.read_head(past)
    with pytest.raises(http1.HeadTooLarge):  # not whole, and already at the bound
        http1.read_head(past[: http1.MAX_HEAD_BYTES])


def test_the_field_names_remembered_stay_bounded() -> None:
    for index in range(2 * http1._NAMES_SEEN_MAX):
        assert http1.read_head(f"GET /api HTTP/1.1\r\nX-Made-Up-{index}: v\r\n\r\n".encode()) is not None
    assert len(http1._NAMES_SEEN) <= http1._NAMES_SEEN_MAX


_token = st.text(
    alphabet="!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", min_size=1
)
_value = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40).map(str.strip)
_reserved = {"transfer-encoding", "expect", "upgrade", "content-length", "connection"}


@given(
    st.lists(st.tuples(_token, _value), max_size=12).filter(
        lambda fields: not {n.lower() for n, _ in fields} & _reserved
    )
)
def test_header_fields_are_read_as_sent(fields: list[tuple[str, str]]) -> None:
    raw = "GET /api/v1 HTTP/1.1\r\n" + "".join(f"{name}:  {value} \r\n" for name, value in fields) + "\r\n"
    head = http1.read_head(raw.encode())
    assert head is not None
    assert list(head.headers.items()) == fields


_request_line = st.sampled_from(
    [
        "GET /api/v1 HTTP/1.1",
        "POST /apis/example.com/v1/namespaces/a/widgets?fieldManager=me HTTP/1.1",
        "GET /api/v1/pods?watch=1 HTTP/1.1",
        "GET /api/v1/watch/pods HTTP/1.1",
        "GET /api/\x00v1 HTTP/1.1",
        "GET /api/v1\nX: y HTTP/1.1",
        "HEAD /api HTTP/1.1",
    ]
)
_field = st.one_of(
    st.tuples(_token, _value),
    st.sampled_from(
        [
            ("Content-Length", "2"),
            ("Content-Length", "+2"),
            ("Content-Length", str(http1.SMALL_BODY_BYTES)),
            ("Connection", "close"),
            ("Connection", "Upgrade"),
            ("Transfer-Encoding", "chunked"),
            ("X-A", "b\x00c"),
            ("X-A", "b\rc"),
        ]
    ),
)


def _read(raw: bytes) -> object:
    try:
        head = http1.read_head(raw)
    except http1.NotForUs:
        return "refused"
    assert head is not None
    return (head.method, head.path, head.query_string, list(head.headers.items()), head.content_length, head.keep_alive, head.size)


@given(_request_line, st.lists(_field, max_size=8), _request_line)
def test_a_header_block_read_before_is_read_alike(line: str, fields: list[tuple[str, str]], other: str) -> None:
    """Header blocks are remembered once read (clients send the same ones): a head whose block
    was read before is read as from scratch, whatever its request line."""
    block = "".join(f"{name}: {value}\r\n" for name, value in fields) + "\r\n"
    raw, again = (line + "\r\n" + block).encode(), (other + "\r\n" + block).encode()
    http1._HEADS_READ.clear()
    fresh, fresh_again = _read(raw), (http1._HEADS_READ.clear(), _read(again))[1]
    http1._HEADS_READ.clear()
    assert _read(raw) == fresh
    assert _read(raw) == fresh  # the block remembered now (unless refused)
    assert _read(again) == fresh_again  # another request line over the same block


_query_part = st.sampled_from(
    ["watch=1", "wat%63h=true", "watch", "watch=", "includeObject=None", "include%4Fbject=Object", "x=watch",
     "a=%25", "fieldManager=me", "watch=0&watch=1"]
)


@given(st.lists(_query_part, max_size=4), st.sampled_from(["watch", "includeObject", "fieldManager"]))
def test_a_query_value_is_the_parsed_querys(parts: list[str], name: str) -> None:
    """``query_value`` skips parsing only a query that cannot hold the parameter, escaped or not."""
    query = "&".join(parts)
    raw = f"GET /api/v1/pods{'?' + query if query else ''} HTTP/1.1\r\n\r\n".encode()
    try:
        head = http1.read_head(raw)
    except http1.NotForUs:
        return  # a watch: aiohttp's
    assert head is not None
    request = http1.BufferedRequest(head, b"", None)
    assert http1.query_value(request, name, "default") == request.query.get(name, "default")


def test_the_header_blocks_remembered_stay_bounded() -> None:
    http1._HEADS_READ.clear()
    for index in range(2 * http1._HEADS_READ_MAX + 1):
        assert http1.read_head(f"GET /api HTTP/1.1\r\nX-Index: {index}\r\n\r\n".encode()) is not None
    assert 0 < len(http1._HEADS_READ) <= http1._HEADS_READ_MAX
    http1._HEADS_READ.clear()
    long_value = "v" * http1._HEAD_READ_MAX_BYTES
    assert http1.read_head(f"GET /api HTTP/1.1\r\nX-Long: {long_value}\r\n\r\n".encode()) is not None
    assert not http1._HEADS_READ


def test_a_remembered_head_cannot_be_changed_by_a_handler() -> None:
    head = http1.read_head(HEAD + b"{}")
    assert head is not None
    with pytest.raises(TypeError):
        head.headers["Authorization"] = "Bearer other"  # type: ignore[index]
    again = http1.read_head(HEAD + b"{}")
    assert again is not None and again.headers["Authorization"] == "Bearer abc"


@given(st.binary(max_size=300), st.sampled_from([b"GET /api HTTP/1.1\r\n", b""]))
def test_any_bytes_are_read_refused_or_awaited(tail: bytes, start: bytes) -> None:
    try:
        head = http1.read_head(start + tail)
    except http1.NotForUs:
        return
    if head is not None:
        assert head.size <= len(start + tail) and head.method in ("GET", "POST", "PUT", "PATCH", "DELETE")


# ----------------------------------------------------------------------------- over TLS


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    running = start_server(timeouts=ConnectionTimeouts(header=2.0, idle=3.0, request=2.0, write=2.0))
    try:
        yield running
    finally:
        running.stop()


def read_answer(sock: socket.socket, buffer: bytearray) -> tuple[int, dict[str, list[str]], bytes]:
    """One Content-Length answer from ``sock`` (what is read past it stays in ``buffer``)."""
    sock.settimeout(10)
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        buffer += chunk
    end = buffer.index(b"\r\n\r\n")
    lines = bytes(buffer[:end]).decode().split("\r\n")
    headers: dict[str, list[str]] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.lower(), []).append(value.strip())
    length = int(headers["content-length"][0])
    while len(buffer) < end + 4 + length:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection mid-answer"
        buffer += chunk
    body = bytes(buffer[end + 4 : end + 4 + length])
    del buffer[: end + 4 + length]
    return int(lines[0].split(" ")[1]), headers, body


def read_until(sock: socket.socket, buffer: bytearray, marker: bytes) -> None:
    """Read from ``sock`` into ``buffer`` until ``marker`` is in it (the server may not close first)."""
    while marker not in buffer:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        buffer += chunk


def post(server: ServerThread, path: str, body: bytes, *extra: str) -> bytes:
    return (
        request_head(
            server, "POST", path, "Content-Type: application/json", f"Content-Length: {len(body)}", *extra
        )
        + body
    )


def test_pipelined_requests_are_answered_in_order(server: ServerThread) -> None:
    sock = connect(server)
    base = "/api/v1/namespaces/default/configmaps"
    created = json.dumps({"metadata": {"name": "piped"}, "data": {"a": "1"}}).encode()
    sock.sendall(
        request_head(server, "GET", f"{base}/piped")
        + post(server, base, created)
        + request_head(server, "GET", f"{base}/piped")
        + request_head(server, "DELETE", f"{base}/piped")
    )
    buffer = bytearray()
    answers = [read_answer(sock, buffer) for _ in range(4)]
    assert [status for status, _, _ in answers] == [404, 201, 200, 200]
    assert json.loads(answers[0][2])["reason"] == "NotFound"
    assert json.loads(answers[2][2])["data"] == {"a": "1"}
    assert answers[1][1]["content-type"] == ["application/json"]
    assert "date" in answers[1][1]
    sock.close()


def test_a_connection_goes_on_through_aiohttp_for_a_watch(server: ServerThread) -> None:
    api = Client(server)
    sock = connect(server)
    base = "/api/v1/namespaces/default/configmaps"
    buffer = bytearray()
    sock.sendall(request_head(server, "GET", f"{base}?limit=1"))
    status, _, body = read_answer(sock, buffer)
    assert status == 200
    revision = json.loads(body)["metadata"]["resourceVersion"]
    sock.sendall(request_head(server, "GET", f"{base}?watch=1&resourceVersion={revision}"))
    assert api.post(base, {"metadata": {"name": "watched"}}).status_code == 201
    read_until(sock, buffer, b'"name":"watched"')
    assert buffer.startswith(b"HTTP/1.1 200")
    assert b"Transfer-Encoding: chunked" in buffer
    assert b'"type":"ADDED"' in buffer
    sock.close()
    assert api.delete(f"{base}/watched").status_code == 200


def test_connection_close_is_honoured() -> None:
    # A server whose own timeouts are all far off: only the client's Connection: close ends this.
    patient = start_server(timeouts=ConnectionTimeouts(header=600, idle=600, request=600, write=600))
    try:
        sock = connect(patient)
        sock.sendall(request_head(patient, "GET", "/api/v1/namespaces/default", "Connection: close"))
        status, headers, _ = read_answer(sock, bytearray())
        assert status == 200 and headers["connection"] == ["close"]
        closed_within(sock, 30)
    finally:
        patient.stop()


@pytest.mark.parametrize(
    "head",
    [
        b"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n",
        # A watch goes to aiohttp, which reads a field of up to 64 KiB.
        b"GET /api/v1/namespaces?watch=1 HTTP/1.1\r\nHost: x\r\nX-A: "
        + b"a" * (aiohttpserving.MAX_LINE_BYTES + 1)
        + b"\r\n\r\n",
    ],
    ids=["malformed", "a-field-past-aiohttps-bound"],
)
def test_a_head_aiohttp_cannot_read_gets_its_400_and_no_error_is_logged(
    server: ServerThread, head: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    """As kube-apiserver's Go server, which answers 400 and logs nothing: the client's mistake."""
    caplog.set_level(logging.DEBUG, logger="aiohttp.server")
    sock = connect(server)
    sock.sendall(head)
    sock.settimeout(5)
    answer = sock.recv(65536)
    assert answer.startswith((b"HTTP/1.0 400 ", b"HTTP/1.1 400 ")), answer[:100]
    sock.close()
    # aiohttp logs the error before it answers: the record is there once the answer is.
    records = [record for record in caplog.records if record.name == "aiohttp.server"]
    assert [(record.levelno, record.exc_info) for record in records] == [(logging.DEBUG, None)]
    assert "400" in records[0].getMessage()


def test_a_long_head_is_read_as_kube_apiserver_reads_it(server: ServerThread) -> None:
    """A head of up to 1 MiB (a large bearer token, a long query) is served, on the small
    requests' path and on aiohttp's (a watch); reading a long head does not stall for the
    bound on requests sent ahead."""
    api = Client(server)
    base = "/api/v1/namespaces/default/configmaps"
    sock = connect(server)
    buffer = bytearray()
    for size in (20_000, http1.MAX_HEAD_BYTES - 1000):
        created = json.dumps({"metadata": {"name": f"long-head-{size}"}}).encode()
        sock.sendall(post(server, base, created, "X-Padding: " + "p" * size))
        status, _, body = read_answer(sock, buffer)
        assert status == 201, body
    sock.sendall(request_head(server, "GET", f"{base}?limit=1"))
    status, _, body = read_answer(sock, buffer)
    revision = json.loads(body)["metadata"]["resourceVersion"]
    sock.sendall(request_head(server, "GET", f"{base}?watch=1&resourceVersion={revision}", "X-Padding: " + "p" * 20_000))
    assert api.post(base, {"metadata": {"name": "long-head-watched"}}).status_code == 201
    read_until(sock, buffer, b'"name":"long-head-watched"')
    assert buffer.startswith(b"HTTP/1.1 200")
    sock.close()
    for name in ("long-head-20000", f"long-head-{http1.MAX_HEAD_BYTES - 1000}", "long-head-watched"):
        assert api.delete(f"{base}/{name}").status_code == 200


def test_a_head_past_the_bound_gets_gos_431_and_the_server_goes_on(server: ServerThread) -> None:
    """The client may go on sending past the bound (kubectl sends its whole head): what comes
    after is read and dropped until it stops, so that the 431 is not overtaken by a reset."""
    sock = connect(server)
    start = request_head(server, "GET", "/api/v1/namespaces")[:-2]  # its fields, no blank line
    sock.sendall(start + b"X-Padding: " + b"p" * (http1.MAX_HEAD_BYTES - len(start) - len(b"X-Padding: ")))
    for _ in range(128):  # 8 MiB more: closed at the bound, these sends would meet a reset
        sock.sendall(b"p" * 65536)
    sock.sendall(b"\r\n\r\n")
    answer = bytearray()
    sock.settimeout(10)
    while chunk := sock.recv(65536):
        answer += chunk
    assert bytes(answer) == http1.HEAD_TOO_LARGE_ANSWER
    sock.close()
    assert Client(server).get("/api/v1/namespaces/default").status_code == 200


@pytest.mark.kubectl
def test_kubectl_with_a_large_token_is_told_it_is_unauthorized(server: ServerThread, tmp_path: pathlib.Path) -> None:
    """A 20 KB bearer token (an OIDC token with many groups reaches that) is read and judged:
    aiohttp's 8 KB line bound answered 400 before it was."""
    config = tmp_path / "kubeconfig"
    ca_pem = pathlib.Path(server.ca_file).read_bytes()
    kubeconfig.write_kubeconfig(config, server_url=server.url, ca_pem=ca_pem, token="t" * 20_000)
    for binary in KUBECTLS:
        result = Kubectl(binary, config, tmp_path)("get", "configmaps", "-n", "default", check=False)
        assert result.returncode != 0
        assert "You must be logged in to the server" in result.stderr, result.stderr


def test_no_token_gets_a_401_status(server: ServerThread) -> None:
    sock = connect(server)
    sock.sendall(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\n\r\n")
    status, _, body = read_answer(sock, bytearray())
    assert status == 401 and json.loads(body)["reason"] == "Unauthorized"
    sock.close()


@pytest.mark.parametrize("padding", [0, 80_000], ids=["small", "through-aiohttp"])
def test_a_field_name_cannot_split_the_answers_head(server: ServerThread, padding: int) -> None:
    """A warning names an unknown field, quoted as Go quotes it (and CR or LF left in a
    header value would go out as spaces, as Go's header writer does)."""
    sock = connect(server)
    body = json.dumps(
        {"metadata": {"name": f"inject-{padding}"}, "data": {"p": "x" * padding}, "a\r\nX-Injected: yes": 1}
    ).encode()
    sock.sendall(post(server, "/api/v1/namespaces/default/configmaps", body))
    status, headers, _ = read_answer(sock, bytearray())
    assert status == 201
    assert "x-injected" not in headers
    assert any(r"a\\r\\nX-Injected: yes" in warning for warning in headers["warning"]), headers
    sock.close()


def test_a_client_that_vanishes_mid_body_leaves_nothing_behind(
    server: ServerThread, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kubeloop")
    watchdog = server.server._watchdog
    assert watchdog is not None
    sock = connect(server)
    sock.sendall(post(server, "/api/v1/namespaces/default/configmaps", b"{" + b" " * 999)[:-500])
    mine = sock.getsockname()[:2]

    def held() -> bool:  # this socket's connection (the server's control loops have their own)
        return any((t.get_extra_info("peername") or ())[:2] == mine for t in list(watchdog.connections))

    deadline = time.monotonic() + 30
    while not held():  # the server has taken the connection, its body half sent
        assert time.monotonic() < deadline, "the connection was never taken"
        time.sleep(0.01)
    sock.close()
    deadline = time.monotonic() + 5
    while held():
        assert time.monotonic() < deadline, "the connection was never dropped"
        time.sleep(0.05)

    def orphans() -> set[object]:  # requests being answered for a connection that has gone
        live = {connection._answering for connection in list(watchdog.connections.values())}
        return set(watchdog.answering) - live

    # Others' requests (the server's control loops') come and go meanwhile: only what belongs to
    # no live connection is left behind, and a request that ends leaves the set at once.
    deadline = time.monotonic() + 5
    while orphans():
        assert time.monotonic() < deadline, orphans()
        time.sleep(0.01)
    assert Client(server).get("/api/v1/namespaces/default").status_code == 200
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("kubeloop")]
    assert not errors, [r.getMessage() for r in errors]


def test_warnings_never_carry_a_line_break() -> None:
    from kubeloop.apiserver.http.negotiation import quote_warning

    assert quote_warning('a "b"\r\nc\\') == 'a \\"b\\"  c\\\\'


def test_a_client_that_sends_and_never_reads_is_held_to_a_bound(server: ServerThread) -> None:
    """Pipelined requests whose answers the client does not take: once the answers back up, the
    connection stops reading, so what it holds stays bounded."""
    from kubeloop.apiserver.http.connections import MAX_PENDING_BYTES

    watchdog = server.server._watchdog
    assert watchdog is not None
    before = set(watchdog.connections)
    sock = connect(server, rcvbuf=4096)
    one = request_head(server, "GET", "/api/v1/namespaces/default/configmaps?limit=500")
    sock.settimeout(0.5)  # before the watchdog drops it (2 s without taking an answer)
    sent = 0
    try:
        while sent < 64 * 1024 * 1024:
            sock.sendall(one * 200)
            sent += len(one) * 200
    except TimeoutError:
        pass
    # This socket's connection (the server's own control loops connect too).
    mine = sock.getsockname()[:2]
    (connection,) = [
        c
        for t, c in watchdog.connections.items()
        if t not in before and (t.get_extra_info("peername") or ())[:2] == mine
    ]
    assert connection.inner is None
    # Reading stops once the answers back up; what one read hands over before that (asyncio's
    # TLS layer reads up to 256 KiB at a time when the loop is busy) is the only slack.
    assert len(connection._unread) <= MAX_PENDING_BYTES + 256 * 1024 + 65536
    assert sent < 16 * 1024 * 1024  # the client was made to wait, not drained into memory
    sock.close()


class RecordingTransport(asyncio.Transport):
    """A connection's transport that keeps what is written, and notes, at each write, how many
    callbacks the loop has run since the answer began (other requests' turns)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.turns_at_write: list[int] = []
        self.turns = 0
        self.closed = False
        self.reading = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))
        self.turns_at_write.append(self.turns)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def get_write_buffer_size(self) -> int:
        return 0


async def test_a_large_answer_is_written_in_slices_with_the_loop_serving_between() -> None:
    """A 3 MB answer goes out a slice at a time and the loop runs other callbacks between the
    slices (written whole, its encryption held every other request up); the bytes are the whole
    answer, in order, and the connection stays open for the next request."""
    body = bytes(range(256)) * (3 * 1024 * 1024 // 256)

    async def serve(request: http1.BufferedRequest) -> web.StreamResponse:
        return web.Response(body=body, content_type="application/json")

    watchdog = ConnectionWatchdog(ConnectionTimeouts())
    connection = ServerConnection(lambda: asyncio.Protocol(), serve, watchdog)
    transport = RecordingTransport()
    connection.connection_made(transport)
    loop = asyncio.get_running_loop()
    answered = loop.create_future()

    def other_requests_turn() -> None:  # what another connection's request would get
        transport.turns += 1
        if not answered.done():
            loop.call_soon(other_requests_turn)

    loop.call_soon(other_requests_turn)
    original = transport.write

    def write(data: bytes | bytearray | memoryview) -> None:
        original(data)
        if sum(map(len, transport.writes)) >= len(body) and not answered.done():
            answered.set_result(None)

    transport.write = write  # type: ignore[method-assign]
    connection.data_received(b"GET /api/v1/configmaps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\r\n")
    await answered
    head, _, sent = b"".join(transport.writes).partition(b"\r\n\r\n")
    assert sent == body and b"Content-Length: %d" % len(body) in head
    assert len(transport.writes) > len(body) // ANSWER_SLICE_BYTES
    assert all(len(data) <= ANSWER_SLICE_BYTES for data in transport.writes[1:])
    # Between the first slice and the last, the loop served others more than once.
    assert transport.turns_at_write[-1] - transport.turns_at_write[1] >= len(transport.writes) - 2
    assert not transport.closed


async def test_a_long_head_is_read_on_and_requests_sent_ahead_are_held() -> None:
    """A head of up to 1 MiB is read whole however it comes (reading paused at the pending
    bound, as it was for requests sent ahead, it never completed); requests sent ahead of an
    answer are held to the bound, and reading resumes once nothing whole is left to answer."""
    release = asyncio.Event()
    served: list[int] = []

    async def serve(request: http1.BufferedRequest) -> web.StreamResponse:
        served.append(len(request.headers.get("X-A", "")))
        if len(served) == 1:
            await release.wait()
        return web.Response(text="ok")

    connection = ServerConnection(lambda: asyncio.Protocol(), serve, ConnectionWatchdog(ConnectionTimeouts()))
    transport = RecordingTransport()
    connection.connection_made(transport)
    written = asyncio.Event()
    original = transport.write

    def write(data: bytes | bytearray | memoryview) -> None:
        original(data)
        written.set()

    transport.write = write  # type: ignore[method-assign]
    first = b"GET /api HTTP/1.1\r\nHost: x\r\n\r\n"
    long = b"GET /api HTTP/1.1\r\nX-A: " + b"a" * 900_000 + b"\r\n\r\n"
    connection.data_received(first)  # answered until released
    pieces = [long[start : start + 65536] for start in range(0, len(long), 65536)]
    for piece in pieces[:6]:  # ~390 KiB sent ahead of the first answer
        connection.data_received(piece)
    assert not transport.reading  # held: an answer is pending and more than the bound waits
    release.set()
    await written.wait()
    written.clear()
    assert transport.reading  # the first is answered; what waits is no whole request
    for piece in pieces[6:]:
        assert transport.reading, "reading paused before the head was whole"
        connection.data_received(piece)
    await written.wait()
    assert served == [0, 900_000]
    assert all(write.startswith(b"HTTP/1.1 200 OK") for write in transport.writes)
