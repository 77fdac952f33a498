"""``kubeloop run --reload`` as a user runs it: the operator is edited while it runs on its
embedded server, and the next object is handled by the new code, on the same server (the same
URL, the earlier objects still there); code that does not load is one line, and the next good
edit runs; SIGTERM ends it with 0."""

from __future__ import annotations

import os
import pathlib
import queue
import signal
import subprocess
import sys
import threading
from typing import IO

import pytest

from tests.apiserver.test_kubectl import KUBECTLS

OPERATOR = """\
import kubeloop
from kubeloop import kinds

VALUE = "one"


def setup(manager):
    async def reconcile(request):
        config_map = await manager.client.get(kinds.ConfigMap, request.name, namespace=request.namespace)
        labels = config_map["metadata"].setdefault("labels", {})
        if labels.get("seen") != VALUE:
            labels["seen"] = VALUE
            await manager.client.update(config_map)

    kubeloop.Builder(manager).for_(kinds.ConfigMap).complete(reconcile)
"""


class Lines:
    """A pipe's lines, read as they come by a thread of their own: the process never waits on a
    full pipe, whichever of its two streams the test reads at the time."""

    def __init__(self, stream: IO[str] | None) -> None:
        assert stream is not None
        self._lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put("")  # the end

    def until(self, wanted: str) -> list[str]:
        """The lines up to and including the first that holds ``wanted``."""
        lines = []
        while True:
            line = self._lines.get()
            assert line, f"ended before {wanted!r}: {lines}"
            lines.append(line)
            if wanted in line:
                return lines


def write_operator(path: pathlib.Path, text: str) -> None:
    """Write the operator's first version, modified at the start of a second (see ``edit``)."""
    path.write_text(text)
    second = path.stat().st_mtime_ns // 1_000_000_000 * 1_000_000_000
    os.utime(path, ns=(second, second))


def edit(path: pathlib.Path, text: str) -> None:
    """Write ``text`` modified a millisecond after the last version, in the same second: Python
    takes cached bytecode as current while its source's time in whole seconds and its size are
    those it recorded, and an edit that keeps the size (``"one"`` to ``"two"``) must still run."""
    before = path.stat().st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


def writing_bytecode(home: pathlib.Path) -> dict[str, str]:
    """The command's environment, with Python writing bytecode caches as it does by default."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "HOME": str(home)}


@pytest.mark.parametrize("durable", [False, True], ids=["memory", "data-dir"])
def test_an_edit_reloads_the_operator_on_the_same_server(tmp_path: pathlib.Path, durable: bool) -> None:
    operator = tmp_path / "op.py"
    write_operator(operator, OPERATOR)
    kubectl = str(KUBECTLS[-1])
    storage = ["--data-dir", str(tmp_path / "data")] if durable else []
    run = subprocess.Popen(
        [sys.executable, "-m", "kubeloop.cli.main", "run", "op.py", "--embedded", "--reload", *storage],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=writing_bytecode(tmp_path),
    )  # fmt: skip
    stdout, stderr = Lines(run.stdout), Lines(run.stderr)
    try:
        started = stdout.until("controller(s) starting")
        kubeconfig = started[0].split("kubeconfig=", 1)[1].strip()
        assert started[1] == f"kubeloop run: --reload: watching the .py files under {tmp_path}\n"

        def kube(*args: str) -> str:
            done = subprocess.run(
                [kubectl, "--kubeconfig", kubeconfig, *args], capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        def labelled(name: str, value: str) -> None:
            kube("create", "configmap", name)
            kube(
                "wait",
                f"configmap/{name}",
                f"--for=jsonpath={{.metadata.labels.seen}}={value}",
                "--timeout=30s",
            )

        labelled("first", "one")
        edit(operator, OPERATOR.replace('VALUE = "one"', 'VALUE = "two"'))
        reloaded = stdout.until("controller(s) starting")
        # The reconcile that the label's own update woke may still be running at the edit (on a
        # busy machine): it is cancelled first, and the run says so before it reloads.
        if reloaded[0] == "kubeloop run: cancelling the reconciles in flight (1 of configmap) to reload\n":
            reloaded = reloaded[1:]
        assert reloaded[0] == "kubeloop run: op.py changed: reloading\n"
        assert "embedded apiserver ready" not in "".join(reloaded)  # the same server: not started again
        labelled("second", "two")
        assert "first" in kube("get", "configmaps", "-o", "name")

        edit(operator, OPERATOR.replace('VALUE = "one"', 'VALUE = "two'))
        refused = stderr.until("does not load")[-1]
        assert refused == (
            "kubeloop run: op.py does not load: unterminated string literal (detected at line 4) "
            f"({tmp_path}/op.py, line 4); waiting for a change\n"
        )
        edit(operator, OPERATOR.replace('VALUE = "one"', 'VALUE = "three"'))
        stdout.until("controller(s) starting")
        labelled("third", "three")
    finally:
        run.send_signal(signal.SIGTERM)
        code = run.wait(60)
    assert code == 0


STUCK_WITH_WEBHOOK = """\
import asyncio

