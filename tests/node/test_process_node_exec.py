"""``pods/exec`` on the process node, with the official client's checks (its e2e test_pod_apis
and exit-code tests, ported) and kubectl 1.33 and 1.35 over WebSocket: output on its channels,
input, exit codes, a terminal with its size, kubectl cp; RBAC (``create`` on ``pods/exec``);
upstream's 400s; kubectl 1.27, which speaks only SPDY, told so."""

# ruff: noqa: F811  (the process node's fixtures are imported, then requested by name)

from __future__ import annotations

import asyncio
import concurrent.futures
import fcntl
import json
import os
import pathlib
import pty
import select
import struct
import subprocess
import termios
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kubeloop.apiserver.http.connections import ConnectionTimeouts
from kubeloop.node.simulation import SimulationOptions
from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import ServerThread, start_server
from tests.node.test_process_node import (  # noqa: F401  (fixtures)
    ECHO,
    api,
    node,
    pod_json,
    pods_dir,
)
from tests.node.test_process_node_volumes import apply, pod

kubernetes = pytest.importorskip("kubernetes")
from kubernetes.stream import stream  # noqa: E402
from kubernetes.stream.ws_client import ERROR_CHANNEL  # noqa: E402


@pytest.fixture(params=KUBECTLS[1:], ids=[p.name for p in KUBECTLS[1:]])
def kubectl(request: pytest.FixtureRequest, node: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    """The kubectls that speak WebSocket (1.30 and later)."""
    return Kubectl(request.param, node.kubeconfig, tmp_path)


@pytest.fixture
def newest(node: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    """One kubectl, for tests whose client is another."""
    return Kubectl(KUBECTLS[-1], node.kubeconfig, tmp_path)


@pytest.fixture
def core(node: ServerThread) -> Iterator[Any]:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(node.kubeconfig), client_configuration=configuration)
    with kubernetes.client.ApiClient(configuration) as client:
        yield kubernetes.client.CoreV1Api(client)


def running(kubectl: Kubectl, name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    apply(kubectl, pod(name, namespace, "exec sleep 600", restartPolicy="Always", **spec))
    kubectl("wait", "-n", namespace, "--for=condition=Ready", f"pod/{name}", "--timeout=30s")
    return pod_json(kubectl, name, namespace)


# ---------------------------------------------------------------------------- the official client


def test_the_official_clients_pod_apis(newest: Kubectl, core: Any, namespace: str) -> None:
    running(newest, "busybox", namespace)
    out = stream(core.connect_get_namespaced_pod_exec, "busybox", namespace,
                 command=["/bin/sh", "-c", "for i in $(seq 1 3); do date; done"],
                 stderr=False, stdin=False, stdout=True, tty=False)  # fmt: skip
    assert len(out.splitlines()) == 3
    out = stream(core.connect_get_namespaced_pod_exec, "busybox", namespace, command=["date"],
                 stderr=False, stdin=False, stdout=True, tty=False)  # fmt: skip
    assert len(out.splitlines()) == 1
    shell = stream(core.connect_post_namespaced_pod_exec, "busybox", namespace, command=["/bin/sh"],
                   stderr=True, stdin=True, stdout=True, tty=False, _preload_content=False)  # fmt: skip
    shell.write_stdin("echo test string 1\n")
    assert shell.readline_stdout(timeout=30) == "test string 1"
    assert not shell.peek_stderr()
    shell.write_stdin("echo test string 2 >&2\n")
    assert shell.readline_stderr(timeout=30) == "test string 2"
    assert not shell.peek_stdout()
    shell.write_stdin("exit\n")
    while not (said := shell.read_channel(ERROR_CHANNEL)):
        shell.update(timeout=1)
    assert json.loads(said)["status"] == "Success"
    shell.update(timeout=5)
    assert not shell.is_open()


def test_the_official_client_reads_exit_codes(newest: Kubectl, core: Any, namespace: str) -> None:
    running(newest, "codes", namespace)
    for code in (0, 1, 2, 3, 130):
        session = stream(core.connect_get_namespaced_pod_exec, "codes", namespace,
                         command=["sh", "-c", f"exit {code}"], stderr=True, stdin=False, stdout=True,
                         tty=False, _preload_content=False)  # fmt: skip
        session.run_forever(timeout=30)
        assert session.returncode == code


def test_the_official_client_closes_stdin_over_v5(newest: Kubectl, core: Any, namespace: str) -> None:
    running(newest, "closer", namespace)
    session = stream(core.connect_get_namespaced_pod_exec, "closer", namespace, command=["cat"],
                     stderr=True, stdin=True, stdout=True, tty=False, _preload_content=False)  # fmt: skip
    session.write_stdin("all of it\n")
    session.close_channel(0)  # v5: stdin has ended, so cat ends
    session.run_forever(timeout=30)
    assert session.read_stdout() == "all of it\n"
    assert session.returncode == 0


# ---------------------------------------------------------------------------- kubectl


def test_kubectl_exec_streams_and_returns_the_exit_code(kubectl: Kubectl, namespace: str) -> None:
    running(kubectl, "shell", namespace)
    ns = ["-n", namespace]
    done = kubectl("exec", "shell", *ns, "--", "sh", "-c", 'echo out; echo err >&2; echo "$HOSTNAME"; exit 3',
                   check=False)  # fmt: skip
    assert done.returncode == 3
    assert done.stdout == "out\nshell\n"
    assert done.stderr.startswith("err\n") and "command terminated with exit code 3" in done.stderr
    assert kubectl("exec", "-i", "shell", *ns, "--", "tr", "a-z", "A-Z", stdin="piped in\n").stdout == "PIPED IN\n"
    missing = kubectl("exec", "shell", *ns, "--", "no-such-command", check=False)
    assert missing.returncode != 0
    assert 'exec: "no-such-command": executable file not found in $PATH' in missing.stderr


def in_terminal(argv: list[str], env: dict[str, str], typed: bytes = b"", size: tuple[int, int] = (33, 111)) -> tuple[int, bytes]:
    """Run ``argv`` on a terminal of ``size`` (rows, columns), typing ``typed`` once it has
    shown something: its exit code and what the terminal showed."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", *size, 0, 0))
    process = subprocess.Popen(argv, stdin=terminal, stdout=terminal, stderr=terminal, close_fds=True, env=env)
    os.close(terminal)
    seen = b""
    while process.poll() is None or select.select([controller], [], [], 0)[0]:
        if select.select([controller], [], [], 0.1)[0]:
            try:
                seen += os.read(controller, 4096)
            except OSError:
                break
            if typed and seen:
                os.write(controller, typed)
                typed = b""
    os.close(controller)
    return process.wait(), seen


def test_kubectl_exec_it_gets_a_terminal_of_its_size(newest: Kubectl, namespace: str) -> None:
    kubectl = newest
    running(kubectl, "terminal", namespace)
    code, seen = in_terminal([*kubectl.argv, "exec", "-it", "terminal", "-n", namespace, "--",
                              "sh", "-c", "test -t 0 && echo is-a-tty; stty size; exit 5"], kubectl.env)  # fmt: skip
    assert code == 5
    assert b"is-a-tty" in seen and b"33 111" in seen


def test_kubectl_cp_round_trips_a_file(newest: Kubectl, namespace: str, tmp_path: pathlib.Path) -> None:
    kubectl = newest
    running(kubectl, "files", namespace)
    source = tmp_path / "notes.txt"
    source.write_text("copied both ways\n")
    kubectl("cp", str(source), f"{namespace}/files:notes.txt")
    kubectl("cp", f"{namespace}/files:notes.txt", str(tmp_path / "back.txt"))
    assert (tmp_path / "back.txt").read_text() == "copied both ways\n"


# ---------------------------------------------------------------------------- refusals


def test_exec_needs_create_on_pods_exec(newest: Kubectl, namespace: str) -> None:
    kubectl = newest
    running(kubectl, "guarded", namespace)
    ns = ["-n", namespace]
    kubectl("create", "role", "peek", *ns, "--verb=get", "--resource=pods,pods/exec")
    kubectl("create", "rolebinding", "peek", *ns, "--role=peek", f"--serviceaccount={namespace}:default")
    as_account = ["--as", f"system:serviceaccount:{namespace}:default"]
    refused = kubectl("exec", "guarded", *ns, *as_account, "--", "true", check=False)
    assert refused.returncode == 1
    assert 'cannot create resource "pods/exec"' in refused.stderr
    kubectl("create", "role", "enter", *ns, "--verb=create", "--resource=pods/exec")
    kubectl("create", "rolebinding", "enter", *ns, "--role=enter", f"--serviceaccount={namespace}:default")
    assert kubectl("exec", "guarded", *ns, *as_account, "--", "echo", "in").stdout == "in\n"


def test_bad_exec_requests_are_400s(api: Any, namespace: str, newest: Kubectl) -> None:
    found = running(newest, "target", namespace)
    base = f"/api/v1/namespaces/{namespace}/pods/target/exec"
    cases = {
        "?stdout=true": "you must specify at least one command for the container",
        "?command=true": "you must specify at least 1 of stdin, stdout, stderr",
        "?command=true&stdout=true&container=other": "container other is not valid for pod target",
        "?command=true&stdout=true": "Upgrade request required",
    }
    for query, message in cases.items():
        answer = api.post(base + query, None)
        assert (answer.status_code, answer.json()["message"]) == (400, message), query
    spdy = api.session.post(api.server.url + base + "?command=true&stdout=true",
                            headers={"Upgrade": "SPDY/3.1", "Connection": "Upgrade",
                                     "X-Stream-Protocol-Version": "v2.channel.k8s.io"})  # fmt: skip
    assert spdy.status_code == 403
    assert "client supports ['v2.channel.k8s.io'], server supports ['v4.channel.k8s.io']" in spdy.json()["message"]
    assert found["status"]["phase"] == "Running"


def test_kubectl_1_27_execs_and_attaches_over_spdy(node: ServerThread, namespace: str, tmp_path: pathlib.Path) -> None:
    """kubectl before 1.30 speaks SPDY only: exec's output, input and exit code, and attach."""
    old = Kubectl(KUBECTLS[0], node.kubeconfig, tmp_path)
    running(old, "legacy", namespace)
    ns = ["-n", namespace]
    done = old("exec", "legacy", *ns, "--", "sh", "-c", "echo out; echo err >&2; exit 4", check=False)
    assert (done.returncode, done.stdout) == (4, "out\n")
    assert done.stderr.startswith("err\n") and "command terminated with exit code 4" in done.stderr
    assert old("exec", "-i", "legacy", *ns, "--", "tr", "a-z", "A-Z", stdin="spdy\n").stdout == "SPDY\n"
    code, seen = in_terminal([*old.argv, "exec", "-it", "legacy", *ns, "--", "sh", "-c", "stty size; exit 2"], old.env)
    assert code == 2 and b"33 111" in seen
    script = 'while read line; do echo "got $line"; done'
    apply(old, pod("reader", namespace, script, container={"stdin": True, "stdinOnce": True}))
    old("wait", *ns, "--for=condition=Ready", "pod/reader", "--timeout=30s")
    assert old("attach", "-i", "reader", *ns, stdin="one\n").stdout == "got one\n"


def test_exec_reaches_only_pods_that_run_here(newest: Kubectl, namespace: str) -> None:
    ns = ["-n", namespace]
    newest("run", "simulated", *ns, "--image=nginx:1.27")
    newest("wait", *ns, "--for=condition=Ready", "pod/simulated", "--timeout=30s")
    simulated = newest("exec", "simulated", *ns, "--", "true", check=False)
    assert simulated.returncode == 1 and "runs no processes" in simulated.stderr
    image = ECHO.partition("=")[0]
    apply(newest, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "entry", "namespace": namespace},
                    "spec": {"containers": [{"name": "main", "image": image, "args": ["x"]}]}})  # fmt: skip
    newest("wait", *ns, "--for=condition=Ready", "pod/entry", "--timeout=30s")
    entry = newest("exec", "entry", *ns, "--", "true", check=False)
    assert entry.returncode == 1 and "name the image with =host to allow that" in entry.stderr


