"""The process node: the containers of pods whose images are local (``localimages``) run as
processes on this machine, as a kubelet would run them in containers.

A container's process gets its argv (the image's entrypoint or the container's own command,
then its args, ``$(VAR)`` expanded as Kubernetes does), its environment (literal values,
``valueFrom`` ConfigMap and Secret keys and ``fieldRef``, ``envFrom``, and
``KUBERNETES_SERVICE_HOST``/``_PORT`` naming the embedded server), and ``workingDir`` when it
exists on this machine (else the pod's own folder). It runs in a session of its own, so that
stopping it reaches whatever it started.

Its output goes, line by line with the time it was written, into the container's log, a file
per run in the pod's folder (``<root>/<pod uid>/<container>/<restart>.log``, in the CRI's
format: ``<RFC 3339 time> <stdout|stderr> F <line>``), which ``pods/log`` reads; a log past
``MAX_LOG_BYTES`` starts again (the oldest lines go). When a process ends, its exit code and
reason (Completed, Error) are the container's ``terminated`` state; with ``restartPolicy``
Always, or OnFailure after a failure, it starts again after a back-off that doubles from
``backoff_seconds`` to five minutes (the container waits in CrashLoopBackOff meanwhile, its last
run in ``lastState``), reset once a run lasts ten minutes. ``FallbackToLogsOnError`` makes the
end of a failed run's log its termination message.

A pod that goes (or is being deleted) has its processes sent SIGTERM, and SIGKILL when its
``terminationGracePeriodSeconds`` are over. The processes' ids are kept in the pod's folder: a
server that starts again kills the ones an earlier process of it left behind, and runs the pods
anew, never twice.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fcntl
import json
import logging
import os
import pathlib
import pty
import resource
import shutil
import signal
import struct
import termios
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubeloop.api import timestamps
from kubeloop.api.object import Obj
from kubeloop.containerpath import ROOT_VARIABLE
from kubeloop.node.downwardapi import field_value, resource_value
from kubeloop.node.expansion import expand
from kubeloop.node.localimages import LocalImage, LocalImages
from kubeloop.node.podaddresses import PREFIX
from kubeloop.node.podvolumes import (
    CLAIMS,
    DEFAULT_TERMINATION_MESSAGE_PATH,
    CannotMount,
    IssueToken,
    Lookup,
    PodVolumes,
    inside,
)
from kubeloop.node.probes import ProbeLoop, ProbeTarget, Report
from kubeloop.node.serviceproxy import ServiceProxy
from kubeloop.node.sessions import TOO_SLOW, CommandFailed, CommandRefused

log = logging.getLogger("kubeloop.node.processes")

#: The longest a stopping server waits for its pods' processes to end on SIGTERM.
CLOSE_GRACE_SECONDS = 2.0  # within the controller manager's 5 s to stop
#: How long a run's log readers may go on after its process ended (its last lines).
READER_GRACE_SECONDS = 2.0
#: How often a container whose leader may have exited while its output is held is looked at.
EXIT_POLL_SECONDS = 0.2
#: A line longer than this is logged in parts.
PARTIAL_BYTES = 16 * 1024
#: A container's log starts again past this size.
MAX_LOG_BYTES = 10 * 1024 * 1024
#: The longest a crashing container waits before it starts again (the kubelet's).
MAX_BACKOFF_SECONDS = 300.0
#: A run this long resets the back-off.
BACKOFF_RESET_SECONDS = 600.0
#: What ``FallbackToLogsOnError`` takes from the end of a failed run's log.
MESSAGE_LINES, MESSAGE_BYTES = 80, 2048

#: Local pods' addresses: 127.244.x.y (the kubelet gives them out: ``podaddresses``).
LOCAL_ADDRESS_PREFIX = PREFIX
#: How many chunks of output an attached client may fall behind before it is cut off (its
#: memory is bounded; what it missed is in the log).
LISTENER_CHUNKS = 1024
#: The probes a container may have.
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
#: Records an event: (the object, Normal or Warning, reason, message).
Record = Callable[[Obj, str, str, str], None]
#: Variables that make a program load or run code of their choosing (dynamic loaders, shells,
#: interpreters): a pod of an ``IMAGE=COMMAND`` image does not get them, since only the
#: image's entrypoint is to run (LD_* and DYLD_* go too). Not a sandbox: see localimages.
INJECTING_VARIABLES = frozenset((
    "BASH_ENV", "ENV", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONINSPECT",
    "PYTHONBREAKPOINT", "NODE_OPTIONS", "NODE_PATH", "PERL5LIB", "PERL5OPT", "PERLLIB", "RUBYOPT",
    "RUBYLIB", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "GCONV_PATH", "PROMPT_COMMAND",
))  # fmt: skip
#: A termination message is cut to this size (upstream's).
MAX_TERMINATION_MESSAGE_BYTES = 4096
#: Where a container finds its ServiceAccount's credentials.
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class CannotRun(Exception):
    """A container that cannot be started (RunContainerError): its message says why."""


@dataclass
class ContainerRun:
    """One container of a pod: its current process, and what its runs came to."""

    name: str
    restart_count: int = 0
    process: asyncio.subprocess.Process | None = None
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


class ProcessRuntime:
    """Runs local pods' containers as processes under ``root``; ``changed`` gets the
    pod (a stub: its name and namespace) whose process ended, so that its status is written
    again."""

    def __init__(
        self,
        root: pathlib.Path,
        images: LocalImages,
        lookup: Lookup,
        issue_token: IssueToken,
        *,
        api_host: str,
        api_port: int,
        backoff_seconds: float = 10.0,
        pod_host: str = "127.0.0.1",
        record: Record | None = None,
        proxy: ServiceProxy | None = None,
    ) -> None:
        # Absolute: a container runs in a folder of its own, and its root is named in its env.
        self.root = root.absolute()
        self.images = images
        self.lookup = lookup
        self.issue_token = issue_token
        self.api_host = api_host
        self.api_port = api_port
        self.backoff_seconds = backoff_seconds
        #: The address probes reach a pod's processes at.
        self.pod_host = pod_host
        #: The node's way to Services (None: pods get no proxy and no Service variables).
        self.proxy = proxy
        #: Records an event about a pod (a stub: apiVersion, kind, name, namespace, uid).
        self.record: Record = record or (lambda pod, kind, reason, message: None)
        self.pods: dict[tuple[str, str], PodRun] = {}
        self.changed: asyncio.Queue[Obj] = asyncio.Queue()
        self._stopping: set[asyncio.Task[None]] = set()
        #: The pods whose processes those tasks are stopping.
        self._ending: dict[asyncio.Task[None], PodRun] = {}

    # ------------------------------------------------------------------ which pods

    def handles(self, pod: Obj) -> bool:
        """Whether every container of ``pod`` has a local image."""
        containers = _containers(pod)
        return bool(containers) and all(self.images.resolve(str(c.get("image") or "")) for c in containers)

    def local_image(self, container: Obj) -> LocalImage:
        found = self.images.resolve(str(container.get("image") or ""))
        assert found is not None
        return found

    # ------------------------------------------------------------------ start and stop

    def clean_up_left_behind(self) -> list[int]:
        """Kill what an earlier server process left running (its ids are in the pods' folders);
        the process groups killed."""
        killed = []
        for pid_file in self.root.glob("*/*/pid"):
            if pid_file.parent.parent.name == CLAIMS:
                continue
            with contextlib.suppress(ValueError, OSError):
                mark = pid_file.read_text().strip()
                pgid = int(mark.split()[0])
                # That very process, not one that took its id since (a reboot, the id's reuse).
                if not mark.endswith(" unknown") and _process_mark(pgid) == mark:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(pgid, signal.SIGKILL)
                        killed.append(pgid)
            pid_file.unlink(missing_ok=True)
        # And what they started that left their groups (none of this server's runs yet).
        killed.extend(_kill_carrying(f"{ROOT_VARIABLE}={self.root}/", prefix=True))
        return killed

    def pod_folders(self) -> set[str]:
        """The pods (by uid) that have a folder here now."""
        if not self.root.is_dir():
            return set()
        return {path.name for path in self.root.iterdir() if path.is_dir() and path.name != CLAIMS}

    def remove_folders(self, uids: set[str]) -> int:
        """Remove the folders of pods that no longer exist (deleted while no server ran them),
        unless they run now; how many went."""
        running = {run.uid for run in self.pods.values()}
        gone = [uid for uid in uids - running if (self.root / uid).is_dir()]
        for uid in gone:
            shutil.rmtree(self.root / uid, ignore_errors=True)
        return len(gone)

    def pod_run(self, pod: Obj) -> PodRun:
        meta = pod.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        uid = str(meta.get("uid") or "")
        run = self.pods.get(key)
        if run is None or run.uid != uid:
            if run is not None:  # another pod of that name now: the old one's processes go
                self._stop_later(run)
            grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
            folder = self.root / uid
            volumes = PodVolumes(folder, self.root / CLAIMS, self.lookup, self.issue_token)
            run = PodRun(uid, key[0], key[1], folder, float(30 if grace is None else grace), volumes)
            self.pods[key] = run
        return run

    async def mount(self, pod: Obj) -> float:
        """Make the pod's volumes, or bring them up to date; in how many seconds to do it
        again (CannotMount: why one cannot be made)."""
        return await self.pod_run(pod).volumes.sync(pod)

    async def start(self, pod: Obj, container: Obj, run: PodRun) -> None:
        """Start ``container``'s process (CannotRun: why it cannot)."""
        name = str(container.get("name"))
        state = run.containers.get(name)
        if state is None:  # runs of an earlier server process count: this is their restart
            earlier = _runs_logged(run.folder / name)
            state = run.containers[name] = ContainerRun(name, restart_count=earlier[-1] + 1 if earlier else 0)
        env = await self._environment(pod, container)
        argv = self._argv(container, env)
        folder = run.folder / name
        folder.mkdir(parents=True, exist_ok=True)
        root = run.volumes.container_root(pod, container, env)
        cwd = self._enter(env, folder, root, container, run.namespace)
        tty = bool(container.get("tty"))
        terminal = controller = None
        if tty:
            controller, terminal = pty.openpty()
            os.set_blocking(controller, False)
            env.setdefault("TERM", "xterm")
        try:
            # Its own session (and process group): stopping it reaches its children.
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                env=env,
                stdin=terminal if tty else asyncio.subprocess.PIPE if container.get("stdin") else asyncio.subprocess.DEVNULL,
                stdout=terminal if tty else asyncio.subprocess.PIPE,
                stderr=terminal if tty else asyncio.subprocess.PIPE,
                start_new_session=True,
                preexec_fn=_preparation(tty=tty, memory=memory_limit(container)),
            )
        except OSError as exc:
            if controller is not None:
                os.close(controller)
            raise CannotRun(f'failed to start container "{name}": {exc.strerror or exc}: {argv[0]}') from None
        finally:
            if terminal is not None:
                os.close(terminal)
        (folder / "pid").write_text(_process_mark(process.pid))
        state.process = process
        state.ended = False
        state.started_at = timestamps.now()
        state.started_monotonic = time.monotonic()
        state.waiting = None
        probes = {kind: container[kind] for kind in PROBES if isinstance(container.get(kind), dict)}
        state.started_ok = "startupProbe" not in probes
        state.ready = state.started_ok and "readinessProbe" not in probes
        if probes:
            entrypoint = self.local_image(container).entrypoint
            refused = (
                f"image {container.get('image')} runs {' '.join(entrypoint)}: an exec probe would run on "
                "this machine (name the image with =host to allow that)"
                if entrypoint is not None
                else ""
            )
            target = ProbeTarget(self._address(pod), env, cwd, container, refused)
            state.probing = asyncio.create_task(
                self._probe(pod, run, state, probes, target), name=f"probes {run.name}/{name}"
            )
        log_file = folder / f"{state.restart_count}.log"
        for old in _runs_logged(folder)[:-1]:  # the current run's log and the previous one are kept
            if old < state.restart_count - 1:
                (folder / f"{old}.log").unlink(missing_ok=True)
        writer = _LogWriter(log_file, state.listeners)
        state.stdin, state.terminal, state.stdin_attached = process.stdin, controller, False
        if controller is not None:  # a terminal: one stream, read from its controlling side
            shown, state.terminal_transport = await _terminal_reader(controller)
            readers = [asyncio.create_task(writer.copy(shown, "stdout"), name=f"log {run.name}/{name} tty")]
        else:
            assert process.stdout is not None and process.stderr is not None
            readers = [
                asyncio.create_task(writer.copy(process.stdout, "stdout"), name=f"log {run.name}/{name} stdout"),
                asyncio.create_task(writer.copy(process.stderr, "stderr"), name=f"log {run.name}/{name} stderr"),
            ]
        state.tasks = [
            *readers,
            asyncio.create_task(
                self._wait(run, state, container, readers, log_file), name=f"wait {run.name}/{name}"
            ),
        ]

    def _enter(
        self, env: dict[str, str], folder: pathlib.Path, root: pathlib.Path, container: Obj, namespace: str
    ) -> str:
        """Complete a process's environment with the container's root (and a kubeconfig of its
        ServiceAccount's credentials); the folder it starts in."""
        env[ROOT_VARIABLE] = str(root)
        if _mounts(container, SERVICE_ACCOUNT_DIR) and "KUBECONFIG" not in env:
            env["KUBECONFIG"] = str(self._kubeconfig(folder, root, namespace))
        return _working_dir(container, root)

    async def exec_in(
        self, pod: Obj, container_name: str, command: list[str], *, stdin: bool, tty: bool
    ) -> ExecProcess:
        """``command`` made ready to start in a running container of ``pod`` as ``kubectl exec``
        asks (its environment, root and folder; a terminal of its own with ``tty``).
        CommandRefused: the container is not running here, or its image does not allow
        commands on this machine."""
        run, _, container = self._running_container(pod, container_name)
        if self.local_image(container).entrypoint is not None:
            raise CommandRefused(
                f"image {container.get('image')} runs {' '.join(self.local_image(container).entrypoint or ())}: "
                "a command would run on this machine (name the image with =host to allow that)"
            )
        env = await self._environment(pod, container)
        folder = run.folder / container_name
        cwd = self._enter(env, folder, folder / "root", container, run.namespace)
        if tty:
            env.setdefault("TERM", "xterm")
        return ExecProcess(command, cwd, env, stdin=stdin, tty=tty)

    async def _wait(
        self,
        run: PodRun,
        state: ContainerRun,
        container: Obj,
        readers: list[asyncio.Task[None]],
        log_file: pathlib.Path,
    ) -> None:
        process = state.process
        assert process is not None
        code = await _exit_code(process)
        # What it started that left its process group ends with it too (a cgroup's kill).
        await asyncio.to_thread(_kill_carrying, f"{ROOT_VARIABLE}={run.folder / state.name / 'root'}")
        if state.probing is not None:  # the run's probes end with it
            state.probing.cancel()
            await asyncio.gather(state.probing, return_exceptions=True)
            state.probing = None
        # The last lines are in the log (what outlived the group in a session of its own and
        # holds the output does not hold the container's end).
        _, stuck = await asyncio.wait(readers, timeout=READER_GRACE_SECONDS)
        for reader in stuck:
            reader.cancel()
        pid_file = log_file.parent / "pid"
        if pid_file.exists() and pid_file.read_text().split()[:1] == [str(process.pid)]:
            pid_file.unlink()
        if state.terminal_transport is not None:
            state.terminal_transport.close()
            state.terminal_transport = None
        if state.terminal is not None:
            with contextlib.suppress(OSError):
                os.close(state.terminal)
            state.terminal = None
        state.stdin = None
        for listener in state.listeners:
            _tell(listener, ("", b""))
        terminated: Obj = {
            "exitCode": code if code >= 0 else 128 - code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": state.started_at,
            "finishedAt": timestamps.now(),
            "containerID": f"kubeloop://{run.uid}/{state.name}",
        }
        if code < 0:
            terminated["signal"] = -code
        message = _termination_message(run.folder / state.name / "root", container)
        if not message and code != 0 and container.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            message = _tail_message(log_file)
        if message:
            terminated["message"] = message
        state.last_terminated, state.terminated = state.terminated, terminated
        state.ended = True
        ran = time.monotonic() - state.started_monotonic
        if ran >= BACKOFF_RESET_SECONDS:
            state.backoff = 0.0
        state.backoff = min(MAX_BACKOFF_SECONDS, state.backoff * 2 if state.backoff else self.backoff_seconds)
        state.not_before = asyncio.get_running_loop().time() + state.backoff
        self._changed(run)

    async def _probe(
        self, pod: Obj, run: PodRun, state: ContainerRun, probes: dict[str, Obj], target: ProbeTarget
    ) -> None:
        """The run's probes: startup first, until it succeeds; then readiness and liveness side
        by side. A failed result is a Warning event (Unhealthy); startup or liveness failing
        its threshold kills the run (Killing), whose end its restart policy then handles."""
        meta = pod.get("metadata") or {}
        stub = {"apiVersion": "v1", "kind": "Pod", "metadata": {k: meta.get(k) for k in ("name", "namespace", "uid")}}
        grace = run.grace_seconds

        def reporter(kind: str) -> Report:
            label = {"startupProbe": "Startup", "readinessProbe": "Readiness", "livenessProbe": "Liveness"}[kind]

            async def report(ok: bool, message: str, verdict: bool | None) -> None:
                if not ok:
                    self.record(stub, "Warning", "Unhealthy", f"{label} probe failed: {message}")
                if verdict is None:
                    return
                if kind == "readinessProbe":
                    state.ready = verdict
                    self._changed(run)
                elif kind == "startupProbe" and verdict:
                    state.started_ok = True
                    state.ready = "readinessProbe" not in probes
                    self._changed(run)
                elif not verdict:  # startup or liveness failed: the run is killed
                    self.record(
                        stub,
                        "Normal",
                        "Killing",
                        f"Container {state.name} failed {label.lower()} probe, will be restarted",
                    )
                    own = probes[kind].get("terminationGracePeriodSeconds")
                    await self._kill(state, float(grace if own is None else own))

            return report

        for kind, probe in probes.items():
            if probe.get("grpc") is not None:
                self.record(stub, "Warning", "Unhealthy", f"{kind}: grpc probes are not run by the process node; taken as success")
        if "startupProbe" in probes:
            await ProbeLoop(probes["startupProbe"], target, reporter("startupProbe"), until_success=True).loop()
        loops = [
            ProbeLoop(probes[kind], target, reporter(kind), initial=kind == "livenessProbe").loop()
            for kind in ("readinessProbe", "livenessProbe")
            if kind in probes
        ]
        await asyncio.gather(*loops)

    async def _kill(self, state: ContainerRun, grace: float) -> None:
        """SIGTERM to the run's group, SIGKILL after ``grace`` seconds (the run's end cancels
        the wait)."""
        _signal_group(state, signal.SIGTERM)
        await asyncio.sleep(grace)
        _signal_group(state, signal.SIGKILL)

    def _changed(self, run: PodRun) -> None:
        self.changed.put_nowait(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": run.name, "namespace": run.namespace}}
        )

    def stop(self, namespace: str, name: str, grace_seconds: float | None = None) -> bool:
        """Stop the pod's processes: SIGTERM, then SIGKILL after ``grace_seconds`` (else its
        terminationGracePeriodSeconds), in the background (the grace period holds no caller;
        :meth:`close` awaits it). Whether they are still stopping: :attr:`changed` names the
        pod once they have ended."""
        run = self.pods.pop((namespace, name), None)
        if run is not None:
            if grace_seconds is not None:
                run.grace_seconds = grace_seconds
            self._stop_later(run)
        stopping = [
            ending
            for ending in self._ending.values()
            if ending.namespace == namespace and ending.name == name and (namespace, name) not in self.pods
        ]
        if grace_seconds is not None:
            for ending in stopping:
                ending.shorten_grace(grace_seconds)
        return bool(stopping)

    def _stop_later(self, run: PodRun) -> None:
        self._in_background(run, self._stop(run), f"stop {run.namespace}/{run.name}")

    def _in_background(self, run: PodRun, ending: Coroutine[Any, Any, None], name: str) -> None:
        """Run ``ending`` (a pod's processes stopped) as a task the runtime owns: :meth:`close`
        awaits it, and kills the pod's processes if its grace period outlasts the server's."""
        task = asyncio.create_task(ending, name=name)
        self._stopping.add(task)
        self._ending[task] = run
        task.add_done_callback(self._stopping.discard)
        task.add_done_callback(lambda done: self._ending.pop(done, None))

    def halt(self, pod: Obj, reason: str, message: str) -> None:
        """End the pod's processes for good, keeping their logs and statuses (its
        ``activeDeadlineSeconds`` are over), in the background (a grace period holds no caller):
        the pod has Failed with ``reason`` once they have ended."""
        run = self.pod_run(pod)
        if run.halted is not None:
            return
        run.halted = (reason, message)
        self._in_background(run, self._end(run), f"halt {run.namespace}/{run.name}")

    async def _stop(self, run: PodRun) -> None:
        """End the pod's processes and remove its folder; then name the pod in :attr:`changed`
        (a pod being deleted is removed once its processes have ended)."""
        try:
            await self._end(run)
            shutil.rmtree(run.folder, ignore_errors=True)
        finally:
            self._ending = {task: ending for task, ending in self._ending.items() if ending is not run}
            self._changed(run)

    async def _end(self, run: PodRun) -> None:
        """SIGTERM to each container's process group (whether its leader lives or not: what it
        started goes too), SIGKILL to what is left after the grace period."""
        started = [state for state in run.containers.values() if state.running]
        for state in started:
            _signal_group(state, signal.SIGTERM)
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
            _signal_group(state, signal.SIGKILL)
        await asyncio.to_thread(_kill_carrying, f"{ROOT_VARIABLE}={run.folder}/", prefix=True)
        for state in run.containers.values():
            # Bounded: a waiter ends once the leader is gone and the readers had their grace.
            _, stuck = (
                await asyncio.wait(state.tasks, timeout=READER_GRACE_SECONDS + 1) if state.tasks else ((), ())
            )
            for task in stuck:
                task.cancel()
            await asyncio.gather(*state.tasks, return_exceptions=True)

    async def close(self) -> None:
        """Stop every pod's processes (the server is stopping), all at once: SIGTERM, and
        SIGKILL to what is left after CLOSE_GRACE_SECONDS at most (a pod's own grace period may
        be longer than the server is given to stop; nothing may be left behind)."""
        runs, self.pods = list(self.pods.values()), {}
        for run in runs:
            self._stop_later(run)
        try:
            if self._stopping:
                await asyncio.wait(list(self._stopping), timeout=CLOSE_GRACE_SECONDS)
        finally:  # also when the server's own stop cuts this short
            for run in [*runs, *self._ending.values()]:
                for state in run.containers.values():
                    if state.running:
                        _signal_group(state, signal.SIGKILL)
            _kill_carrying(f"{ROOT_VARIABLE}={self.root}/", prefix=True)
        await asyncio.gather(*self._stopping, return_exceptions=True)

    async def sync(self, pod: Obj) -> float | None:
        """Start what is to run now: the init containers one by one (a sidecar, ``restartPolicy:
        Always``, once started, goes on beside the rest), then the containers; and what ended and
        is to start again once its back-off is over. In how many seconds to look again (None:
        when a process ends or a probe's verdict changes)."""
        run = self.pod_run(pod)
        if run.halted is not None:
            return None
        policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
        again: list[float] = []
        for container in _init_containers(pod):
            name = str(container.get("name"))
            state = run.containers.get(name)
            if container.get("restartPolicy") == "Always":  # a sidecar: runs as long as the pod
                wait = await self._keep(pod, run, container, "Always")
                if wait is not None:
                    again.append(wait)
                if state is None or not (state.running and state.started_ok):
                    return min(again) if again else None
                continue
            if _init_done(container, state):
                continue
            if state is not None and state.terminated is not None and policy == "Never" and not state.running:
                return None  # failed, never again: the pod has failed
            wait = await self._keep(pod, run, container, "OnFailure")
            if wait is not None:
                again.append(wait)
            return min(again) if again else None
        for container in _containers(pod):
            wait = await self._keep(pod, run, container, policy)
            if wait is not None:
                again.append(wait)
        return min(again) if again else None

    async def _keep(self, pod: Obj, run: PodRun, container: Obj, policy: str) -> float | None:
        """Start ``container`` if it has not run, or again once its back-off is over if it ended
        and ``policy`` says so; in how many seconds to look again (None: no need)."""
        meta = pod.get("metadata") or {}
        loop = asyncio.get_running_loop()
        name = str(container.get("name"))
        state = run.containers.get(name)
        if state is not None and state.running:
            return None
        if state is not None and state.terminated is not None:
            failed = state.terminated.get("exitCode") != 0
            if policy == "Never" or (policy == "OnFailure" and not failed):
                return None
        if state is not None and loop.time() < state.not_before:
            if state.waiting is None or state.waiting.get("reason") != "RunContainerError":
                state.waiting = {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off {state.backoff:g}s restarting failed container={name} "
                    f"pod={meta.get('name')}_{meta.get('namespace')}({meta.get('uid')})",
                }
            return state.not_before - loop.time()
        if state is not None and state.terminated is not None:
            state.restart_count += 1
        try:
            await self.start(pod, container, run)
        except CannotRun as refused:
            state = run.containers.setdefault(name, ContainerRun(name))
            state.waiting = {"reason": "RunContainerError", "message": str(refused)}
            state.backoff = min(MAX_BACKOFF_SECONDS, state.backoff * 2 if state.backoff else self.backoff_seconds)
            state.not_before = loop.time() + state.backoff
            return state.backoff
        return None

    def status(self, pod: Obj) -> PodState:
        """The pod's phase, its containers' and init containers' statuses, and its conditions'
        inputs, as its processes have it."""
        run = self.pod_run(pod)
        policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
        inits = _init_containers(pod)
        init_statuses = [self._container_status(run, c, initializing=False) for c in inits]
        pending = [
            str(c.get("name"))
            for c in inits
            if not _init_done(c, run.containers.get(str(c.get("name"))))
        ]
        initialized = not pending
        statuses = [self._container_status(run, c, initializing=not initialized) for c in _containers(pod)]
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
            for c in _containers(pod)
        ):
            phase = "Pending"  # no container has run yet (a kubelet's phase until one starts)
        else:
            phase = "Running"
        sidecars_ready = all(
            entry["ready"] for c, entry in zip(inits, init_statuses, strict=True) if c.get("restartPolicy") == "Always"
        )
        ready = initialized and sidecars_ready and all(entry["ready"] for entry in statuses)
        reason, message = run.halted if run.halted is not None and phase == "Failed" else ("", "")
        return PodState(phase, statuses, init_statuses, initialized, pending, ready and run.halted is None, reason, message)

    def _container_status(self, run: PodRun, container: Obj, *, initializing: bool) -> Obj:
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

    # ------------------------------------------------------------------ logs

    def log_file(
        self, namespace: str, name: str, uid: str, container: str, *, previous: bool = False
    ) -> pathlib.Path | None:
        """The log of the container's latest run (or, with ``previous``, the one before), also of
        a pod an earlier server process ran."""
        runs = _runs_logged(self.root / uid / container)
        wanted = -2 if previous else -1
        if len(runs) < -wanted:
            return None
        return self.root / uid / container / f"{runs[wanted]}.log"

    def attach_to(self, pod: Obj, container_name: str) -> Attachment:
        """The running container's process, to attach to (CommandRefused: not running here)."""
        _, state, container = self._running_container(pod, container_name)
        return Attachment(state, bool(container.get("tty")), bool(container.get("stdinOnce")), state.tasks[-1])

    def address_of(self, pod: Obj) -> str:
        """Where the pod's processes listen (CommandRefused: it runs none here, or none now)."""
        run = self._local_run(pod)
        if run is None or not any(s.running for s in run.containers.values()):
            raise CommandRefused(f"pod {(pod.get('metadata') or {}).get('name')} is not running")
        return self._address(pod)

    def _address(self, pod: Obj) -> str:
        """The pod's address (its own loopback address, in the node's range), else the node's:
        a ``status.podIP`` written to point elsewhere (by whoever may write pods/status) does not
        aim probes and port-forwards at another host."""
        address = str((pod.get("status") or {}).get("podIP") or "")
        return address if address.startswith(LOCAL_ADDRESS_PREFIX) else self.pod_host

    def _local_run(self, pod: Obj) -> PodRun | None:
        """The run of ``pod`` (this very pod, by uid), if there is one; CommandRefused when
        the node only simulates its images."""
        meta = pod.get("metadata") or {}
        if not self.handles(pod):
            raise CommandRefused(
                f"pod {meta.get('name')} runs no processes: the node only simulates its images "
                "(name them with --local-image to run them)"
            )
        run = self.pods.get((str(meta.get("namespace") or ""), str(meta.get("name") or "")))
        return run if run is not None and run.uid == meta.get("uid") else None

    def _running_container(self, pod: Obj, container_name: str) -> tuple[PodRun, ContainerRun, Obj]:
        """The pod's run, the container's state and spec, while it runs (CommandRefused when
        it does not run here)."""
        run = self._local_run(pod)
        state = run.containers.get(container_name) if run is not None else None
        if run is None or state is None or not state.running or not state.tasks:
            raise CommandRefused(f'container not found ("{container_name}")')
        container = next(c for c in [*_init_containers(pod), *_containers(pod)] if c.get("name") == container_name)
        return run, state, container

    def running(self, namespace: str, name: str, uid: str, container: str) -> bool:
        """Whether the container's current run, in the pod of ``uid``, goes on (its log may grow)."""
        run = self.pods.get((namespace, name))
        state = run.containers.get(container) if run is not None and run.uid == uid else None
        return state is not None and state.running

    # ------------------------------------------------------------------ what a container sees

    def _kubeconfig(self, folder: pathlib.Path, root: pathlib.Path, namespace: str) -> pathlib.Path:
        """A kubeconfig of the container's ServiceAccount credentials (the files mounted in its
        root), for clients that do not know ``KUBELOOP_CONTAINER_ROOT``: ``kubectl`` and the
        official client's ``load_config()`` find the server through it."""
        account = root / SERVICE_ACCOUNT_DIR.lstrip("/")
        host = f"[{self.api_host}]" if ":" in self.api_host else self.api_host
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "in-cluster",
                    "cluster": {
                        "server": f"https://{host}:{self.api_port}",
                        "certificate-authority": str(account / "ca.crt"),
                    },
                }
            ],
            "users": [{"name": "service-account", "user": {"tokenFile": str(account / "token")}}],
            "contexts": [
                {
                    "name": "in-cluster",
                    "context": {"cluster": "in-cluster", "user": "service-account", "namespace": namespace},
                }
            ],
            "current-context": "in-cluster",
        }
        path = folder / "kubeconfig"
        path.write_text(json.dumps(config, indent=2))
        return path

    def _argv(self, container: Obj, env: dict[str, str]) -> list[str]:
        image = self.local_image(container)
        command = [str(part) for part in container.get("command") or ()]
        args = [str(part) for part in container.get("args") or ()]
        if image.entrypoint is not None:
            if command:
                raise CannotRun(
                    f"image {container.get('image')} runs {' '.join(image.entrypoint)}: the pod's command "
                    "would run on this machine (name the image with =host to allow that)"
                )
            argv = [*image.entrypoint, *(expand(arg, env) for arg in args)]
        else:
            argv = [expand(part, env) for part in [*command, *args]]
        if not argv:
            raise CannotRun(
                f"image {container.get('image')} is run as host, and the container names no command"
            )
        return argv

    async def _environment(self, pod: Obj, container: Obj) -> dict[str, str]:
        """The process's environment: the machine's PATH and HOME, the API server's address,
        then the container's ``envFrom`` and ``env`` in order (a later one wins)."""
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        env = {key: os.environ[key] for key in ("PATH", "HOME", "LANG", "TZ") if key in os.environ}
        env["HOSTNAME"] = str(meta.get("name") or "")
        if self.proxy is not None:
            if (pod.get("spec") or {}).get("enableServiceLinks", True) is not False:
                env.update(service_links(await self.proxy.list_objects("Service", namespace)))
            await self.proxy.start()
            env.update(self.proxy.environment(namespace, [self.api_host]))
        env["KUBERNETES_SERVICE_HOST"] = self.api_host
        env["KUBERNETES_SERVICE_PORT"] = str(self.api_port)
        env["KUBERNETES_SERVICE_PORT_HTTPS"] = str(self.api_port)
        for source in container.get("envFrom") or ():
            prefix = str(source.get("prefix") or "")
            for field_name, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
                ref = source.get(field_name)
                if isinstance(ref, dict):
                    found = await self.lookup(kind, namespace, str(ref.get("name")))
                    for key, value in _data(found, kind).items():
                        env[prefix + key] = value
        for var in container.get("env") or ():
            name = str(var.get("name"))
            if "value" in var or "valueFrom" not in var:
                env[name] = expand(str(var.get("value") or ""), env)
                continue
            resolved = await self._value_from(pod, container, var["valueFrom"] or {})
            if resolved is not None:
                env[name] = resolved
        if self.images.resolve(str(container.get("image") or "")) is not None and self.local_image(container).entrypoint:
            # The image allows its entrypoint only: what would make that run other code goes.
            for name in [n for n in env if n in INJECTING_VARIABLES or n.startswith(("LD_", "DYLD_"))]:
                del env[name]
        return env

    async def _value_from(self, pod: Obj, container: Obj, value_from: Obj) -> str | None:
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        for field_name, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
            ref = value_from.get(field_name)
            if isinstance(ref, dict):
                found = await self.lookup(kind, namespace, str(ref.get("name")))
                return _data(found, kind).get(str(ref.get("key")))
        field_ref = value_from.get("fieldRef")
        if isinstance(field_ref, dict):
            return field_value(pod, str(field_ref.get("fieldPath") or ""))
        resource_ref = value_from.get("resourceFieldRef")
        if isinstance(resource_ref, dict):
            return resource_value(container, resource_ref)
        return None


