"""The documentation: every code block of the guides runs, and the docs name only files that
exist (``make docs``, part of ``make test``, builds the site with warnings as errors).

A guide is run as a reader would follow it, in a fresh directory (holding the files of the
guides before it too: the later guides build on the first one's operator):

- a block with a ``:caption:`` that is a path (``main.py``, ``deploy/rbac.yaml``) is a file the
  reader writes;
- a ``sh`` block captioned "in a second terminal" (or third) is a command left running: it is
  started in the background and the next block waits for its first line of output;
- any other ``sh`` block runs in bash with ``set -euo pipefail`` and must succeed; variables it
  exports carry over to the next block, as in the reader's shell.

At the end every background command gets SIGTERM and must exit 0 (a graceful stop).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from tests.conftest import ServerThread
from tests.kubectl_finder import kubectl_binaries, newest_kubectl

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
GUIDES = [
    "writing-an-operator",
    "testing-an-operator",
    "running-on-a-cluster",
    "webhooks",
    "starting-a-project",
    "a-custom-resource",
]
BLOCK = re.compile(
    r"^```(?:\{code-block\} *)?(?P<lang>[\w-]+)\n(?P<options>(?::\w+:[^\n]*\n)*)\n?(?P<code>.*?)^```$",
    re.M | re.S,
)
BACKGROUND = re.compile(r"^in an? (second|third|fourth|other) terminal$")
VENV_BIN = pathlib.Path(sys.executable).parent


@dataclass(frozen=True)
class Block:
    lang: str
    caption: str
    code: str


def blocks(guide: str) -> list[Block]:
    found = []
    for match in BLOCK.finditer((DOCS / "guides" / f"{guide}.md").read_text()):
        caption = ""
        for option in match["options"].splitlines():
            name, _, value = option[1:].partition(":")
            if name == "caption":
                caption = value.strip()
        found.append(Block(match["lang"], caption, match["code"]))
    return found


def is_file(block: Block) -> bool:
    return bool(block.caption) and block.lang != "sh"


def test_every_block_of_the_guides_is_a_file_or_a_command() -> None:
    for guide in GUIDES:
        found = blocks(guide)
        assert found, guide
        for block in found:
            runnable = is_file(block) or (
                block.lang == "sh" and (not block.caption or BACKGROUND.match(block.caption))
            )
            assert runnable, f"{guide}: a {block.lang} block captioned {block.caption!r} cannot be run"


def reader_environment(tmp_path: pathlib.Path, kubeconfig: pathlib.Path) -> dict[str, str]:
    """A reader's shell: kubeloop and python from the virtualenv, a kubectl, a home of its own and
    ``$KUBECONFIG`` naming "their cluster" (the session's server)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    newest = newest_kubectl()
    (tools / "kubectl").symlink_to(newest)
    home = tmp_path / "home"
    home.mkdir()
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "KUBE"))}
    return {
        **keep,
        "PATH": f"{VENV_BIN}:{tools}:{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "KUBECONFIG": str(kubeconfig),
        "PYTHONUNBUFFERED": "1",
        # A generated project's make targets use kubeloop's environment as it is (the Makefile
        # takes VENV from the environment so): that the first `make test` makes the project's
        # .venv from nothing is tests/cli/test_scaffold.py's README test; making it twice cost a minute.
        "VENV": str(VENV_BIN.parent),
    }


class Reader:
    """Follows a guide's commands in ``workdir``."""

    def __init__(self, workdir: pathlib.Path, env: dict[str, str]) -> None:
        self.workdir = workdir
        self.env = env
        self.state = workdir / ".reader-shell-state"
        self.state.write_text("")
        self.background: list[tuple[str, subprocess.Popen[bytes], pathlib.Path]] = []
        self.started = 0

    def write(self, block: Block) -> None:
        path = self.workdir / block.caption
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.code)

    def run(self, code: str) -> None:
        script = f"set -euo pipefail\nsource {self.state}\n{code}\nexport -p > {self.state}\n"
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, f"$ {code}\n{done.stdout}\n{done.stderr}"

    def start(self, code: str, *, ready: bytes = b"\n") -> None:
        """Start ``code`` in the background; return once its output holds ``ready`` (a line)."""
        self.started += 1
        log = self.workdir / f".background-{self.started}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["bash", "-c", f"source {self.state}\nexec {code.strip()}"],
                cwd=self.workdir,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.background.append((code, process, log))
        deadline = time.monotonic() + 60
        while ready not in log.read_bytes():
            assert process.poll() is None, f"$ {code}\nexited {process.returncode}:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"$ {code}\nprinted nothing in 60 s"
            time.sleep(0.05)

    def stop_all(self) -> None:
        """SIGTERM every background command, newest first; each must exit 0."""
        failures = []
        for code, process, log in reversed(self.background):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            if process.returncode != 0:
                failures.append(f"$ {code}\nexited {process.returncode}:\n{log.read_text()[-3000:]}")
        self.background.clear()
        assert not failures, "\n".join(failures)