def test_streams_outlast_the_request_timeout(tmp_path: pathlib.Path) -> None:
    """exec and a followed log are long-running requests, as upstream's: no request timeout
    (here 1 s) cuts them."""
    options = SimulationOptions(pod_start_seconds=0.1, local_images=("busybox=host",), pods_dir=tmp_path / "pods")
    server = start_server(simulate=True, simulation=options, timeouts=ConnectionTimeouts(request=1.0))
    try:
        kubectl = Kubectl(KUBECTLS[-1], server.kubeconfig, tmp_path)
        kubectl("run", "slow", "--image=busybox", "--", "sh", "-c", "echo one; sleep 2.5; echo two; exec sleep 600")
        kubectl("wait", "--for=condition=Ready", "pod/slow", "--timeout=30s")
        assert kubectl("exec", "slow", "--", "sh", "-c", "sleep 2.5; echo still here").stdout == "still here\n"
        following = kubectl.start("logs", "-f", "slow")
        assert following.stdout is not None
        assert [following.stdout.readline() for _ in range(2)] == ["one\n", "two\n"]
        following.kill()
        following.wait()
    finally:
        server.stop()


def test_exec_goes_through_connect_admission(newest: Kubectl, namespace: str) -> None:
    """A ValidatingAdmissionPolicy on CONNECT of pods/exec sees the PodExecOptions and refuses
    the commands it is written to, as kube-apiserver's admission does before the stream opens."""
    kubectl = newest
    running(kubectl, "admitted", namespace)
    name = f"no-rm-{namespace}"
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": name}, "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [
                  {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CONNECT"], "resources": ["pods/exec"]}]},
                  "validations": [{"expression": "object.command[0] != 'rm'", "message": "no rm here"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"],
               "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}}}  # fmt: skip
    apply(kubectl, policy, binding)
    ns = ["-n", namespace]
    while (refused := kubectl("exec", "admitted", *ns, "--", "rm", "-f", "nothing", check=False)).returncode == 0:
        time.sleep(0.1)  # the policy is in force once the server has compiled it
    assert "no rm here" in refused.stderr
    assert kubectl("exec", "admitted", *ns, "--", "echo", "fine").stdout == "fine\n"


async def test_input_a_terminal_does_not_take_waits_on_the_loop_not_a_thread(tmp_path: pathlib.Path) -> None:
    """A command that reads nothing fills its terminal's buffer: what is written next waits
    for the terminal (cancellable), holding no thread of the default pool."""
    from kubeloop.node.execsessions import ExecProcess

    # The loop's default pool, counting what it is given (a count of the process's threads would
    # also see other tests' servers start and stop theirs).
    pool = _CountingPool()
    asyncio.get_running_loop().set_default_executor(pool)
    session = ExecProcess(["sleep", "600"], str(tmp_path), {"PATH": os.environ["PATH"]}, stdin=True, tty=True)
    await session.start(80, 24)
    try:
        given = pool.given
        writing = asyncio.create_task(session.write(b"x" * 1024 * 1024))  # far more than a terminal holds
        for _ in range(50):
            await asyncio.sleep(0)  # the loop turns: the write takes what the terminal holds, then waits
        assert not writing.done()
        assert pool.given == given  # it waits on the loop: no thread was taken
        writing.cancel()
        (ended,) = await asyncio.gather(writing, return_exceptions=True)
        assert isinstance(ended, asyncio.CancelledError)
    finally:
        session.kill()
        session.close()


class _CountingPool(concurrent.futures.ThreadPoolExecutor):
    """A thread pool that counts the calls it is given."""

    given = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        self.given += 1
        return super().submit(fn, *args, **kwargs)