async def _exit_code(process: asyncio.subprocess.Process) -> int:
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


def _kill_carrying(entry: str, *, prefix: bool = False) -> list[int]:
    """SIGKILL to every process :func:`_carrying` finds; their ids."""
    killed = []
    for pid in _carrying(entry, prefix=prefix):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


def _signal_group(state: ContainerRun, sig: int) -> None:
    if state.process is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(state.process.pid, sig)


def _process_mark(pid: int) -> str:
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


def _runs_logged(folder: pathlib.Path) -> list[int]:
    """The numbers of the runs whose logs are in a container's folder, in order."""
    return sorted(int(path.stem) for path in folder.glob("*.log") if path.stem.isdigit())


def _working_dir(container: Obj, root: pathlib.Path) -> str:
    """The container's ``workingDir`` in its root (a volume mounted there), else on this
    machine, else the container's root."""
    working = str(container.get("workingDir") or "")
    if working:
        inside = root / working.lstrip("/")
        if inside.is_dir():
            return str(inside)
        if os.path.isdir(working):
            return working
    return str(root)


def _mounts(container: Obj, path: str) -> bool:
    return any(m.get("mountPath") == path for m in container.get("volumeMounts") or () if isinstance(m, dict))


def _termination_message(root: pathlib.Path, container: Obj) -> str:
    """What the process wrote at its ``terminationMessagePath`` (at most 4 KiB, as upstream)."""
    path = str(container.get("terminationMessagePath") or DEFAULT_TERMINATION_MESSAGE_PATH)
    with contextlib.suppress(OSError, CannotMount), inside(root, path).open("rb") as written:
        return written.read(MAX_TERMINATION_MESSAGE_BYTES).decode(errors="replace")
    return ""