@pytest.fixture
def reader_env(tmp_path: pathlib.Path, shared_server: ServerThread) -> dict[str, str]:
    if shutil.which("curl") is None:
        raise RuntimeError("curl is missing: make test installs Debian's curl (tests/debian_packages.py)")
    return reader_environment(tmp_path, shared_server.kubeconfig)


@pytest.mark.parametrize("guide", GUIDES)
def test_guide_runs_as_written(guide: str, tmp_path: pathlib.Path, reader_env: dict[str, str]) -> None:
    workdir = tmp_path / "project"
    workdir.mkdir()
    reader = Reader(workdir, reader_env)
    for earlier in GUIDES[: GUIDES.index(guide)]:
        for block in blocks(earlier):
            if is_file(block):
                reader.write(block)
    try:
        for block in blocks(guide):
            if is_file(block):
                reader.write(block)
            elif block.caption:
                reader.start(block.code)
            else:
                reader.run(block.code)
    finally:
        reader.stop_all()


def test_the_deployments_command_runs_the_operator(
    tmp_path: pathlib.Path, reader_env: dict[str, str]
) -> None:
    """The container command of the cluster guide's Deployment, run here with the guide's
    operator as /app: it starts, leads, serves its probes and stops gracefully."""
    app = tmp_path / "app"
    app.mkdir()
    for block in blocks("writing-an-operator"):
        if is_file(block):
            (app / block.caption).write_text(block.code)
    manifests = {b.caption: b.code for b in blocks("running-on-a-cluster") if is_file(b)}
    deployment = next(
        doc for doc in yaml.safe_load_all(manifests["deploy/operator.yaml"]) if doc["kind"] == "Deployment"
    )
    for doc in yaml.safe_load_all(manifests["deploy/rbac.yaml"]):
        if doc["kind"] == "Namespace":
            namespace = doc["metadata"]["name"]
            subprocess.run(["kubectl", "create", "namespace", namespace], env=reader_env, capture_output=True)
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    # Its ports, as a pod has them to itself, are free ones here: the machine is shared with
    # other tests' servers and pods (a pod of the process node listens on its address's :8080).
    ports = {f":{container['readinessProbe']['httpGet']['port']}": f":{_free_port()}"}
    ports.update((f":{p['containerPort']}", f":{_free_port()}") for p in container.get("ports") or ())
    command = [str(app) if part == "/app" else ports.get(part, part) for part in container["command"]]
    probe_port = int(ports[f":{container['readinessProbe']['httpGet']['port']}"][1:])
    reader = Reader(tmp_path, reader_env)
    reader.start(" ".join(f"'{part}'" for part in command))
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{probe_port}/readyz", timeout=5) as answer:
                    assert answer.read() == b"ok"
                    break
            except OSError:
                assert time.monotonic() < deadline, reader.background[0][2].read_text()
                time.sleep(0.2)
    finally:
        reader.stop_all()


# ------------------------------------------------------------------ the site and its references


PATH_LIKE = re.compile(
    r"`((?:src|tests|docs|bench|examples|scripts|\.ci)/[\w./-]+|[\w-]+\.(?:py|md|toml|yaml))`"
)


