"""resourceVersion semantics of list and watch, pagination, selectors, bookmarks and 410."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeloop.apiserver.http.watchstream import WatchSettings, WatchStream
from kubeloop.apiserver.storage.watchcache import Event, Watcher
from tests.conftest import ONE_PROCESS_AND_FRONT_END, Client, ServerThread, served_by, start_server

CM = "/api/v1/namespaces/{ns}/configmaps"


def configmap(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {}},
        "data": data,
    }


def stream(
    api: Client, path: str, params: dict[str, str], count: int, timeout: float = 10
) -> list[dict[str, Any]]:
    """Read ``count`` watch events (or until the server ends the stream)."""
    events: list[dict[str, Any]] = []
    with api.get(path, params={"watch": "1", **params}, stream=True, timeout=timeout) as response:
        assert response.status_code == 200, response.text
        assert response.headers["Content-Type"].startswith("application/json")
        for line in response.iter_lines():
            if line:
                events.append(json.loads(line))
                if len(events) >= count:
                    break
    return events


def names(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]


@pytest.fixture(scope="module", params=ONE_PROCESS_AND_FRONT_END)
def shared_server(request: pytest.FixtureRequest, kube_apiserver: ServerThread) -> Iterator[ServerThread]:
    """Every test here runs against one process and against a front-end over its store."""
    yield from served_by(request.param, kube_apiserver)


@pytest.fixture(params=ONE_PROCESS_AND_FRONT_END)
def private_server(request: pytest.FixtureRequest) -> Iterator[ServerThread]:
    server = start_server(
        history_window=5, watch=WatchSettings(bookmark_interval=0.2, min_request_timeout=30)
    )
    try:
        yield from served_by(request.param, server)
    finally:
        server.stop()


def test_list_resource_version_and_items_in_key_order(api: Client, namespace: str) -> None:
    for name in ("b", "a", "c"):
        api.post(CM.format(ns=namespace), configmap(name))
    listed = api.get(CM.format(ns=namespace)).json()
    assert listed["kind"] == "ConfigMapList"
    assert listed["apiVersion"] == "v1"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a", "b", "c"]
    newest = max(int(i["metadata"]["resourceVersion"]) for i in listed["items"])
    assert int(listed["metadata"]["resourceVersion"]) >= newest


def test_pagination_is_a_snapshot(api: Client, namespace: str) -> None:
    for i in range(7):
        api.post(CM.format(ns=namespace), configmap(f"p{i}"))
    first = api.get(CM.format(ns=namespace), params={"limit": "3"}).json()
    assert [i["metadata"]["name"] for i in first["items"]] == ["p0", "p1", "p2"]
    assert first["metadata"]["remainingItemCount"] == 4
    token = first["metadata"]["continue"]
    # Changes after the first page are invisible to the rest of the list.
    api.delete(CM.format(ns=namespace) + "/p4")
    api.post(CM.format(ns=namespace), configmap("p3a"))
    second = api.get(CM.format(ns=namespace), params={"limit": "3", "continue": token}).json()
    assert [i["metadata"]["name"] for i in second["items"]] == ["p3", "p4", "p5"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    third = api.get(
        CM.format(ns=namespace), params={"limit": "3", "continue": second["metadata"]["continue"]}
    ).json()
    assert [i["metadata"]["name"] for i in third["items"]] == ["p6"]
    assert "continue" not in third["metadata"]


def test_continue_with_resource_version_is_400(api: Client, namespace: str) -> None:
    for i in range(3):
        api.post(CM.format(ns=namespace), configmap(f"c{i}"))
    token = api.get(CM.format(ns=namespace), params={"limit": "1"}).json()["metadata"]["continue"]
    response = api.get(
        CM.format(ns=namespace), params={"limit": "1", "continue": token, "resourceVersion": "5"}
    )
    assert response.status_code == 400
    garbage = api.get(CM.format(ns=namespace), params={"continue": "!!notbase64"})
    assert garbage.status_code == 400


def test_resource_version_match_rules(api: Client, namespace: str) -> None:
    no_rv = api.get(CM.format(ns=namespace), params={"resourceVersionMatch": "NotOlderThan"})
    assert no_rv.status_code == 422
    assert no_rv.json()["details"]["causes"][0]["field"] == "resourceVersionMatch"
    bad = api.get(CM.format(ns=namespace), params={"resourceVersion": "1", "resourceVersionMatch": "Newest"})
    assert bad.status_code == 422
    exact_zero = api.get(
        CM.format(ns=namespace), params={"resourceVersion": "0", "resourceVersionMatch": "Exact"}
    )
    assert exact_zero.status_code == 422
    too_new = api.get(CM.format(ns=namespace), params={"resourceVersion": "999999999"})
    assert too_new.status_code == 504
    assert too_new.headers["Retry-After"] == "1"
    assert "Too large resource version" in too_new.json()["message"]


def test_get_with_resource_version(api: Client, namespace: str) -> None:
    created = api.post(CM.format(ns=namespace), configmap("g", a="1")).json()
    path = CM.format(ns=namespace) + "/g"
    # "0" and an old RV (not older than) serve the current object; one from the future is a 504.
    for rv in ("0", "1", created["metadata"]["resourceVersion"]):
        assert (
            api.get(path, params={"resourceVersion": rv}).json()["metadata"]["uid"]
            == created["metadata"]["uid"]
        )
    too_new = api.get(path, params={"resourceVersion": "999999999"})
    assert too_new.status_code == 504 and too_new.headers["Retry-After"] == "1"
    assert api.get(path, params={"resourceVersion": "abc"}).status_code == 400


def test_exact_list_at_an_older_revision(api: Client, namespace: str) -> None:
    api.post(CM.format(ns=namespace), configmap("x", a="1"))
    rv = api.get(CM.format(ns=namespace)).json()["metadata"]["resourceVersion"]
    api.patch(CM.format(ns=namespace) + "/x", {"data": {"a": "2"}}, "application/merge-patch+json")
    api.post(CM.format(ns=namespace), configmap("y"))
    old = api.get(
        CM.format(ns=namespace), params={"resourceVersion": rv, "resourceVersionMatch": "Exact"}
    ).json()
    assert [(i["metadata"]["name"], i["data"]) for i in old["items"]] == [("x", {"a": "1"})]
    assert old["metadata"]["resourceVersion"] == rv


def test_label_and_field_selectors(api: Client, namespace: str) -> None:
    api.post(CM.format(ns=namespace), configmap("web", {"app": "web", "tier": "front"}))
    api.post(CM.format(ns=namespace), configmap("db", {"app": "db", "tier": "back"}))
    api.post(CM.format(ns=namespace), configmap("plain"))

    def selected(**params: str) -> list[str]:
        response = api.get(CM.format(ns=namespace), params=params)
        assert response.status_code == 200, response.text
        return [i["metadata"]["name"] for i in response.json()["items"]]

    assert selected(labelSelector="app=web") == ["web"]
    assert selected(labelSelector="tier in (front,back)") == ["db", "web"]
    assert selected(labelSelector="app!=web") == ["db", "plain"]
    assert selected(labelSelector="!app") == ["plain"]
    assert selected(fieldSelector="metadata.name=db") == ["db"]
    assert selected(fieldSelector="metadata.name!=db", labelSelector="app") == ["web"]
    bad_field = api.get(CM.format(ns=namespace), params={"fieldSelector": "spec.nodeName=x"})
    assert bad_field.status_code == 400
    assert "spec.nodeName" in bad_field.json()["message"]
    bad_label = api.get(CM.format(ns=namespace), params={"labelSelector": "a in (b"})
    assert bad_label.status_code == 400


def test_pod_field_selectors(api: Client, namespace: str) -> None:
    for name, node in (("on-a", "node-a"), ("on-b", "node-b")):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
        }
        assert api.post(f"/api/v1/namespaces/{namespace}/pods", pod).status_code == 201
    listed = api.get(
        f"/api/v1/namespaces/{namespace}/pods", params={"fieldSelector": "spec.nodeName=node-b"}
    ).json()
    assert [p["metadata"]["name"] for p in listed["items"]] == ["on-b"]
    phase = api.get(
        f"/api/v1/namespaces/{namespace}/pods", params={"fieldSelector": "status.phase=Pending"}
    ).json()
    assert len(phase["items"]) == 2


def test_list_across_namespaces(api: Client, namespace: str) -> None:
    api.post(CM.format(ns=namespace), configmap("everywhere", {"mark": namespace}))
    listed = api.get("/api/v1/configmaps", params={"labelSelector": f"mark={namespace}"}).json()
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in listed["items"]] == [
        (namespace, "everywhere")
    ]


def test_watch_without_rv_starts_with_current_state(api: Client, namespace: str) -> None:
    api.post(CM.format(ns=namespace), configmap("one"))
    api.post(CM.format(ns=namespace), configmap("two"))
    events = stream(api, CM.format(ns=namespace), {"timeoutSeconds": "1"}, count=10)
    assert names(events) == [("ADDED", "one"), ("ADDED", "two")]


def test_watch_from_rv_sends_changes_strictly_after_it(api: Client, namespace: str) -> None:
    created = api.post(CM.format(ns=namespace), configmap("w")).json()
    rv = created["metadata"]["resourceVersion"]
    api.patch(CM.format(ns=namespace) + "/w", {"data": {"a": "1"}}, "application/merge-patch+json")
    api.delete(CM.format(ns=namespace) + "/w")
    events = stream(api, CM.format(ns=namespace), {"resourceVersion": rv, "timeoutSeconds": "1"}, count=10)
    assert names(events) == [("MODIFIED", "w"), ("DELETED", "w")]
    deleted = events[1]["object"]
    assert int(deleted["metadata"]["resourceVersion"]) > int(
        events[0]["object"]["metadata"]["resourceVersion"]
    )
    assert deleted["data"] == {"a": "1"}


def test_watch_sees_live_changes(api: Client, namespace: str) -> None:
    rv = api.get(CM.format(ns=namespace)).json()["metadata"]["resourceVersion"]
    result: list[dict[str, Any]] = []

    def read() -> None:
        with api.get(
            CM.format(ns=namespace), params={"watch": "1", "resourceVersion": rv}, stream=True
        ) as answer:
            for line in answer.iter_lines():
                if line:
                    result.append(orjson.loads(line))
                if len(result) == 3:
                    return

    reader = threading.Thread(target=read)
    reader.start()
    # A first change, seen by the reader: the watch is live when the next ones are made.
    api.post(CM.format(ns=namespace), configmap("first"))
    deadline = time.monotonic() + 30
    while not result:
        assert time.monotonic() < deadline, "the watch showed nothing"
        time.sleep(0.01)
    api.post(CM.format(ns=namespace), configmap("live"))
    api.patch(CM.format(ns=namespace) + "/live", {"data": {"x": "y"}}, "application/merge-patch+json")
    reader.join(30)
    assert names(result) == [("ADDED", "first"), ("ADDED", "live"), ("MODIFIED", "live")]


def test_watch_selector_transitions(api: Client, namespace: str) -> None:
    rv = api.get(CM.format(ns=namespace)).json()["metadata"]["resourceVersion"]
    api.post(CM.format(ns=namespace), configmap("t", {"keep": "no"}))
    api.patch(
        CM.format(ns=namespace) + "/t",
        {"metadata": {"labels": {"keep": "yes"}}},
        "application/merge-patch+json",
    )
    api.patch(CM.format(ns=namespace) + "/t", {"data": {"a": "1"}}, "application/merge-patch+json")
    last = api.patch(
        CM.format(ns=namespace) + "/t",
        {"metadata": {"labels": {"keep": "no"}}},
        "application/merge-patch+json",
    )
    events = stream(
        api,
        CM.format(ns=namespace),
        {"resourceVersion": rv, "labelSelector": "keep=yes", "timeoutSeconds": "1"},
        10,
    )
    assert names(events) == [("ADDED", "t"), ("MODIFIED", "t"), ("DELETED", "t")]
    gone = events[2]["object"]
    assert gone["metadata"]["labels"] == {"keep": "yes"}  # the last state that matched
    assert gone["metadata"]["resourceVersion"] == last.json()["metadata"]["resourceVersion"]


def test_watch_field_selector_on_name(api: Client, namespace: str) -> None:
    rv = api.get(CM.format(ns=namespace)).json()["metadata"]["resourceVersion"]
    api.post(CM.format(ns=namespace), configmap("other"))
    api.post(CM.format(ns=namespace), configmap("mine"))
    events = stream(
        api,
        CM.format(ns=namespace),
        {"resourceVersion": rv, "fieldSelector": "metadata.name=mine", "timeoutSeconds": "1"},
        5,
    )
    assert names(events) == [("ADDED", "mine")]


def test_watch_timeout_seconds_ends_the_stream(api: Client, namespace: str) -> None:
    started = time.monotonic()
    events = stream(api, CM.format(ns=namespace), {"resourceVersion": "0", "timeoutSeconds": "1"}, count=100)
    elapsed = time.monotonic() - started
    assert events == []
    assert elapsed >= 0.9  # the server ended it when the timeout was up, not before


def test_send_initial_events_ends_with_annotated_bookmark(api: Client, namespace: str) -> None:
    api.post(CM.format(ns=namespace), configmap("s1"))
    params = {
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "1",
    }
    events = stream(api, CM.format(ns=namespace), params, count=2)
    assert events[0]["type"] == "ADDED"
    assert events[1]["type"] == "BOOKMARK"
    bookmark = events[1]["object"]
    assert bookmark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert bookmark["kind"] == "ConfigMap"
    assert int(bookmark["metadata"]["resourceVersion"]) >= int(
        events[0]["object"]["metadata"]["resourceVersion"]
    )
    rejected = api.get(CM.format(ns=namespace), params={"watch": "1", "sendInitialEvents": "true"})
    assert rejected.status_code == 422


def test_bookmarks_only_when_asked(private_server: ServerThread) -> None:
    api = Client(private_server)
    rv = api.get(CM.format(ns="default")).json()["metadata"]["resourceVersion"]
    events = stream(
        api, CM.format(ns="default"), {"resourceVersion": rv, "allowWatchBookmarks": "true"}, count=2
    )
    assert [e["type"] for e in events] == ["BOOKMARK", "BOOKMARK"]
    assert set(events[0]["object"]["metadata"]) == {"resourceVersion"}
    quiet = stream(api, CM.format(ns="default"), {"resourceVersion": rv, "timeoutSeconds": "1"}, count=2)
    assert quiet == []


def test_compacted_resource_version_is_410(private_server: ServerThread) -> None:
    api = Client(private_server)
    first = api.post(CM.format(ns="default"), configmap("old")).json()
    for i in range(10):
        api.patch(CM.format(ns="default") + "/old", {"data": {"i": str(i)}}, "application/merge-patch+json")
    old_rv = first["metadata"]["resourceVersion"]
    events = stream(api, CM.format(ns="default"), {"resourceVersion": old_rv}, count=1)
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["code"] == 410
    assert status["reason"] == "Expired"
    assert status["message"].startswith(f"too old resource version: {old_rv} (")
    listed = api.get(
        CM.format(ns="default"), params={"resourceVersion": old_rv, "resourceVersionMatch": "Exact"}
    )
    assert listed.status_code == 410
    assert listed.json()["reason"] == "Expired"


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=1300), st.text(max_size=5))
def test_large_lists_encode_in_slices_to_the_same_bytes(count: int, continue_token: str) -> None:
    from kubeloop.apiserver.http.negotiation import encode_list_in_slices

    body = {
        "kind": "ConfigMapList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "7", "continue": continue_token},
        "items": [{"metadata": {"name": f"c{i}"}, "data": {"k": "v" * (i % 7)}} for i in range(count)],
    }
    assert encode_list_in_slices(body) == orjson.dumps(body, option=orjson.OPT_APPEND_NEWLINE)


def test_a_large_list_over_http_is_whole_and_valid(api: Client, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    import concurrent.futures

    def create(i: int) -> int:
        return api.post(path, {"metadata": {"name": f"c{i:04d}"}, "data": {"i": str(i)}}).status_code

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        assert set(pool.map(create, range(1100))) == {201}
    listed = api.get(path)
    assert listed.headers["Content-Type"].startswith("application/json")
    items = listed.json()["items"]
    assert [item["metadata"]["name"] for item in items] == [f"c{i:04d}" for i in range(1100)]
    assert all(item["data"] == {"i": str(i)} for i, item in enumerate(items))


def test_a_get_of_one_object_with_watch_is_a_watch_of_that_object(api: Client, namespace: str) -> None:
    """kube-apiserver serves ``GET .../configmaps/one?watch=1`` as a watch of that object (it is
    authorized as a watch): its events, not another's, and not a single get."""
    created = api.post(CM.format(ns=namespace), configmap("one")).json()
    api.post(CM.format(ns=namespace), configmap("other"))
    rv = created["metadata"]["resourceVersion"]
    api.patch(CM.format(ns=namespace) + "/other", {"data": {"a": "1"}}, "application/merge-patch+json")
    api.patch(CM.format(ns=namespace) + "/one", {"data": {"a": "1"}}, "application/merge-patch+json")
    api.delete(CM.format(ns=namespace) + "/one")
    events = stream(
        api, CM.format(ns=namespace) + "/one", {"resourceVersion": rv, "timeoutSeconds": "1"}, count=10
    )
    assert names(events) == [("MODIFIED", "one"), ("DELETED", "one")]
    initial = stream(api, CM.format(ns=namespace) + "/other", {"timeoutSeconds": "1"}, count=10)
    assert names(initial) == [("ADDED", "other")]
    # A field selector of the request's own narrows it further.
    none = stream(
        api,
        CM.format(ns=namespace) + "/other",
        {"timeoutSeconds": "1", "fieldSelector": "metadata.name=one"},
        count=10,
    )
    assert names(none) == []