def _data(obj: Obj | None, kind: str) -> dict[str, str]:
    if obj is None:
        return {}
    values = {str(k): str(v) for k, v in (obj.get("data") or {}).items()}
    if kind == "Secret":
        return {key: base64.b64decode(value).decode(errors="replace") for key, value in values.items()}
    return values


@dataclass
class ExecProcess:
    """A command to run in a container: started by :meth:`start`; with a terminal, ``terminal``
    is the terminal's controlling side (its output and input; the process's streams are the
    terminal)."""

    command: list[str]
    cwd: str
    env: dict[str, str]
    stdin: bool
    tty: bool
    terminal: int | None = None
    _process: asyncio.subprocess.Process | None = None

    @property
    def process(self) -> asyncio.subprocess.Process:
        assert self._process is not None, "the command has not started"
        return self._process

    async def start(self, width: int = 0, height: int = 0) -> None:
        """Start the command (with a terminal, of that size); CommandFailed: why it could not."""
        if not self.tty:
            try:
                self._process = await asyncio.create_subprocess_exec(
                    *self.command,
                    cwd=self.cwd,
                    env=self.env,
                    stdin=asyncio.subprocess.PIPE if self.stdin else asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    start_new_session=True,
                )
            except OSError as exc:
                raise CommandFailed(_exec_failure(self.command, exc)) from None
            return
        controller, terminal = pty.openpty()
        os.set_blocking(controller, False)
        self.terminal = controller
        if width and height:
            self.resize(width, height)
        try:
            self._process = await asyncio.create_subprocess_exec(
                *self.command,
                cwd=self.cwd,
                env=self.env,
                stdin=terminal,
                stdout=terminal,
                stderr=terminal,
                start_new_session=True,
                preexec_fn=_take_terminal,
            )
        except OSError as exc:
            raise CommandFailed(_exec_failure(self.command, exc)) from None
        finally:
            os.close(terminal)

    def resize(self, width: int, height: int) -> None:
        if self.terminal is not None:
            with contextlib.suppress(OSError):
                fcntl.ioctl(self.terminal, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))

    async def write(self, data: bytes) -> None:
        """Input for the command (its terminal, or its stdin)."""
        await _give(data, self.terminal, self.process.stdin)

    async def end_input(self) -> None:
        """The client's input has ended: the command's stdin closes (at a terminal, an EOF)."""
        if self.terminal is not None:
            await _give(b"\x04", self.terminal, None)
        elif self.process.stdin is not None:
            self.process.stdin.close()

    def kill(self) -> None:
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)

    def close(self) -> None:
        if self.terminal is not None:
            with contextlib.suppress(OSError):
                os.close(self.terminal)
            self.terminal = None


