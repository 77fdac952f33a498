"""The server's small-request path on the durable server (``kubeloop apiserver --data-dir``, a
real process): kubectl 1.27 and 1.33 through it, pipelined creates across a SIGKILL (every
acknowledged one survives, nothing half-written), bad and huge input refused with a Status and
nothing written."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import pathlib
import queue
import signal
import socket
import ssl
import threading

import pytest
import requests
import yaml

from tests.apiserver.http.test_http1 import read_answer
from tests.apiserver.storage.test_durability import apiserver, session_for
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl

pytestmark = pytest.mark.kubectl


def _socket(data_dir: pathlib.Path, url: str) -> socket.socket:
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(data_dir / "pki" / "ca.crt"))
    return context.wrap_socket(socket.create_connection((host, int(port))), server_hostname=host)


def _token(data_dir: pathlib.Path) -> str:
    return str(yaml.safe_load((data_dir / "kubeconfig").read_text())["users"][0]["user"]["token"])


def _post(token: str, path: str, body: bytes) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: kubeloop\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def test_pipelined_creates_across_a_sigkill_and_bad_input(tmp_path: pathlib.Path) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    acknowledged: list[str] = []
    with apiserver(tmp_path) as (proc, url):
        token = _token(tmp_path)
        sock = _socket(tmp_path, url)
        bodies = [
            json.dumps({"metadata": {"name": f"p{i}"}, "data": {"i": str(i)}}).encode() for i in range(300)
        ]
        sock.sendall(b"".join(_post(token, base, body) for body in bodies))
        buffer = bytearray()
        for _ in range(40):
            status, _, answer = read_answer(sock, buffer)
            assert status == 201, answer
            acknowledged.append(json.loads(answer)["metadata"]["name"])
        proc.send_signal(signal.SIGKILL)  # the rest are being answered, or not yet read
        proc.wait(10)
        sock.close()
    with apiserver(tmp_path) as (_, url):
        session = session_for(tmp_path)
        listed = session.get(
            url + base, params={"fieldSelector": "metadata.name!=kube-root-ca.crt"}, timeout=10
        )
        listed = listed.json()["items"]
        names = {item["metadata"]["name"] for item in listed}
        assert set(acknowledged) <= names
        for item in listed:  # each stored create whole: its data as sent
            assert item["data"] == {"i": item["metadata"]["name"][1:]}

        sock = _socket(tmp_path, url)
        token = _token(tmp_path)
        buffer = bytearray()
        sock.sendall(_post(token, base, b'{"metadata": {"name": "broken"}, "data": '))
        status, _, answer = read_answer(sock, buffer)
        assert status == 400 and json.loads(answer)["kind"] == "Status"
        nested = (
            b'{"metadata": {"name": "deep"}, "data": {"x": "y"}, "extra": ' + b"[" * 5000 + b"]" * 5000 + b"}"
        )
        sock.sendall(_post(token, base, nested))
        status, _, answer = read_answer(sock, buffer)
        assert status == 400 and "nest" in json.loads(answer)["message"], answer[:300]
        huge = json.dumps({"metadata": {"name": "huge"}, "data": {"v": "x" * (4 * 1024 * 1024)}}).encode()
        sock.sendall(_post(token, base, huge))  # through aiohttp from here: 413
        status, _, answer = read_answer(sock, buffer)
        assert status == 413 and json.loads(answer)["reason"] == "RequestEntityTooLarge"
        sock.close()
        for name in ("broken", "deep", "huge"):
            assert session.get(f"{url}{base}/{name}", timeout=10).status_code == 404


# Durability is what these prove; kubectl versions are tests/apiserver/test_kubectl.py's.
@pytest.mark.parametrize("binary", KUBECTLS[-1:], ids=[p.name for p in KUBECTLS[-1:]])
def test_kubectl_on_the_durable_server_across_a_sigkill(tmp_path: pathlib.Path, binary: pathlib.Path) -> None:
    data = tmp_path / "data"
    kubectl = Kubectl(binary, data / "kubeconfig", tmp_path)
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\ndata:\n  mode: fast\n"
    with apiserver(data) as (proc, _):
        assert "configmap/kept created" in kubectl("apply", "-f", "-", stdin=manifest).stdout
        kubectl("patch", "configmap", "kept", "--type=merge", "-p", '{"data":{"mode":"slow"}}')
        big = "x" * 100_000  # a body over 64 KiB: aiohttp's path on the same kind of connection
        kubectl("create", "configmap", "big", f"--from-literal=v={big}")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    with apiserver(data):
        kept = json.loads(kubectl("get", "configmap", "kept", "-o", "json").stdout)
        assert kept["data"] == {"mode": "slow"}
        assert (
            len(json.loads(kubectl("get", "configmap", "big", "-o", "json").stdout)["data"]["v"]) == 100_000
        )
        bad = kubectl("patch", "configmap", "kept", "--type=merge", "-p", '{"data":{"mode":1}}', check=False)
        # As kube-apiserver answers a merge patch its type cannot hold: 422 on the field "patch".
        assert bad.returncode != 0 and "The request is invalid: patch:" in bad.stderr, bad.stderr
        assert "json: cannot unmarshal number into Go struct field ConfigMap.data of type string" in bad.stderr
        assert 'configmap "kept" deleted' in kubectl("delete", "configmap", "kept").stdout
        assert kubectl("get", "configmap", "kept", check=False).returncode != 0


@pytest.mark.parametrize("binary", KUBECTLS[-1:], ids=[p.name for p in KUBECTLS[-1:]])
def test_watched_concurrent_patches_and_repeated_keys_on_the_durable_server_across_a_sigkill(
    tmp_path: pathlib.Path, binary: pathlib.Path
) -> None:
    """What session 12 changed, as users hit it: writes racing on one object (they wait for it to
    settle), a kubectl watch of them, a SIGKILL mid-race; JSON bodies with repeated keys (compact,
    spaced, and beside strings holding ``":``) refused under Strict with every repeated path and
    nothing written, and a body with no repeat but ``":`` in its strings created."""
    data = tmp_path / "data"
    kubectl = Kubectl(binary, data / "kubeconfig", tmp_path)
    base = "/api/v1/namespaces/default/configmaps"
    acknowledged: list[int] = []
    with apiserver(data) as (proc, url):
        session = session_for(data)
        assert session.post(url + base, json={"metadata": {"name": "hot"}}, timeout=10).status_code == 201
        columns = ["-o", "custom-columns=RV:.metadata.resourceVersion", "--no-headers"]
        watch = kubectl.start("get", "configmap", "hot", "--watch", *columns)
        assert watch.stdout is not None
        printed: queue.Queue[int] = queue.Queue()
        reader = threading.Thread(target=lambda: [printed.put(int(line)) for line in watch.stdout], daemon=True)
        reader.start()

        def next_printed() -> int:
            return printed.get(timeout=60)  # a guard: kubectl is to print every change

        try:
            # kubectl GETs the object and prints it, then watches it from resourceVersion 0 (the
            # state when its watch arrives), whose first event it does not print: a change made
            # before its watch arrived is folded into that one. Changes are made until one is
            # printed (its watch is open); from then on every change is a line of its own.
            next_printed()
            attempt = 0
            while True:
                opened = session.patch(
                    f"{url}{base}/hot",
                    data=json.dumps({"metadata": {"labels": {"opened": str(attempt)}}}),
                    headers={"Content-Type": "application/merge-patch+json"},
                    timeout=10,
                ).json()["metadata"]["resourceVersion"]
                try:
                    seen = [printed.get(timeout=0.5)]  # only paces the attempts
                except queue.Empty:
                    attempt += 1
                    continue
                break
            while seen[-1] != int(opened):
                seen = [next_printed()]

            def label(i: int) -> None:
                patched = session.patch(
                    f"{url}{base}/hot",
                    data=json.dumps({"metadata": {"labels": {f"l{i}": "x"}}}),
                    headers={"Content-Type": "application/merge-patch+json"},
                    timeout=10,
                )
                assert patched.status_code == 200, patched.text
                acknowledged.append(i)

            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                list(pool.map(label, range(48)))
            # A last change: once kubectl prints it, it has printed everything before it.
            marker = session.patch(
                f"{url}{base}/hot",
                data=json.dumps({"metadata": {"labels": {"marker": "x"}}}),
                headers={"Content-Type": "application/merge-patch+json"},
                timeout=10,
            ).json()["metadata"]["resourceVersion"]
            while seen[-1] != int(marker):
                seen.append(next_printed())
        finally:
            watch.terminate()
            watch.wait(timeout=10)
            reader.join(10)  # it reads to the end of kubectl's output
        # The first change, then one line per change: none lost, none repeated, in order.
        assert len(seen) == 1 + 48 + 1 and seen == sorted(set(seen)), seen
        # Another race, cut by a SIGKILL: what was acknowledged survives.
        racing: list[int] = []

        def relabel(i: int) -> None:
            with contextlib.suppress(requests.RequestException):
                patched = session.patch(
                    f"{url}{base}/hot",
                    data=json.dumps({"metadata": {"labels": {f"k{i}": "y"}}}),
                    headers={"Content-Type": "application/merge-patch+json"},
                    timeout=10,
                )
                if patched.status_code == 200:
                    racing.append(i)
                    if len(racing) == 20:
                        proc.send_signal(signal.SIGKILL)

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(relabel, range(200)))
        proc.wait(10)
    assert len(racing) >= 20
    with apiserver(data) as (_, url):
        labels = json.loads(kubectl("get", "configmap", "hot", "-o", "json").stdout)["metadata"]["labels"]
        assert {f"l{i}" for i in acknowledged} | {f"k{i}" for i in racing} <= set(labels)
        strict = f"{base}?fieldValidation=Strict"
        repeated = {
            "compact.json": b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup1"},'
            b'"data":{"a":"1","b":"\\":\\":","a":"2"}}',
            "spaced.json": b'{\n  "apiVersion" : "v1", "kind" : "ConfigMap",\n  "metadata" : {"name" : "dup2",'
            b' "name" : "dup2"},\n  "data" : {"a" : "1", "a" : "2"}\n}',
        }
        for file_name, body in repeated.items():
            (tmp_path / file_name).write_bytes(body)
            refused = kubectl("create", "--raw", strict, "-f", str(tmp_path / file_name), check=False)
            assert refused.returncode != 0, refused.stdout
            assert "duplicate field" in refused.stderr, refused.stderr
        assert (
            'duplicate field \\"data.a\\"' in refused.stderr or 'duplicate field "data.a"' in refused.stderr
        )
        assert "metadata.name" in refused.stderr, refused.stderr
        (tmp_path / "quoted.json").write_bytes(
            b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"quoted"},"data":{"a":"\\":","b":"x\\":y"}}'
        )
        kubectl("create", "--raw", strict, "-f", str(tmp_path / "quoted.json"))
        quoted = json.loads(kubectl("get", "configmap", "quoted", "-o", "json").stdout)
        assert quoted["data"] == {"a": '":', "b": 'x":y'}
        for name in ("dup1", "dup2"):
            assert kubectl("get", "configmap", name, check=False).returncode != 0  # nothing written