import kubeloop
from kubeloop import kinds

VALUE = "one"


class Refuse:
    def validate_create(self, config_map):
        if config_map["metadata"]["name"].startswith("denied"):
            raise kubeloop.errors.Forbidden("refused by the webhook")


def setup(manager):
    async def reconcile(request):
        if request.name == "stuck":
            await asyncio.Event().wait()  # a reconcile that never ends on its own

    kubeloop.Builder(manager).for_(kinds.ConfigMap).complete(reconcile)
    kubeloop.WebhookBuilder(manager).for_(kinds.ConfigMap).with_validator(Refuse()).complete()
"""


def test_a_reload_cancels_a_stuck_reconcile_and_turns_the_webhooks_off_while_the_code_is_broken(
    tmp_path: pathlib.Path,
) -> None:
    operator = tmp_path / "op.py"
    write_operator(operator, STUCK_WITH_WEBHOOK)
    kubectl = str(KUBECTLS[-1])
    run = subprocess.Popen(
        [sys.executable, "-m", "kubeloop.cli.main", "run", "op.py", "--embedded", "--reload"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=writing_bytecode(tmp_path),
    )  # fmt: skip
    stdout, stderr = Lines(run.stdout), Lines(run.stderr)
    try:
        started = stdout.until("webhooks at")
        kubeconfig = started[0].split("kubeconfig=", 1)[1].strip()
        assert started[-1].startswith("kubeloop run: webhooks at 127.0.0.1:")  # loopback only

        def kube(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [kubectl, "--kubeconfig", kubeconfig, *args], capture_output=True, text=True, timeout=60
            )

        assert "refused by the webhook" in kube("create", "configmap", "denied-1").stderr
        assert kube("create", "configmap", "stuck").returncode == 0
        edit(operator, STUCK_WITH_WEBHOOK.replace('VALUE = "one"', 'VALUE = "two"'))
        reloading = stdout.until("controller(s) starting")
        assert reloading[:3] == [
            "kubeloop run: cancelling the reconciles in flight (1 of configmap) to reload\n",
            "kubeloop run: webhooks off until the operator is back: "
            "ValidatingWebhookConfiguration/validating-webhook-configuration\n",
            "kubeloop run: op.py changed: reloading\n",
        ], reloading
        stdout.until("webhooks at")  # the new code's webhooks installed again
        assert "refused by the webhook" in kube("create", "configmap", "denied-2").stderr

        edit(operator, STUCK_WITH_WEBHOOK.replace('VALUE = "one"', 'VALUE = "two'))
        stderr.until("does not load")
        # No operator serves the webhook now: writes of its kind go through, not "connection refused".
        allowed = kube("create", "configmap", "denied-3")
        assert allowed.returncode == 0, allowed.stderr
        # Fixed, and no longer stuck: the stop below need not wait out the graceful shutdown.
        edit(operator, STUCK_WITH_WEBHOOK.replace("await asyncio.Event().wait()", "return"))
        stdout.until("webhooks at")
        assert "refused by the webhook" in kube("create", "configmap", "denied-4").stderr
    finally:
        run.send_signal(signal.SIGTERM)
        code = run.wait(60)
    assert code == 0
