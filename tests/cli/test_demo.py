"""The `kubeloop` command as a user runs it: `demo --once` brings the agent platform up on the
embedded server (its run webhook included) and exits 0 well within 30 s, or exits 1 naming what
did not converge; the live demo's printed curl command starts a run, and an output nobody reads
holds up the view alone; in a terminal the view is redrawn in place; --help lists the commands;
the commands run on uvloop."""

from __future__ import annotations

import array
import asyncio
import fcntl
import json
import os
import pathlib
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import termios
import time
import urllib.request
from typing import Any

import pytest

from kubeloop.cli import demo as demo_module
from kubeloop.cli import eventloop
from kubeloop.client.rest import APIClient
from kubeloop.testing import pod_processes
from tests.apiserver.test_kubectl import KUBECTLS

#: The demos run a dozen processes each: one at a time (on one worker), beside other tests.
pytestmark = pytest.mark.xdist_group("demo")

AGENTS = pathlib.Path(__file__).parents[2] / "examples" / "agents"
WIDE = {**os.environ, "COLUMNS": "220"}


def _interruptible() -> None:
    """In the demo's process, before it runs: Ctrl-C (SIGINT) as a terminal gives it. A test run
    started in the background (a shell's ``&``) hands its children SIGINT ignored, and the demo,
    as any Python program, would keep it so."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


#: How long `--once` may take here: a bound for a machine shared with other tests' servers and
#: pods (the demo runs a dozen processes), not a measure of speed (`--once` alone converges in
#: about 10 s); exit 0 is convergence.
ONCE_TIMEOUT = ["--timeout", "100"]


@pytest.mark.timeout(500)
def test_demo_once_converges_and_again_on_its_data_dir(tmp_path: pathlib.Path) -> None:
    """`--once` gives up with exit 1 after its own --timeout: exit 0 is convergence.
    Piped, with no COLUMNS, the view is printed at the width its content needs: nothing is cut.
    On a durable server (``--data-dir``), started again with an operator whose samples add an
    Agent that cannot converge, it stops once all else has converged again, before its timeout,
    naming that Agent alone as what did not converge; its chat message is taken again as the same run
    (``_forget_earlier_webhooks`` has the proof of the stale webhooks' removal)."""
    demo = [sys.executable, "-m", "kubeloop.cli.main", "demo", "--once", "--data-dir", str(tmp_path / "data")]
    once = [*demo, *ONCE_TIMEOUT]
    result = subprocess.run(
        once,
        capture_output=True,
        text=True,
        timeout=240,
        env={key: value for key, value in os.environ.items() if key != "COLUMNS"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "…" not in out and max(len(line) for line in out.splitlines()) > 80
    assert "embedded API server at https://127.0.0.1:" in out and "kubeconfig: " in out
    assert "installed 8 CRDs" in out and "kubeloop demo: converged in" in out
    for agent in ("triage", "writer", "reviewer", "sre-oncall", "sre-postmortem"):
        assert f"│ {agent} " in out
    # The runs ran the agent runner against the scripted model: three tool calls for triage
    # (memory_search and the MCP server's namespace_events, then memory_store), their tokens
    # and cost estimated at the runtime's prices.
    model_line = "model: scripted model (Service scripted-model: replies that call the MCP and memory tools"
    assert model_line in out
    assert re.search(
        r"│ first-question +│ triage +│ kubectl +│ Succeeded +│ Completed +│ \S+ +│ \d+ +│ 3 +│ 0\.\d{6} USD +│ "
        r"\(scripted model\) On 'Why does the payments pod keep restarting\?': .*recent events",
        out,
    ), out
    webhook_run = re.search(r"posted delivery demo-1 to the run webhook \S+: AgentRun (webhook-\w+)", out)
    assert webhook_run is not None, out
    assert re.search(rf"│ {webhook_run[1]} +│ writer +│ webhook +│ Succeeded .*\(scripted model\) On 'Draft", out), out
    assert "heartbeat" in out and "sre-standup" in out
    assert "│ agentrun " in out  # the controllers' table
    # The policy refuses an agent, saying why; a chat message becomes a run with a reply, and
    # memory; one from a user the channel does not take is refused.
    assert (
        'policy: Agent rogue refused: admission webhook "vagent-v1alpha1.kb.io" denied the request: '
        'Agent.agents.kubeloop.dev "rogue" is invalid: spec.model.provider: Invalid value: "unknown-llm": '
        "not allowed by AgentPolicy demo-rules"
    ) in out
    chat_run = re.search(r"chat: alice on triage's webhook channel .* became AgentRun (channel-\w+)", out)
    assert chat_run is not None, out
    assert re.search(rf"│ {chat_run[1]} +│ triage +│ webhook chat, alice +│ Succeeded .* On 'why is checkout slow\?'", out), out
    assert "chat: mallory on triage's webhook channel" in out and "mallory is not among the channel's allowed users" in out
    assert re.search(r"│ triage .*│ webhook Connected +│ \d+ B ", out), out
    # agent-sandbox (examples/agent_sandbox) runs beside the operator: a run in a Sandbox.
    assert "installed agent-sandbox from " in out and "the Sandbox CRD and its controller" in out
    assert re.search(r"│ isolated-tests +│ writer \(sandbox\) +│ kubectl +│ Succeeded .*\(scripted model\)", out), out
    assert "│ sandbox " in out  # its controller, on the demo's manager
    assert result.stderr == ""  # nothing logged beside the view
    operator = tmp_path / "agents"
    shutil.copytree(AGENTS, operator, ignore=shutil.ignore_patterns("__pycache__"))
    # An Agent the namespace's policy allows (its runtime and provider; the policy is stored from
    # the first run) whose Service's name is taken by another's: it stays not Ready.
    (operator / "config" / "samples" / "07-broken.yaml").write_text(
        "apiVersion: v1\nkind: Service\nmetadata: {name: orphan}\nspec: {ports: [{port: 80}]}\n---\n"
        "apiVersion: agents.kubeloop.dev/v1alpha1\nkind: Agent\nmetadata: {name: orphan}\n"
        "spec: {runtimeRef: python-agent, model: {provider: openai, name: gpt-4o}}\n"
    )
    # The orphan never converges: once the rest has, the demo stops at once and names it alone
    # (well within the timeout, which is there for a demo that hangs).
    broken = [*demo, *ONCE_TIMEOUT, "--operator", str(operator)]
    again = subprocess.run(broken, capture_output=True, text=True, timeout=240, env=WIDE)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "kubeloop demo: did not converge:\n" in again.stdout, again.stdout
    late = again.stdout.split("kubeloop demo: did not converge:\n")[1].splitlines()
    took = re.search(r"kubeloop demo: not converged after ([\d.]+)s", again.stdout)
    assert took is not None and float(took[1]) < float(ONCE_TIMEOUT[1]), again.stdout  # not waited out
    assert late == ["  - Agent orphan: Service orphan exists and is not controlled by Agent orphan: left alone"]
    assert f"became AgentRun {chat_run[1]}" in again.stdout
    assert again.stderr == ""  # no webhook call failing closed, nothing retried


async def test_an_earlier_demos_webhooks_are_forgotten(kube_client: APIClient) -> None:
    """Configurations calling a URL (an earlier demo's port) go; one calling a Service stays."""
    def configuration(name: str, client_config: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{"name": "v.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                          "failurePolicy": "Ignore", "clientConfig": client_config,
                          "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["CREATE"],
                                     "resources": ["nothings"]}]}],
        }  # fmt: skip

    stale = configuration("demo-stale", {"url": "https://127.0.0.1:1/validate"})
    kept = configuration("demo-kept", {"service": {"name": "hooks", "namespace": "default", "path": "/v"}})
    for obj in (stale, kept):
        await kube_client.create(obj)
    await demo_module._forget_earlier_webhooks(kube_client)
    names = {c["metadata"]["name"] for c in (await kube_client.list(demo_module.VALIDATING)).items}
    assert "demo-stale" not in names and "demo-kept" in names
    await kube_client.delete(kept)