class _WatchReader:
    """The events of a watch response on a raw connection: its head, then its chunks."""

    def __init__(self, sock: ssl.SSLSocket) -> None:
        self._sock = sock
        sock.settimeout(30)
        self._data = self._until(b"\r\n\r\n", b"")
        head, _, self._data = self._data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        self._lines = b""

    def _until(self, marker: bytes, data: bytes) -> bytes:
        while marker not in data:
            data += self._sock.recv(65536)
        return data

    def events(self, count: int) -> list[dict[str, Any]]:
        while self._lines.count(b"\n") < count:
            size_line, _, data = self._until(b"\r\n", self._data).partition(b"\r\n")
            size = int(size_line, 16)
            while len(data) < size + 2:
                data += self._sock.recv(65536)
            self._lines += data[:size]
            self._data = data[size + 2 :]
        lines = self._lines.split(b"\n")
        self._lines = b"\n".join(lines[count:])
        return [orjson.loads(line) for line in lines[:count]]


def _raw_watch(server: ServerThread, target: str, *, receive_buffer: int | None = None) -> ssl.SSLSocket:
    """A watch request sent on a TLS connection of our own, its answer left unread."""
    host, port = server.url.split("://", 1)[1].rsplit(":", 1)
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    raw.connect((host, int(port)))
    sock = ssl.create_default_context(cafile=server.ca_file).wrap_socket(raw, server_hostname=host)
    head = f"GET {target} HTTP/1.1\r\nHost: kubeloop\r\n"
    sock.sendall(f"{head}Authorization: Bearer {server.token}\r\n\r\n".encode())
    return sock