@dataclass
class Attachment:
    """A running container's process as ``kubectl attach`` reaches it: its output as it comes,
    its stdin (a pipe with ``stdin: true``, its terminal with ``tty: true``), its terminal's
    size; ``ended`` finishes with the run."""

    state: ContainerRun
    tty: bool
    stdin_once: bool
    ended: asyncio.Task[None]

    def listen(self) -> asyncio.Queue[tuple[str, bytes]]:
        """A queue of (stream, chunk) of the output from now on; ("", b"") at the run's end."""
        queue: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue(LISTENER_CHUNKS)
        self.state.listeners.add(queue)
        if not self.state.running:
            queue.put_nowait(("", b""))
        return queue

    def leave(self, queue: asyncio.Queue[tuple[str, bytes]], *, had_stdin: bool) -> None:
        """Stop listening; with ``stdinOnce``, the stdin of one who had it ends as they go."""
        self.state.listeners.discard(queue)
        if had_stdin:
            self.input_ended()

    def input_ended(self) -> None:
        """The attached client's input has ended: with ``stdinOnce``, so has the container's."""
        if self.stdin_once:
            self.close_stdin()

    async def write(self, data: bytes) -> None:
        await _give(data, self.state.terminal, self.state.stdin)

    def close_stdin(self) -> None:
        if self.state.stdin is not None:
            self.state.stdin.close()
        elif self.state.terminal is not None:
            with contextlib.suppress(OSError):
                os.write(self.state.terminal, b"\x04")  # end of input at a terminal

    def resize(self, width: int, height: int) -> None:
        if self.state.terminal is not None:
            with contextlib.suppress(OSError):
                fcntl.ioctl(self.state.terminal, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))


