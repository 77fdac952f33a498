"""The `kubeloop` command: demo --once converges and exits 0; --help lists the commands."""

from __future__ import annotations

import subprocess
import sys


def test_demo_once_shows_the_server_serving() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kubeloop.cli.main", "demo", "--once"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "embedded API server ready at https://127.0.0.1:" in out
    assert "created Deployment" in out and "created ConfigMap" in out
    assert "replicas=3 generation=2" in out
    assert "ADDED Deployment/hello" in out and "MODIFIED Deployment/hello" in out


def test_help_lists_commands() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kubeloop.cli.main", "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    assert "apiserver" in result.stdout and "demo" in result.stdout
