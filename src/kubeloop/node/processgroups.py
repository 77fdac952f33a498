"""A container's processes as a group: the session its program leads, what still carries its
mark (so that a server started again finds what an earlier one left behind), their signals, and
the exit code of a process that is not this one's child.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import signal

from kubeloop.containerpath import ROOT_VARIABLE
from kubeloop.node.podruns import ContainerProcess, ContainerRun, PodRun
from kubeloop.node.podvolumes import CLAIMS

#: How often a container whose leader may have exited while its output is held is looked at.
EXIT_POLL_SECONDS = 0.2

#: How long a run's log readers may go on after its process ended (its last lines).
READER_GRACE_SECONDS = 2.0


async def exit_code(process: ContainerProcess) -> int:
    """The leader's exit code, as soon as it exits (``process.wait()`` would wait for whatever
    still holds its output too). A container ends with its main process: the rest of its group
    is killed, as a kubelet ends every process of the container."""
    waiting = asyncio.ensure_future(process.wait())
    try:
        while not waiting.done() and process.returncode is None:
            await asyncio.wait({waiting}, timeout=EXIT_POLL_SECONDS)
    finally:
        if not waiting.done():
            waiting.cancel()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # what the leader left running ends with it
    code = process.returncode
    assert code is not None
    return code


def _carrying(entry: str, *, prefix: bool = False) -> list[int]:
    """The processes (other than this one) whose environment holds ``entry`` (with ``prefix``:
    an entry that starts with it). A container's process has its root in
    ``KUBELOOP_CONTAINER_ROOT`` and what it starts inherits it: this finds what left the
    container's process group (``setsid``, a daemon's double fork) as a cgroup would hold it.
    Nothing without /proc."""
    wanted = entry.encode()
    found = []
    try:
        entries = os.scandir("/proc")
    except OSError:
        return []
    with entries:
        for proc in entries:
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                with open(f"/proc/{proc.name}/environ", "rb") as environ:
                    variables = environ.read().split(b"\0")
            except OSError:
                continue  # gone meanwhile, or not ours to read
            if any(v.startswith(wanted) if prefix else v == wanted for v in variables):
                found.append(int(proc.name))
    return found


def kill_carrying(entry: str, *, prefix: bool = False) -> list[int]:
    """SIGKILL to every process :func:`_carrying` finds; their ids."""
    killed = []
    for pid in _carrying(entry, prefix=prefix):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


def signal_group(state: ContainerRun, sig: int) -> None:
    if state.process is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(state.process.pid, sig)


def process_mark(pid: int) -> str:
    """A process's id and when it started (in clock ticks since boot, from /proc): what tells it
    from a process that has its id after a reboot or the id's reuse. Without /proc, its id only
    (and an earlier server's groups are not killed: nothing proves they are its)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
        boot = pathlib.Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return f"{pid} unknown"
    started = stat.rpartition(")")[2].split()[19]  # field 22, counted after the command's name
    return f"{pid} {started} {boot}"


async def kill_run(state: ContainerRun, grace: float) -> None:
    """SIGTERM to the run's group, SIGKILL after ``grace`` seconds (the run's end cancels
    the wait)."""
    signal_group(state, signal.SIGTERM)
    await asyncio.sleep(grace)
    signal_group(state, signal.SIGKILL)


async def end_pod(run: PodRun) -> None:
    """SIGTERM to each container's process group (whether its leader lives or not: what it
    started goes too), SIGKILL to what is left after the grace period."""
    started = [state for state in run.containers.values() if state.running]
    for state in started:
        signal_group(state, signal.SIGTERM)
    loop = asyncio.get_running_loop()
    if run.stopping_since is None:
        run.stopping_since = loop.time()
        run.kill_at = run.stopping_since + run.grace_seconds
    waits = [state.tasks[-1] for state in started if state.tasks and not state.tasks[-1].done()]
    while waits and (left := run.kill_at - loop.time()) > 0:
        run.hurry = loop.create_future()
        await asyncio.wait([*waits, run.hurry], timeout=left, return_when=asyncio.FIRST_COMPLETED)
        waits = [wait for wait in waits if not wait.done()]
    run.hurry = None
    for state in started:
        signal_group(state, signal.SIGKILL)
    await asyncio.to_thread(kill_carrying, f"{ROOT_VARIABLE}={run.folder}/", prefix=True)
    for state in run.containers.values():
        # Bounded: a waiter ends once the leader is gone and the readers had their grace.
        _, stuck = (
            await asyncio.wait(state.tasks, timeout=READER_GRACE_SECONDS + 1) if state.tasks else ((), ())
        )
        for task in stuck:
            task.cancel()
        await asyncio.gather(*state.tasks, return_exceptions=True)


def kill_left_behind(root: pathlib.Path) -> list[int]:
    """Kill what an earlier server process left running under ``root`` (its ids are in the pods'
    folders); the process groups killed."""
    killed = []
    for pid_file in root.glob("*/*/pid"):
        if pid_file.parent.parent.name == CLAIMS:
            continue
        with contextlib.suppress(ValueError, OSError):
            mark = pid_file.read_text().strip()
            pgid = int(mark.split()[0])
            # That very process, not one that took its id since (a reboot, the id's reuse).
            if not mark.endswith(" unknown") and process_mark(pgid) == mark:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
                    killed.append(pgid)
        pid_file.unlink(missing_ok=True)
    # And what they started that left their groups (none of this server's runs yet).
    killed.extend(kill_carrying(f"{ROOT_VARIABLE}={root}/", prefix=True))
    return killed