async def _give(data: bytes, terminal: int | None, stdin: asyncio.StreamWriter | None) -> None:
    """Input for a process: to its terminal (a non-blocking descriptor: this waits, on the loop,
    until the terminal takes it), else to its stdin pipe (drained)."""
    if terminal is not None:
        loop = asyncio.get_running_loop()
        while data:
            try:
                data = data[os.write(terminal, data) :]
            except BlockingIOError:
                writable = loop.create_future()
                loop.add_writer(terminal, writable.set_result, None)
                try:
                    await writable
                finally:
                    loop.remove_writer(terminal)
            except OSError:
                return  # the terminal is gone (its process ended)
    elif stdin is not None and not stdin.is_closing():
        stdin.write(data)
        with contextlib.suppress(ConnectionError):
            await stdin.drain()


def _exec_failure(command: list[str], exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return f'exec: "{command[0]}": executable file not found in $PATH'
    return f'exec: "{command[0]}": {exc.strerror or exc}'


def _take_terminal() -> None:
    """In the child, after setsid: the terminal on its stdin becomes its controlling one."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def memory_limit(container: Obj) -> int | None:
    """The container's memory limit in bytes (``resources.limits.memory``), if it has one."""
    value = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    if value is None:
        return None
    amount = _bytes(str(value))
    return int(amount) if amount > 0 else None


_QUANTITY_SUFFIXES = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def _bytes(quantity: str) -> float:
    number = quantity.rstrip("kKMGTi")
    suffix = quantity[len(number) :]
    try:
        return float(number) * _QUANTITY_SUFFIXES.get(suffix, 0)
    except ValueError:
        return 0.0


def _preparation(*, tty: bool, memory: int | None) -> Callable[[], None] | None:
    """What the child does before it runs the container's program: take its terminal, and hold
    its data segments (heap and private mappings: RLIMIT_DATA) to the memory limit. A process past
    it sees its allocations fail (a MemoryError, ENOMEM), not an OOM kill; CPU limits are not
    applied."""
    if not tty and memory is None:
        return None

    def prepare() -> None:
        if tty:
            _take_terminal()
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))

    return prepare


