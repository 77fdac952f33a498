"""Every Python block of the README runs as a user would run it: a script with ``python`` against
the shared server (``$KUBECONFIG``), an operator (a block defining ``setup``) with ``kubeloop run``
and kubectl driving it, a custom resource model with its CRD printed and piped to kubectl apply.
A block that fits none of these fails the test."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.conftest import ServerThread
from tests.examples.test_hello_label import REPLICASET, kubectl, stop_operator, wait_for_label

ROOT = pathlib.Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^(?P<indent> *)```python\n(?P<code>.*?)^(?P=indent)```", re.S | re.M)


def python_blocks(path: pathlib.Path) -> list[str]:
    blocks = []
    for match in BLOCK.finditer(path.read_text()):
        indent = len(match["indent"])
        blocks.append("".join(line[indent:] for line in match["code"].splitlines(keepends=True)))
    return blocks


BLOCKS = python_blocks(ROOT / "README.md")


def test_the_readme_has_python_blocks() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block(
    index: int, shared_server: ServerThread, namespace: str, tmp_path: pathlib.Path
) -> None:
    code = BLOCKS[index]
    script = tmp_path / "main.py"
    script.write_text(code)
    kubeconfig = str(shared_server.kubeconfig)
    env = {**os.environ, "KUBECONFIG": kubeconfig, "PYTHONUNBUFFERED": "1"}
    if "kubeloop.CustomResource" in code:
        # The model's CRD, printed as YAML, is what the user pipes to kubectl apply.
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        applied = kubectl(kubeconfig, "apply", "-f", "-", stdin=done.stdout)
        assert "customresourcedefinition.apiextensions.k8s.io/backups.example.com" in applied
        backup = "apiVersion: example.com/v1\nkind: Backup\nmetadata: {name: b}\nspec: {schedule: daily}\n"
        kubectl(kubeconfig, "apply", "-n", namespace, "-f", "-", stdin=backup)
        assert (
            kubectl(kubeconfig, "get", "-n", namespace, "backups", "-o", "jsonpath={.items[0].spec.keep}")
            == "7"
        )
        return
    if "def setup(" not in code:
        kubectl(kubeconfig, "create", "configmap", "readme", "-n", "default", "--from-literal=k=v")
        try:
            done = subprocess.run(
                [sys.executable, str(script)],
                capture_output=True,
                text=True,
                timeout=60,
                env=env,
                cwd=tmp_path,
            )
            assert done.returncode == 0, done.stderr
            assert "readme ['k']" in done.stdout
        finally:
            kubectl(kubeconfig, "delete", "configmap", "readme", "-n", "default")
        return
    process = subprocess.Popen(
        [sys.executable, "-m", "kubeloop.cli.main", "run", str(tmp_path), "--kubeconfig", kubeconfig],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        kubectl(kubeconfig, "apply", "-n", namespace, "-f", "-", stdin=json.dumps(REPLICASET))
        wait_for_label(kubeconfig, namespace, "world")
    finally:
        output = stop_operator(process)
    assert "1 controller(s) starting" in output
