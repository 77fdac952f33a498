"""The process node's fork server (``kubeloop.node.forkserver``): a Python image's process forked
from a warm interpreter is the process ``python`` would have made (argv, ``__main__``, path,
folder, environment, stdin, session, signals, exit codes, output), with the libraries its
package's distribution requires already imported; a command only an interpreter of its own runs
the same way, or a container with a memory limit, is started anew; a fork server that dies takes
its processes with it and the next launch starts another; a launch given up leaves no process;
a pod on the node is forked unless ``fork_server=False`` says not to, and ``pod_processes``
finds a forked process by the id its folder keeps."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

import kubeloop
from kubeloop import kinds
from kubeloop.node.forkserver import (
    ANSWER_TIMEOUT_SECONDS,
    ForkedProcess,
    ForkServer,
    ForkServerUnavailable,
    PythonProgram,
    base_environment,
    python_program,
)
from kubeloop.node.simulation import SimulationOptions
from kubeloop.testing import eventually, pod_processes
from tests.conftest import start_server

#: What a process sees of itself, as JSON on stdout; then it ends as its first argument says.
PROBE = r"""
import gc, json, os, resource, signal, sys, threading
seen = {
    "argv": sys.argv, "orig_argv": sys.orig_argv, "name": __name__, "path0": sys.path[0],
    "spec": __spec__.name if __spec__ is not None else None, "cwd": os.getcwd(),
    "env": dict(os.environ), "stdin": sys.stdin.read(), "session": os.getsid(0) == os.getpid(),
    "group": os.getpgid(0) == os.getpid(),
    "signals": {s.name: str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD)},
    "data_limit": resource.getrlimit(resource.RLIMIT_DATA)[0], "gc": gc.isenabled(),
    "threads": threading.active_count(), "encoding": (sys.stdout.encoding, sys.stdout.line_buffering),
    "main_module": sys.modules["__main__"].__dict__.get("PROBING", False),
}
PROBING = True
print(json.dumps(seen))
print("to stderr", file=sys.stderr)
how = sys.argv[-1]
if how == "raise":
    raise RuntimeError("as asked")
if how == "wait":
    print("waiting", flush=True)
    signal.pause()