def test_help_lists_commands() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kubeloop.cli.main", "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    assert "apiserver" in result.stdout and "demo" in result.stdout


@pytest.mark.timeout(300)
def test_the_demo_serves_until_stopped_while_nobody_reads_its_view(tmp_path: pathlib.Path) -> None:
    """Without --once (and without a terminal) the view is printed again when it changes; the curl
    command it prints starts a run (posted again: the same run). Then `kubeloop demo | less` with
    less paused: the pipe fills and stays full, yet the server answers and the operator works —
    the runs finish, ``kubectl logs job/<run>`` is a run's transcript without the model's key.
    SIGTERM (a process manager's stop) ends it as Ctrl-C does, though a view is stuck in a write
    nobody will read: the operator, the server and every pod's process stop, and it exits 0."""
    errors = tmp_path / "stderr.txt"
    demo = subprocess.Popen(
        [sys.executable, "-m", "kubeloop.cli.main", "demo"],
        stdout=subprocess.PIPE,
        stderr=errors.open("w"),  # a file: a full stderr pipe would hold up the demo itself
        text=True,
        env={**WIDE, "TMPDIR": str(tmp_path)},  # the pods' folders (and processes) are found by it
        pipesize=4096,  # smaller than one view
        restore_signals=True,
        preexec_fn=_interruptible,
    )
    try:
        assert demo.stdout is not None
        seen = []
        while line := demo.stdout.readline():  # until the first view's controllers (or its end)
            seen.append(line)
            if line.startswith("Controllers"):
                break
        assert any(line.startswith("Agents") for line in seen), "".join(seen)
        curl = re.search(r"curl -X POST (\S+) -H 'Authorization: Bearer (\S+)'", "".join(seen))
        assert curl is not None, "".join(seen)
        body = {"agent": "triage", "task": "Is the ingress healthy?"}
        status, first = _post(curl[1], curl[2], body)
        assert status == 202 and first["namespace"] == "demo"
        # Posted again (a retry): the same run, reported a duplicate once it is made.
        for _ in range(100):
            status, again = _post(curl[1], curl[2], body)
            if status == 200:
                break
            assert (status, again) == (202, first)
            time.sleep(0.1)
        assert (status, again) == (200, {**first, "duplicate": True})
        kubeconfig = re.search(r"kubeconfig: (\S+)", "".join(seen))
        assert kubeconfig is not None

        # Nothing reads the view from here on: wait until the pipe is full, so that the demo's
        # next write of its view blocks (the runs' progress changes the view).
        def unread() -> int:
            assert demo.stdout is not None
            count = array.array("i", [0])
            fcntl.ioctl(demo.stdout.fileno(), termios.FIONREAD, count)
            return count[0]

        while unread() < 4096:
            time.sleep(0.01)
        kubectl = [str(KUBECTLS[-1]), "--kubeconfig", kubeconfig[1], "-n", "demo"]

        def kubectl_out(*args: str) -> str:
            return subprocess.run([*kubectl, *args], capture_output=True, text=True, check=True, timeout=60).stdout

        for run in ("first-question", str(first["run"])):
            while kubectl_out("get", "agentrun", run, "-o", "jsonpath={.status.phase}") not in ("Succeeded", "Failed"):
                time.sleep(0.2)  # the run (the test's timeout bounds it)
            status = json.loads(kubectl_out("get", "agentrun", run, "-o", "json"))["status"]
            assert status["phase"] == "Succeeded", f"{run}: {status.get('reason')}: {status.get('message')}"
        transcript = [json.loads(line) for line in kubectl_out("logs", "job/first-question").splitlines()]
        assert [line["event"] for line in transcript] == ["start", "model", "tool", "tool", "model", "tool", "model", "end"]
        tools = [line["name"] for line in transcript if line["event"] == "tool"]
        assert tools == ["memory_search", "namespace_events", "memory_store"]
        assert transcript[-1]["result"].startswith("(scripted model) On 'Why does the payments pod")
        assert transcript[-1]["usage"]["toolCalls"] == 3
        assert "demo-not-a-real-key" not in kubectl_out("logs", "job/first-question")
        assert unread() >= 4096  # the view still stuck meanwhile
        assert pod_processes(tmp_path)  # the agents, the model, the MCP server: running
        demo.send_signal(signal.SIGTERM)
        try:
            code = demo.wait(30)
        except subprocess.TimeoutExpired:
            demo.kill()
            raise AssertionError(f"the demo did not stop on SIGTERM:\n{errors.read_text()[-5000:]}") from None
        assert code == 0
        assert pod_processes(tmp_path) == []
    finally:
        demo.kill()
        demo.wait()


