"""The `kubeloop apiserver` command: ready line, kubeconfig, and no acknowledged write lost on SIGKILL."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import requests
import yaml

KUBELOOP = [sys.executable, "-m", "kubeloop.cli.main"]


@contextmanager
def apiserver(data_dir: pathlib.Path, *extra: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = subprocess.Popen(
        [*KUBELOOP, "apiserver", "--data-dir", str(data_dir), "--port", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "ready" in line, (line, proc.stderr.read() if proc.stderr else "")
        url = line.split(" at ", 1)[1].split()[0]
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def session_for(data_dir: pathlib.Path) -> requests.Session:
    kubeconfig = yaml.safe_load((data_dir / "kubeconfig").read_text())
    session = requests.Session()
    session.trust_env = False  # REQUESTS_CA_BUNDLE would override session.verify
    session.headers["Authorization"] = "Bearer " + kubeconfig["users"][0]["user"]["token"]
    session.verify = str(data_dir / "pki" / "ca.crt")
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
