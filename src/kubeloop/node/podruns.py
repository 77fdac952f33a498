"""What the process node knows of a local pod: its run (folder, grace period, volumes, whether it
is stopping), each container's runs (process, restarts, state, probes, input and who is
attached), and the status they come to.
"""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kubeloop.api.object import Obj
from kubeloop.node.podvolumes import (
    PodVolumes,
)

#: Records an event: (the object or an ObjectReference, Normal or Warning, reason, message).
Record = Callable[[Obj, str, str, str], None]


class ContainerProcess(Protocol):
    """A container's running process: one of its own (:class:`asyncio.subprocess.Process`) or
    one the fork server forked (``forkserver``)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    stdin: asyncio.StreamWriter | None
    stdout: asyncio.StreamReader | None
    stderr: asyncio.StreamReader | None

    async def wait(self) -> int: ...


class CannotRun(Exception):
    """A container that cannot be started (RunContainerError): its message says why."""


@dataclass
class ContainerRun:
    """One container of a pod: its current process, and what its runs came to."""

    name: str
    restart_count: int = 0
    process: ContainerProcess | None = None
    started_at: str | None = None
    started_monotonic: float = 0.0
    #: The state of the last run that ended (``terminated``), and the one before it.
    terminated: Obj | None = None
    last_terminated: Obj | None = None
    #: Why it is not running now (``waiting``), if it is not.
    waiting: Obj | None = None
    backoff: float = 0.0
    #: When (loop time) it may start again after a failure.
    not_before: float = 0.0
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    #: The current run has ended and its end is recorded (``terminated``, the whole log).
    ended: bool = False
    #: The current run's startup probe has succeeded (or there is none).
    started_ok: bool = False
    #: The current run's readiness probe says it is ready (or there is none and it started).
    ready: bool = False
    #: The current run's probes (None: it has none, or it ended).
    probing: asyncio.Task[None] | None = None
    #: The current run's input: its stdin pipe (``stdin: true``), or its terminal's controlling
    #: side (``tty: true``), which its output is read from as well.
    stdin: asyncio.StreamWriter | None = None
    terminal: int | None = None
    terminal_transport: asyncio.ReadTransport | None = None
    #: Who is attached: each gets (stream, chunk) of the output as it comes, ("", b"") at the end.
    listeners: set[asyncio.Queue[tuple[str, bytes]]] = field(default_factory=set)
    #: Someone has attached to its stdin (``stdinOnce``: the stdin ends when they go).
    stdin_attached: bool = False

    @property
    def running(self) -> bool:
        return self.process is not None and not self.ended


@dataclass(frozen=True)
class PodState:
    """A local pod's status as its processes have it."""

    phase: str
    containers: list[Obj]
    init_containers: list[Obj]
    #: Every init container has done its work (a sidecar: has started).
    initialized: bool
    #: The init containers still to do it.
    pending: list[str]
    ready: bool
    #: Why the pod failed when the node ended it (``DeadlineExceeded``), and how it says so.
    reason: str = ""
    message: str = ""


@dataclass
class PodRun:
    uid: str
    namespace: str
    name: str
    folder: pathlib.Path
    grace_seconds: float
    volumes: PodVolumes
    containers: dict[str, ContainerRun] = field(default_factory=dict)
    #: The pod has been ended for good: (reason, message) of its failure.
    halted: tuple[str, str] | None = None
    #: When its processes are being stopped: the loop time they were told to (SIGTERM), when
    #: what is left gets SIGKILL, and what wakes the wait when a delete shortens the period.
    stopping_since: float | None = None
    kill_at: float = 0.0
    hurry: asyncio.Future[None] | None = None

    def shorten_grace(self, grace_seconds: float) -> None:
        """A later delete gave a shorter grace period: counted from the first (as upstream
        shortens deletionTimestamp), SIGKILL comes no later than it says."""
        self.grace_seconds = min(self.grace_seconds, grace_seconds)
        if self.stopping_since is not None:
            self.kill_at = min(self.kill_at, self.stopping_since + grace_seconds)
            if self.hurry is not None and not self.hurry.done():
                self.hurry.set_result(None)


