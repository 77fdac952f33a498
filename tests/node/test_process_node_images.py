"""Images an installed package declares (entry-point group ``kubeloop.images``) run on the
process node with no ``--local-image``: the function runs with the container's args as its
argv, its return value the exit code; a ``--local-image`` of the same image wins."""

from __future__ import annotations

import json
import pathlib
import time

import pytest

from kubeloop.node.localimages import LocalImages
from kubeloop.node.simulation import SimulationOptions
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import start_server


@pytest.fixture
def installed(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A package installed on the path that declares the image example.com/greeter."""
    site = tmp_path / "site"
    (site / "greeter").mkdir(parents=True)
    (site / "greeter" / "__init__.py").write_text(
        "import sys\n\ndef run():\n    print('hello', *sys.argv[1:])\n    return 3\n"
    )
    info = site / "greeter-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: greeter\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[kubeloop.images]\nexample.com/greeter = greeter:run\n")
    monkeypatch.syspath_prepend(str(site))
    return "example.com/greeter"


def test_an_installed_image_is_found_and_a_named_one_wins(installed: str) -> None:
    found = LocalImages().with_installed().resolve(f"{installed}:1.2")
    assert found is not None and found.entrypoint is not None and "greeter" in found.entrypoint[-1]
    named = LocalImages.parse([f"{installed}=/bin/echo named"]).with_installed().resolve(installed)
    assert named is not None and named.entrypoint == ("/bin/echo", "named")


def test_an_installed_image_runs_without_being_named(installed: str, tmp_path: pathlib.Path) -> None:
    options = SimulationOptions(pod_start_seconds=0.1, config_retry_seconds=0.1, pods_dir=tmp_path / "pods")
    server = start_server(simulate=True, simulation=options)
    try:
        kubectl = Kubectl(KUBECTLS[-1], server.kubeconfig, tmp_path)
        kubectl("run", "greeter", f"--image={installed}:1.2", "--restart=Never", "--", "world")
        while (pod := json.loads(kubectl("get", "pod", "greeter", "-o", "json").stdout))["status"].get(
            "phase"
        ) not in ("Succeeded", "Failed"):
            time.sleep(0.05)
        terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (pod["status"]["phase"], terminated["exitCode"]) == ("Failed", 3)
        assert kubectl("logs", "greeter").stdout == "hello world\n"
    finally:
        server.stop()