sys.exit(int(how))
"""


@pytest.fixture
async def fork_server() -> AsyncIterator[ForkServer]:
    server = ForkServer()
    yield server
    await server.close()


@pytest.fixture
def probe_module(tmp_path: pathlib.Path) -> pathlib.Path:
    """A folder holding the probe as the module ``probed.main`` (run with ``-m``)."""
    (tmp_path / "probed").mkdir()
    (tmp_path / "probed" / "__init__.py").write_text("")
    (tmp_path / "probed" / "main.py").write_text(PROBE)
    return tmp_path


async def started_anew(argv: list[str], env: dict[str, str], cwd: str) -> Any:
    """``argv`` started as the node starts a process of its own."""
    return await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=cwd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True,
    )  # fmt: skip


def parent_of(pid: int) -> int:
    return int(pathlib.Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


def ended(pid: int) -> bool:
    """Whether the process is gone, or a zombie (its new parent has yet to reap it)."""
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


async def outcome(process: Any) -> tuple[int, str, str]:
    out, err = await asyncio.gather(process.stdout.read(), process.stderr.read())
    return await process.wait(), out.decode(), err.decode()


def container_env(cwd: pathlib.Path) -> dict[str, str]:
    return {**base_environment(), "HOSTNAME": "probe", "FOO": "bar=baz", "KUBELOOP_CONTAINER_ROOT": str(cwd)}


@pytest.mark.parametrize("form", ["-m", "-c", "-I -c"])
@pytest.mark.parametrize("how", ["0", "7", "raise"])
async def test_a_forked_process_is_the_one_python_would_make(
    fork_server: ForkServer, probe_module: pathlib.Path, form: str, how: str
) -> None:
    cwd = probe_module
    target = ["-m", "probed.main"] if form == "-m" else [*form.split(), PROBE]
    argv = [sys.executable, *target, "an arg", how]
    env = container_env(cwd)
    program = python_program(argv, env)
    assert program is not None, argv
    forked = await fork_server.launch(program, env=env, cwd=str(cwd))
    anew = await started_anew(argv, env, str(cwd))
    (forked_code, forked_out, forked_err), (code, out, err) = await asyncio.gather(outcome(forked), outcome(anew))
    assert forked_code == code == (1 if how == "raise" else int(how))
    forked_seen, seen = json.loads(forked_out), json.loads(out)
    for variable in ("LC_CTYPE",):  # PEP 538: an interpreter may set it for itself as it starts
        forked_seen["env"].pop(variable, None)
        seen["env"].pop(variable, None)
    assert forked_seen == seen
    assert seen["env"]["FOO"] == "bar=baz" and seen["cwd"] == str(cwd)
    assert seen["stdin"] == "" and seen["session"] and seen["name"] == "__main__"
    assert forked_err.splitlines()[0] == err.splitlines()[0] == "to stderr"
    if how == "raise":
        assert forked_err.splitlines()[-1] == err.splitlines()[-1] == "RuntimeError: as asked"


async def test_a_signal_ends_a_forked_process_with_minus_its_number(
    fork_server: ForkServer, tmp_path: pathlib.Path
) -> None:
    argv = [sys.executable, "-c", PROBE, "wait"]
    program = python_program(argv, container_env(tmp_path))
    assert program is not None
    forked = await fork_server.launch(program, env=container_env(tmp_path), cwd=str(tmp_path))
    assert forked.stdout is not None
    while b"waiting" not in await forked.stdout.readline():
        pass
    os.killpg(forked.pid, signal.SIGTERM)
    assert await forked.wait() == -signal.SIGTERM
    assert forked.returncode == -signal.SIGTERM


async def test_the_libraries_a_package_requires_are_imported_once_before_the_fork(
    fork_server: ForkServer, tmp_path: pathlib.Path
) -> None:
    # kubeloop's distribution requires aiohttp: its programs find it imported; the package
    # itself (whose code may read the container's environment as it loads) is not.
    code = "import sys; print('aiohttp' in sys.modules, 'kubeloop.client' in sys.modules)"
    env = container_env(tmp_path)
    preloaded = python_program([sys.executable, "-I", "-c", code], env, package="kubeloop")
    assert preloaded is not None and preloaded.preload == ("kubeloop",)
    first = await fork_server.launch(preloaded, env=env, cwd=str(tmp_path))
    assert await outcome(first) == (0, "True False\n", "")
    anew = await started_anew([sys.executable, "-I", "-c", code], env, str(tmp_path))
    assert await outcome(anew) == (0, "False False\n", "")


def test_only_what_python_would_run_the_same_way_is_forked(tmp_path: pathlib.Path) -> None:
    env = container_env(tmp_path)
    python = sys.executable
    assert python_program([python, "-m", "json.tool", "x"], env) == PythonProgram(
        "json.tool", None, ("x",), False, (python, "-m", "json.tool", "x"), ("json",)
    )
    assert python_program([python, "-I", "-c", "pass"], env, package="greeter") == PythonProgram(
        None, "pass", (), True, (python, "-I", "-c", "pass"), ("greeter",)
    )
    refused = [
        ([python, "-u", "-c", "pass"], env),  # a flag it would have started with
        ([python, "-c"], env),
        (["python3", "-c", "pass"], env),  # found on PATH: perhaps another interpreter
        ([str(pathlib.Path(python).parent / "other-python"), "-c", "pass"], env),
        ([python, "-m", "not a module"], env),
        ([python, "-c", "pass"], {**env, "PYTHONPATH": "/elsewhere"}),  # read as it starts
        ([python, "-c", "pass"], {**env, "PYTHONUNBUFFERED": "1"}),
        ([python, "-c", "pass"], {**env, "LC_ALL": "C"}),  # its stdio's encoding
        ([python, "-c", "pass"], {**env, "LANG": "xx_XX.ISO-8859-1"}),
    ]
    for argv, environment in refused:
        assert python_program(argv, environment) is None, (argv, environment)
    # Isolated, it ignores PYTHON* variables as it starts anyway.
    assert python_program([python, "-I", "-c", "pass"], {**env, "PYTHONPATH": "/elsewhere"}) is not None


async def test_a_fork_server_that_dies_takes_its_processes_and_the_next_launch_starts_another(
    fork_server: ForkServer, tmp_path: pathlib.Path
) -> None:
    env = container_env(tmp_path)
    waiting = python_program([sys.executable, "-c", PROBE, "wait"], env)
    assert waiting is not None
    first = await fork_server.launch(waiting, env=env, cwd=str(tmp_path))
    assert first.stdout is not None
    while b"waiting" not in await first.stdout.readline():
        pass
    zygote = os.getpgid(first.pid)  # its own session: not the fork server's
    assert zygote == first.pid
    os.kill(parent_of(first.pid), signal.SIGKILL)  # the fork server
    assert await first.wait() == -signal.SIGKILL
    assert ended(first.pid)
    again = await fork_server.launch(waiting, env=env, cwd=str(tmp_path))
    assert isinstance(again, ForkedProcess) and again.pid != first.pid
    os.killpg(again.pid, signal.SIGKILL)
    assert await again.wait() == -signal.SIGKILL


async def test_a_closed_fork_server_kills_what_it_ran_and_refuses_launches(tmp_path: pathlib.Path) -> None:
    fork_server = ForkServer()
    env = container_env(tmp_path)
    waiting = python_program([sys.executable, "-c", PROBE, "wait"], env)
    assert waiting is not None
    running = await fork_server.launch(waiting, env=env, cwd=str(tmp_path))
    await fork_server.close()
    assert await running.wait() == -signal.SIGKILL
    with pytest.raises(ForkServerUnavailable, match="closed"):
        await fork_server.launch(waiting, env=env, cwd=str(tmp_path))


async def test_a_fork_server_that_does_not_answer_is_stopped_and_the_launch_refused(tmp_path: pathlib.Path) -> None:
    fork_server = ForkServer()
    env = container_env(tmp_path)
    waiting = python_program([sys.executable, "-c", PROBE, "wait"], env)
    assert waiting is not None
    try:
        first = await fork_server.launch(waiting, env=env, cwd=str(tmp_path))
        zygote = parent_of(first.pid)
        os.kill(zygote, signal.SIGSTOP)  # stuck: it answers nothing more
        # Short only for the launch that cannot be answered: a fork server that starts on a
        # loaded machine may take longer than this to answer its first launch.
        fork_server.answer_timeout = 0.5
        with pytest.raises(ForkServerUnavailable, match="did not answer"):
            await fork_server.launch(waiting, env=env, cwd=str(tmp_path))
        fork_server.answer_timeout = ANSWER_TIMEOUT_SECONDS
        assert await first.wait() == -signal.SIGKILL  # nobody could report its end any more
        await eventually(lambda: ended(zygote))  # killed: dying takes a moment on a loaded machine
        again = await fork_server.launch(waiting, env=env, cwd=str(tmp_path))  # a new fork server
        assert parent_of(again.pid) != zygote
    finally:
        await fork_server.close()


async def test_a_launch_too_large_for_one_message_is_refused(fork_server: ForkServer, tmp_path: pathlib.Path) -> None:
    env = {**container_env(tmp_path), "HUGE": "x" * 200_000}
    program = python_program([sys.executable, "-c", "pass"], env)
    assert program is not None
    with pytest.raises(ForkServerUnavailable, match="too large"):
        await fork_server.launch(program, env=env, cwd=str(tmp_path))


@pytest.mark.parametrize(("fork", "limited"), [(True, False), (False, False), (True, True)])
async def test_a_pod_of_a_python_image_is_forked_unless_told_not_to_or_limited(
    tmp_path: pathlib.Path, fork: bool, limited: bool
) -> None:
    pods = tmp_path / "pods"
    options = SimulationOptions(
        pod_start_seconds=0.05, local_images=("example.com/py=host",), pods_dir=pods, fork_server=fork
    )
    server = start_server(simulate=True, simulation=options)
    try:
        async with kubeloop.APIClient(kubeloop.load_config(server.kubeconfig)) as client:
            code = "import os, signal; print(os.getppid(), flush=True); signal.pause()"
            await client.create({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "py", "namespace": "default"},
                "spec": {"containers": [{
                    "name": "c", "image": "example.com/py", "command": [sys.executable, "-c", code],
                    # A memory limit counts what the program allocates: not what a fork server loaded.
                    **({"resources": {"limits": {"memory": "1Gi"}}} if limited else {}),
                }]},
            })  # fmt: skip

            async def parent() -> int:
                logs = sorted(pods.glob("*/c/0.log"))
                assert logs and logs[0].read_text().strip(), "no output yet"
                return int(logs[0].read_text().split()[-1])

            ppid = await eventually(parent, timeout=60)
            # An in-process server: this process starts its own; the fork server forks the rest.
            assert (ppid != os.getpid()) is (fork and not limited)
            running = pod_processes(pods)
            assert running, "the pod's process is found"
            await client.delete(kinds.Pod, "py", namespace="default", grace_period_seconds=0)

            async def gone() -> None:
                assert pod_processes(pods) == []

            await eventually(gone, timeout=60)
    finally:
        server.stop()


async def test_a_launch_given_up_leaves_no_process_behind(fork_server: ForkServer, tmp_path: pathlib.Path) -> None:
    env = container_env(tmp_path)
    # Its package's libraries are imported first: the launch is given up meanwhile.
    waiting = python_program([sys.executable, "-I", "-c", "import signal; signal.pause()"], env, package="kubeloop")
    assert waiting is not None
    given_up = asyncio.create_task(fork_server.launch(waiting, env=env, cwd=str(tmp_path)))
    await eventually(lambda: len(fork_server._answers) == 1)  # sent, not answered yet
    given_up.cancel()
    with pytest.raises(asyncio.CancelledError):
        await given_up
    quick = python_program([sys.executable, "-c", "pass"], env)
    assert quick is not None
    assert await outcome(await fork_server.launch(quick, env=env, cwd=str(tmp_path))) == (0, "", "")
    assert fork_server._process is not None

    def children() -> list[str]:
        assert fork_server._process is not None
        return [
            child
            for task in pathlib.Path(f"/proc/{fork_server._process.pid}/task").iterdir()
            for child in (task / "children").read_text().split()
        ]

    async def none_left() -> None:
        assert children() == []

    await eventually(none_left)