def service_links(services: list[Obj]) -> dict[str, str]:
    """The variables a container gets for each Service of its namespace (``enableServiceLinks``),
    as the kubelet writes them: ``<NAME>_SERVICE_HOST`` and ``_PORT`` (and ``_PORT_<PORT NAME>``),
    and Docker's link variables (``<NAME>_PORT=tcp://<ip>:<port>``, ``<NAME>_PORT_<port>_TCP``...)."""
    env: dict[str, str] = {}
    for service in services:
        spec = service.get("spec") or {}
        ip, ports = spec.get("clusterIP"), [p for p in spec.get("ports") or () if isinstance(p, dict)]
        if not ip or ip == "None" or not ports:
            continue
        name = str((service.get("metadata") or {}).get("name")).upper().replace("-", "_")
        env[f"{name}_SERVICE_HOST"] = str(ip)
        env[f"{name}_SERVICE_PORT"] = str(ports[0].get("port"))
        for port in ports:
            if port.get("name"):
                env[f"{name}_SERVICE_PORT_{str(port['name']).upper().replace('-', '_')}"] = str(port.get("port"))
        first = ports[0]
        env[f"{name}_PORT"] = f"{str(first.get('protocol') or 'TCP').lower()}://{ip}:{first.get('port')}"
        for port in ports:
            protocol = str(port.get("protocol") or "TCP")
            prefix = f"{name}_PORT_{port.get('port')}_{protocol}"
            env[prefix] = f"{protocol.lower()}://{ip}:{port.get('port')}"
            env[f"{prefix}_PROTO"] = protocol.lower()
            env[f"{prefix}_PORT"] = str(port.get("port"))
            env[f"{prefix}_ADDR"] = str(ip)
    return env


