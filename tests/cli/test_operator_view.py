"""``kubeloop run --view``: the live view of any operator, rendered as a terminal of 100×30 shows
it — the controllers with their counters, the latest reconciles with what they wrote, the
events with warnings first — and still shows the controllers and the events when there are far
more reconciles and events than rows. Run as a user runs it, the view is printed while the
operator works, and SIGTERM ends it with 0."""

from __future__ import annotations

import io
import os
import pathlib
import signal
import subprocess
import sys

from rich.console import Console

import kubeloop
from kubeloop.cli.operatorview import render_operator_view
from kubeloop.client.rest import APIClient
from kubeloop.models import core_v1, meta_v1
from kubeloop.testing import eventually, settled


def shown(manager: kubeloop.Manager, events: list[kubeloop.Obj]) -> list[str]:
    console = Console(width=100, height=30, file=io.StringIO(), record=True, color_system=None)
    console.print(render_operator_view(manager, events, header="kubeloop run — test", height=30))
    return console.export_text().rstrip("\n").split("\n")


def event(index: int, kind: str, namespace: str) -> kubeloop.Obj:
    return {
        "type": kind, "reason": f"Reason{index}", "message": f"message {index}",
        "involvedObject": {"kind": "ConfigMap", "name": f"c{index}", "namespace": namespace},
        "lastTimestamp": f"2026-01-01T00:00:{index % 60:02d}Z",
    }  # fmt: skip


async def test_the_view_shows_controllers_reconciles_and_events_in_100_by_30(
    kube_client: APIClient, kube_namespace: str
) -> None:
    manager = kubeloop.Manager(kube_client, namespace=kube_namespace)

    async def copy(request: kubeloop.Request) -> None:
        wanted = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": request.name, "namespace": request.namespace}}  # fmt: skip
        await kubeloop.create_or_update(manager.client, wanted, lambda obj: obj.update(stringData={"a": "b"}))

    kubeloop.Builder(manager).named("copier").for_(core_v1.ConfigMap).complete(copy)
    kubeloop.Builder(manager).named("idle").for_(core_v1.Service).complete(lambda request: None)
    async with manager:
        await kube_client.create(core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name="one", namespace=kube_namespace)))
        await eventually(lambda: manager.controllers["copier"].results["success"] >= 1)
        await settled(manager)
        lines = shown(manager, [event(1, "Normal", kube_namespace), event(2, "Warning", kube_namespace)])
    text = "\n".join(lines)
    assert len(lines) <= 30
    assert lines[0] == "kubeloop run — test"
    copier = next(line for line in lines if line.startswith("copier "))
    assert copier.split()[:6] == ["copier", "1", "0", "0", "0", "0"]
    assert any(line.split()[:1] == ["idle"] for line in lines)
    assert f"{kube_namespace}/one" in text and "Secret/one created" in text
    warning = text.index("Reason2")
    assert warning < text.index("Reason1")  # warnings first


async def test_at_100_by_30_many_reconciles_and_events_still_leave_room(
    kube_client: APIClient, kube_namespace: str
) -> None:
    manager = kubeloop.Manager(kube_client, namespace=kube_namespace)
    kubeloop.Builder(manager).for_(core_v1.ConfigMap).complete(lambda request: None)
    async with manager:
        for index in range(40):
            await kube_client.create(core_v1.ConfigMap(metadata=meta_v1.ObjectMeta(name=f"m{index}", namespace=kube_namespace)))  # fmt: skip
        await eventually(lambda: manager.controllers["configmap"].results["success"] >= 40)
        lines = shown(manager, [event(i, "Warning" if i % 7 == 0 else "Normal", kube_namespace) for i in range(60)])
    assert len(lines) <= 30
    titles = [line.strip() for line in lines if line.strip() in ("Controllers", "Latest reconciles", "Warnings and events")]
    assert titles == ["Controllers", "Latest reconciles", "Warnings and events"]
    after = lines[[line.strip() for line in lines].index("Warnings and events") + 2 :]
    assert after and all("Warning" in line for line in after[:3])  # the newest warnings shown


def test_run_view_prints_the_view_and_stops_on_sigterm(tmp_path: pathlib.Path) -> None:
    (tmp_path / "op.py").write_text(
        "import kubeloop\nfrom kubeloop import kinds\n\n\ndef setup(manager):\n"
        "    kubeloop.Builder(manager).named('watcher').for_(kinds.ConfigMap).complete(lambda r: None)\n"
    )
    run = subprocess.Popen(
        [sys.executable, "-m", "kubeloop.cli.main", "run", "op.py", "--embedded", "--view"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HOME": str(tmp_path), "COLUMNS": "100", "LINES": "30"},
    )  # fmt: skip
    assert run.stdout is not None
    try:
        seen = []
        while not any(line.startswith("watcher ") for line in seen):
            line = run.stdout.readline()
            assert line, seen
            seen.append(line)
        assert any(line.strip() == "Controllers" for line in seen)
    finally:
        run.send_signal(signal.SIGTERM)
        assert run.wait(60) == 0