def _post(url: str, token: str, body: dict[str, str]) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "X-Delivery-ID": "my-1"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.status, json.loads(answer.read())


@pytest.mark.timeout(300)
def test_the_demo_in_a_terminal_redraws_its_view_until_ctrl_c() -> None:
    """In a terminal (a pty here, as `make demo` runs it) the view is one live display redrawn in
    place, converging to ready agents and a finished run; SIGINT exits 0."""
    controller, terminal = pty.openpty()
    demo = subprocess.Popen(
        [sys.executable, "-m", "kubeloop.cli.main", "demo"],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env={**WIDE, "TERM": "xterm-256color", "LINES": "80"},
        restore_signals=True,
        preexec_fn=_interruptible,
    )
    os.close(terminal)
    screen = bytearray()

    def read_for(seconds: float, until: tuple[bytes, ...] = ()) -> str:
        """What the terminal shows meanwhile (read all the time, as a terminal does)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and demo.poll() is None:
            if select.select([controller], [], [], 0.2)[0]:
                try:
                    screen.extend(os.read(controller, 65536))
                except OSError:  # the demo closed the terminal
                    break
            if until and all(part in screen for part in until):
                break
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.decode(errors="replace"))

    try:
        text = read_for(200, until=(b"Succeeded", b"DeploymentReady"))
        assert "Succeeded" in text and "DeploymentReady" in text, text[-3000:]
        assert b"\x1b[" in screen  # styled and redrawn in place (cursor movement)
        # The runs may have finished before the first frame (pods start fast): a second frame
        # is what shows the view is redrawn (the test's timeout bounds the wait).
        while text.count("kubeloop demo — https://") < 2 and demo.poll() is None:
            text = read_for(0.5)
        assert text.count("kubeloop demo — https://") > 1  # more than one frame of the view
        demo.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 30
        while demo.poll() is None and time.monotonic() < deadline:
            read_for(0.5)
        assert demo.returncode == 0
    finally:
        demo.kill()
        demo.wait()
        os.close(controller)


def test_the_commands_run_on_uvloop_unless_asked_for_asyncios_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    async def loop_module() -> str:
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop()).__module__

    monkeypatch.delenv(eventloop.EVENT_LOOP_VARIABLE, raising=False)
    assert eventloop.run(loop_module()).startswith("uvloop")
    monkeypatch.setenv(eventloop.EVENT_LOOP_VARIABLE, "asyncio")
    assert eventloop.run(loop_module()).startswith("asyncio")
