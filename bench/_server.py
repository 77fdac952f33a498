"""The embedded API server as a separate process for benchmarks (so that its CPU and memory are
not the measured process's)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

import yaml


@dataclass(frozen=True)
class ServerProcess:
    url: str
    kubeconfig: str
    token: str
    ca_file: str | None
    pid: int
    data_dir: str


@contextlib.contextmanager
def server_process(
    *,
    memory: bool = False,
    fsync: bool = True,
    tls: bool = True,
    history_window: int | None = None,
    data_dir: str | None = None,
    keep_data: bool = False,
    cpus: set[int] | None = None,
    controllers: bool = False,
    extra_args: tuple[str, ...] = (),
) -> Iterator[ServerProcess]:
    """``kubeloop apiserver`` on a free port, stopped on exit; in a temporary data directory
    (removed afterwards unless ``keep_data``) or in ``data_dir``; on the CPUs ``cpus`` only
    when given. The API server alone unless ``controllers``: benchmarks measure it (or the
    operators on it) as kube-apiserver, whose garbage collector and namespace controller are
    another process upstream."""
    with contextlib.ExitStack() as cleanup:
        if data_dir is not None:
            tmp = data_dir
        elif keep_data:
            tmp = tempfile.mkdtemp()
        else:
            tmp = cleanup.enter_context(tempfile.TemporaryDirectory())
        command = [sys.executable, "-m", "kubeloop.cli.main", "apiserver", "--data-dir", tmp, "--port", "0"]
        if memory:
            command.append("--memory")
        if not fsync:
            command.append("--no-fsync")
        if not tls:
            command.append("--insecure-http")
        if not controllers:
            command.append("--no-controllers")
        if history_window is not None:
            command += ["--history-window", str(history_window)]
        if "--workers" not in extra_args:
            command += ["--workers", "1"]  # what is measured is one process, unless asked
        command += extra_args
        server = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus),
        )
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            url = line.split(" at ", 1)[1].split()[0]
            kubeconfig = f"{tmp}/kubeconfig"
            with open(kubeconfig) as handle:
                config = yaml.safe_load(handle)
            token = config["users"][0]["user"]["token"]
            yield ServerProcess(url, kubeconfig, token, f"{tmp}/pki/ca.crt" if tls else None, server.pid, tmp)
        finally:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