def _containers(pod: Obj) -> list[Obj]:
    return [c for c in (pod.get("spec") or {}).get("containers") or () if isinstance(c, dict)]


def _init_containers(pod: Obj) -> list[Obj]:
    return [c for c in (pod.get("spec") or {}).get("initContainers") or () if isinstance(c, dict)]


def _init_done(container: Obj, state: ContainerRun | None) -> bool:
    """An init container has done its work: a sidecar has started, another has succeeded."""
    if state is None:
        return False
    if container.get("restartPolicy") == "Always":
        return state.running and state.started_ok
    return not state.running and state.terminated is not None and state.terminated.get("exitCode") == 0


def _tail_message(log_file: pathlib.Path) -> str:
    """The end of a run's log as its termination message: its last lines, at most 2 KiB (read
    from the file's end: a log may be megabytes)."""
    with contextlib.suppress(OSError), log_file.open("rb") as log:
        log.seek(0, os.SEEK_END)
        log.seek(max(0, log.tell() - 64 * 1024))
        records = log.read().decode(errors="replace").splitlines()
        lines = [record.partition(" F ")[2] for record in records if " F " in record]
        return "\n".join(lines[-MESSAGE_LINES:])[-MESSAGE_BYTES:]
    return ""


def _tell(listener: asyncio.Queue[tuple[str, bytes]], item: tuple[str, bytes]) -> None:
    """Give an attached client the output; one that has fallen LISTENER_CHUNKS behind is told
    so, in place of what it missed (``(TOO_SLOW, b"")``), and gets no more."""
    try:
        listener.put_nowait(item)
    except asyncio.QueueFull:
        while not listener.empty():
            listener.get_nowait()
        listener.put_nowait((TOO_SLOW, b""))