def pod_state(run: PodRun, pod: Obj) -> PodState:
    """The phase of ``run``'s pod, its containers' and init containers' statuses, and its conditions'
    inputs, as its processes have it."""

    policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
    inits = init_containers_of(pod)
    init_statuses = [container_status(run, c, initializing=False) for c in inits]
    pending = [str(c.get("name")) for c in inits if not init_done(c, run.containers.get(str(c.get("name"))))]
    initialized = not pending
    statuses = [container_status(run, c, initializing=not initialized) for c in containers_of(pod)]
    init_failed = any(
        c.get("restartPolicy") != "Always"
        and (state := run.containers.get(str(c.get("name")))) is not None
        and not state.running
        and state.terminated is not None
        and state.terminated.get("exitCode") != 0
        for c in inits
    )
    ended = [entry["state"]["terminated"] for entry in statuses if "terminated" in entry["state"]]
    still_running = any(state.running for state in run.containers.values())
    if (run.halted is not None and not still_running) or (init_failed and policy == "Never"):
        phase = "Failed"
    elif run.halted is not None:
        phase = "Running"  # halted: Failed once its processes have ended
    elif not initialized:
        phase = "Pending"
    elif len(ended) == len(statuses) and (
        policy == "Never" or (policy == "OnFailure" and all(t.get("exitCode") == 0 for t in ended))
    ):
        phase = "Failed" if any(t.get("exitCode") != 0 for t in ended) else "Succeeded"
    elif not any(
        (found := run.containers.get(str(c.get("name")))) is not None and found.started_at is not None
        for c in containers_of(pod)
    ):
        phase = "Pending"  # no container has run yet (a kubelet's phase until one starts)
    else:
        phase = "Running"
    sidecars_ready = all(
        entry["ready"]
        for c, entry in zip(inits, init_statuses, strict=True)
        if c.get("restartPolicy") == "Always"
    )
    ready = initialized and sidecars_ready and all(entry["ready"] for entry in statuses)
    reason, message = run.halted if run.halted is not None and phase == "Failed" else ("", "")
    return PodState(
        phase, statuses, init_statuses, initialized, pending, ready and run.halted is None, reason, message
    )


def container_status(run: PodRun, container: Obj, *, initializing: bool) -> Obj:
    name = str(container.get("name"))
    state = run.containers.get(name) or ContainerRun(name)
    entry: Obj = {
        "name": name,
        "image": container.get("image"),
        "imageID": f"local://{container.get('image')}",
        "containerID": f"kubeloop://{run.uid}/{name}",
        "ready": state.running and state.ready,
        "started": state.running and state.started_ok,
        "restartCount": state.restart_count,
    }
    if state.running:
        entry["state"] = {"running": {"startedAt": state.started_at}}
        previous = state.terminated
    elif state.waiting is not None:
        entry["state"] = {"waiting": state.waiting}
        previous = state.terminated
    elif state.terminated is not None:
        entry["state"] = {"terminated": state.terminated}
        previous = state.last_terminated
    else:
        entry["state"] = {"waiting": {"reason": "PodInitializing" if initializing else "ContainerCreating"}}
        previous = None
    entry["lastState"] = {"terminated": previous} if previous is not None else {}
    return entry


def containers_of(pod: Obj) -> list[Obj]:
    return [c for c in (pod.get("spec") or {}).get("containers") or () if isinstance(c, dict)]


def init_containers_of(pod: Obj) -> list[Obj]:
    return [c for c in (pod.get("spec") or {}).get("initContainers") or () if isinstance(c, dict)]


def init_done(container: Obj, state: ContainerRun | None) -> bool:
    """An init container has done its work: a sidecar has started, another has succeeded."""
    if state is None:
        return False
    if container.get("restartPolicy") == "Always":
        return state.running and state.started_ok
    return not state.running and state.terminated is not None and state.terminated.get("exitCode") == 0