def test_the_docs_name_only_files_that_exist() -> None:
    """Every repository path the README and docs mention exists (a bare ``name.py`` somewhere)."""
    everything = {p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*") if ".venv" not in p.parts}
    names = {pathlib.PurePosixPath(p).name for p in everything}
    guide_files = {b.caption for g in GUIDES for b in blocks(g) if is_file(b)}
    missing = []
    for page in [ROOT / "README.md", *DOCS.rglob("*.md")]:
        for mention in PATH_LIKE.findall(page.read_text()):
            mention = mention.rstrip("/.")
            if mention in guide_files or pathlib.PurePosixPath(mention).name in guide_files:
                continue  # a file the guide has the reader write
            known = mention in everything if "/" in mention else mention in names
            if not known:
                missing.append(f"{page.relative_to(ROOT)}: {mention}")
    assert not missing, missing


# ------------------------------------------------------------------ the guide's operator, attacked


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Durability is what this proves; kubectl versions are tests/apiserver/test_kubectl.py's.
@pytest.mark.parametrize("kubectl", kubectl_binaries()[-1:], ids=lambda path: path.name)
def test_the_guides_operator_on_a_durable_server_across_a_sigkill(
    kubectl: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """The writing guide's operator against `kubeloop apiserver --data-dir`, driven by kubectl:
    it converges, the server is SIGKILLed and restarted on its data, and the operator — which
    never restarted — acts on later changes, restores what is deleted, and reports bad input
    (a word, a 5,000-digit count) without losing what it made."""
    app = tmp_path / "app"
    app.mkdir()
    for block in blocks("writing-an-operator"):
        if is_file(block):
            (app / block.caption).write_text(block.code)
    kubeconfig, port = tmp_path / "kubeconfig", _free_port()
    server_command = (
        f"kubeloop apiserver --data-dir {tmp_path / 'data'} --port {port} --kubeconfig {kubeconfig}"
    )
    env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}", "PYTHONUNBUFFERED": "1"}
    env.pop("KUBECONFIG", None)

    def run(*args: str) -> str:
        done = subprocess.run(
            [str(kubectl), "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def pods_allowed() -> str | None:
        quota = ["get", "resourcequota", "team-quota", "-n", "team-x", "-o", "jsonpath={.spec.hard.pods}"]
        done = subprocess.run(
            [str(kubectl), "--kubeconfig", str(kubeconfig), *quota],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.stdout if done.returncode == 0 else None

    def wait_for(check: Any, what: str) -> None:
        deadline = time.monotonic() + 60
        while not check():
            assert time.monotonic() < deadline, what
            time.sleep(0.1)

    reader = Reader(tmp_path, env)
    reader.start(server_command, ready=b" ready at ")
    server = reader.background[-1][1]
    reader.start(f"kubeloop run {app} --kubeconfig {kubeconfig}")
    try:
        run("create", "namespace", "team-x")
        run("label", "namespace", "team-x", "example.com/team=x-devs")
        wait_for(lambda: pods_allowed() == "20", "the quota was not made")

        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        reader.background = [entry for entry in reader.background if entry[1] is not server]
        reader.start(server_command, ready=b" ready at ")  # the same data directory and port

        assert pods_allowed() == "20"  # acknowledged before the kill, there after it
        run("annotate", "namespace", "team-x", "example.com/max-pods=7")
        wait_for(lambda: pods_allowed() == "7", "the operator did not act after the server came back")
        run("delete", "resourcequota", "team-quota", "-n", "team-x")
        wait_for(lambda: pods_allowed() == "7", "the deleted quota did not come back")

        run("annotate", "--overwrite", "namespace", "team-x", "example.com/max-pods=lots")
        warned = ["get", "events", "-n", "default", "--field-selector", "reason=InvalidMaxPods", "-o", "name"]
        wait_for(lambda: run(*warned).strip() != "", "no Warning event for a bad count")
        assert pods_allowed() == "7"  # a terminal error changes nothing

        # Bad input to the server itself: a Status naming the field, nothing half-written.
        bad = subprocess.run(
            [str(kubectl), "--kubeconfig", str(kubeconfig), "create", "namespace", "Team_Y"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert bad.returncode != 0 and "metadata.name" in bad.stderr and "Invalid value" in bad.stderr
        notes = tmp_path / "notes.json"  # 300 KB: over the 256 KiB annotations limit
        notes.write_text(json.dumps({"metadata": {"annotations": {"example.com/notes": "x" * 300_000}}}))
        patch = ["patch", "namespace", "team-x", "--type", "merge", "--patch-file", str(notes)]
        too_long = subprocess.run(
            [str(kubectl), "--kubeconfig", str(kubeconfig), *patch],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert too_long.returncode != 0 and "metadata.annotations" in too_long.stderr
        assert "example.com/notes" not in run("get", "namespace", "team-x", "-o", "json")

        huge = "9" * 5000
        run("annotate", "--overwrite", "namespace", "team-x", f"example.com/max-pods={huge}")
        wait_for(lambda: pods_allowed() == huge, "a huge count was not applied")
    finally:
        reader.stop_all()


def test_the_architecture_page_stays_a_map() -> None:
    """docs/architecture.md is the map a newcomer reads first: at most 250 lines; detail goes to
    the package docstrings and docs/design/."""
    lines = (DOCS / "architecture.md").read_text().count("\n")
    assert lines <= 250, f"docs/architecture.md has {lines} lines"