async def _read(stream: asyncio.StreamReader) -> bytes:
    """The stream's next bytes; b"" at its end (a terminal's ends with EIO)."""
    try:
        return await stream.read(65536)
    except OSError:
        return b""


async def _terminal_reader(controller: int) -> tuple[asyncio.StreamReader, asyncio.ReadTransport]:
    """A reader of what a terminal shows, from its controlling side (it ends, EIO, when every
    process holding the terminal has gone), and its transport (closed before the terminal)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(controller, "rb", buffering=0, closefd=False)
    )
    return reader, transport


class _LogWriter:
    """Writes a run's output into its log, a line at a time with its time and stream, and gives
    it, as it comes, to whoever is attached (``listeners``)."""

    def __init__(self, path: pathlib.Path, listeners: set[asyncio.Queue[tuple[str, bytes]]]) -> None:
        self.path = path
        self.listeners = listeners
        path.touch()

    async def copy(self, stream: asyncio.StreamReader, name: str) -> None:
        """Copy ``stream`` until it ends: whole lines tagged F, a line longer than 16 KiB in
        parts tagged P (the CRI's partial lines), a last line without a newline as it is."""
        pending = b""
        while chunk := await _read(stream):
            for listener in self.listeners:
                _tell(listener, (name, chunk))
            pending += chunk
            *lines, pending = pending.split(b"\n")
            records = [(line, "F") for line in lines]
            if len(pending) > PARTIAL_BYTES:
                records.append((pending, "P"))
                pending = b""
            self._write(name, records)
        if pending:
            self._write(name, [(pending, "F")])

    def _write(self, name: str, records: list[tuple[bytes, str]]) -> None:
        if not records:
            return
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        data = b"".join(f"{stamp} {name} {tag} ".encode() + line + b"\n" for line, tag in records)
        with self.path.open("ab") as out:
            if out.tell() + len(data) > MAX_LOG_BYTES:
                out.truncate(0)  # past the cap the log starts again
                out.seek(0)
            out.write(data)