def _configmap_watchers(server: ServerThread, namespace: str) -> list[Watcher]:
    """The server's watchers of ConfigMaps in ``namespace``."""
    store = server.server.store
    assert store is not None
    return [w for w in list(store._watchers) if f"/{namespace}/" in w.prefix and "configmaps" in w.prefix]


def poll(check: Callable[[], bool], failure: str) -> None:
    deadline = time.monotonic() + 30  # bounds a test that would otherwise hang
    while not check():
        assert time.monotonic() < deadline, failure
        time.sleep(0.01)


def test_watchers_of_one_collection_share_one_encoding_of_each_tick(
    shared_server: ServerThread, api: Client, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Watches of one collection, neither filtered nor encoded their own way, are written the
    same bytes for a tick's events, encoded once (the fan-out's shared batch): here three."""
    path = CM.format(ns=namespace)
    rv = api.get(path).json()["metadata"]["resourceVersion"]
    socks = [_raw_watch(shared_server, f"{path}?watch=1&resourceVersion={rv}") for _ in range(3)]
    poll(
        lambda: [w.sink is not None for w in _configmap_watchers(shared_server, namespace)] == [True] * 3,
        "the store never wrote to the connections itself",
    )
    encodings: list[str] = []
    joined_lines = WatchStream._joined_lines

    def counted(stream: WatchStream, events: Sequence[Event]) -> bytes:
        if f"/{namespace}/" in stream._prefix:
            encodings.append(stream._prefix)
        return joined_lines(stream, events)

    monkeypatch.setattr(WatchStream, "_joined_lines", counted)
    api.post(path, configmap("one"))
    received = [_WatchReader(sock).events(1) for sock in socks]
    for sock in socks:
        sock.close()
    assert [names(events) for events in received] == [[("ADDED", "one")]] * 3
    assert len(encodings) == 1


def test_a_watcher_that_falls_behind_and_catches_up_gets_every_event_once_in_order(
    shared_server: ServerThread, api: Client, namespace: str
) -> None:
    """While the client keeps up, the store writes each tick's events straight to the
    connection; when it falls behind, the stream's task takes over and waits for it; once it has
    caught up, the store writes again. No event is lost, repeated or reordered on the way."""
    path = CM.format(ns=namespace)
    rv = api.get(path).json()["metadata"]["resourceVersion"]
    sock = _raw_watch(shared_server, f"{path}?watch=1&resourceVersion={rv}", receive_buffer=4096)
    poll(lambda: len(_configmap_watchers(shared_server, namespace)) == 1, "the watch never started")
    watcher = _configmap_watchers(shared_server, namespace)[0]
    api.post(path, configmap("first"))
    poll(lambda: watcher.sink is not None, "the store never wrote to the connection itself")
    value = "x" * 400_000
    created = ["first"]
    for i in range(24):  # ~10 MB the client does not read yet: more than the sockets hold
        assert api.post(path, configmap(f"big{i}", v=value)).status_code == 201
        created.append(f"big{i}")
    poll(lambda: watcher.sink is None, "the store went on writing to a client that fell behind")
    reader = _WatchReader(sock)
    events = reader.events(len(created))
    for name in ("after0", "after1", "after2"):
        assert api.post(path, configmap(name)).status_code == 201
        created.append(name)
    events += reader.events(3)
    poll(lambda: watcher.sink is not None, "the store never wrote to the connection again")
    api.post(path, configmap("last"))
    created.append("last")
    events += reader.events(1)
    sock.close()
    assert [(event["type"], event["object"]["metadata"]["name"]) for event in events] == [
        ("ADDED", name) for name in created
    ]
