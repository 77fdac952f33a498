"""What ``kubeloop run`` loads: an operator run without ``--view`` or ``--console`` never imports
the console's web server (aiohttp) or the terminal view (rich). Both cost every start and every
reload ~0.2 s of CPU (``kubeloop run`` with a mistake in its target: 0.56-0.62 s, 0.39 without
them), and aiohttp ~13 MiB of the operator's memory."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys

from tests.conftest import Client, ServerThread

OPERATOR = """
import sys

import kubeloop
from kubeloop.models import core_v1


def setup(manager: kubeloop.Manager) -> None:
    async def reconcile(request: kubeloop.Request) -> None:
        if request.name == "probe":
            loaded = sorted({m.split(".")[0] for m in sys.modules} & {"aiohttp", "rich"})
            print("loaded:", ",".join(loaded) or "neither", flush=True)

    kubeloop.Builder(manager).for_(core_v1.ConfigMap).complete(reconcile)
"""


def test_an_operator_run_without_view_or_console_loads_neither_aiohttp_nor_rich(
    shared_server: ServerThread, api: Client, namespace: str, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "main.py").write_text(OPERATOR)
    environment = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
    run = subprocess.Popen(
        [sys.executable, "-m", "kubeloop.cli.main", "run", ".", "--kubeconfig", str(shared_server.kubeconfig),
         "--namespace", namespace],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment,
    )  # fmt: skip
    try:
        assert run.stdout is not None
        lines: list[str] = []
        while not lines or "controller(s) starting" not in lines[-1]:
            lines.append(run.stdout.readline())
            assert lines[-1], "kubeloop run ended:\n" + "".join(lines)
        created = api.post(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "probe"}})
        assert created.status_code == 201, created.text
        while not lines[-1].startswith("loaded:"):
            lines.append(run.stdout.readline())
            assert lines[-1], "kubeloop run ended:\n" + "".join(lines)
        assert lines[-1] == "loaded: neither\n", "".join(lines)
    finally:
        run.send_signal(signal.SIGTERM)
        run.wait(60)
