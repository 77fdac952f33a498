"""The process node: the containers of pods whose images are local (``localimages``) run as
processes on this machine, as a kubelet would run them in containers.

A container's process gets its argv (the image's entrypoint or the container's own command,
then its args, ``$(VAR)`` expanded as Kubernetes does), its environment (literal values,
``valueFrom`` ConfigMap and Secret keys and ``fieldRef``, ``envFrom``, and
``KUBERNETES_SERVICE_HOST``/``_PORT`` naming the embedded server), and ``workingDir`` when it
exists on this machine (else the pod's own folder). It runs in a session of its own, so that
stopping it reaches whatever it started. A Python image's process (this interpreter running a
module or code) is forked by the node's fork server, which has its package's libraries imported
already (``forkserver``), where that makes the process ``python`` would have made.

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
import contextlib
import logging
import os
import pathlib
import pty
import shutil
import signal
import time
from collections.abc import Coroutine
from typing import Any

from kubeloop.api import timestamps
from kubeloop.api.object import Obj
from kubeloop.containerpath import ROOT_VARIABLE
from kubeloop.node.containerlogs import LogWriter, runs_logged, tail_message, termination_message
from kubeloop.node.execsessions import Attachment, ExecProcess, tell, terminal_reader
from kubeloop.node.forkserver import ForkedProcess, ForkServer, ForkServerUnavailable, python_program
from kubeloop.node.localimages import LocalImage, LocalImages
from kubeloop.node.podaddresses import PREFIX
from kubeloop.node.podevents import KubeletEvents
from kubeloop.node.podruns import (
    CannotRun,
    ContainerProcess,
    ContainerRun,
    PodRun,
    PodState,
    Record,
    containers_of,
    init_containers_of,
    init_done,
    pod_state,
)
from kubeloop.node.podvolumes import (
    CLAIMS,
    IssueToken,
    Lookup,
    PodVolumes,
)
from kubeloop.node.probes import ProbeTarget, probe_run
from kubeloop.node.processgroups import (
    READER_GRACE_SECONDS,
    end_pod,
    exit_code,
    kill_carrying,
    kill_left_behind,
    process_mark,
    signal_group,
)
from kubeloop.node.processsetup import (
    SERVICE_ACCOUNT_DIR,
    ContainerSetup,
    memory_limit,
    mounts,
    preparation,
    working_dir,
)
from kubeloop.node.serviceproxy import ServiceProxy
from kubeloop.node.sessions import CommandRefused

log = logging.getLogger("kubeloop.node.processes")

#: The longest a stopping server waits for its pods' processes to end on SIGTERM.
CLOSE_GRACE_SECONDS = 2.0  # within the controller manager's 5 s to stop


#: The longest a crashing container waits before it starts again (the kubelet's).
MAX_BACKOFF_SECONDS = 300.0

#: A run this long resets the back-off.
BACKOFF_RESET_SECONDS = 600.0

#: Local pods' addresses: 127.244.x.y (the kubelet gives them out: ``podaddresses``).
LOCAL_ADDRESS_PREFIX = PREFIX

#: The probes a container may have.
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


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
        fork_server: bool = True,
    ) -> None:
        # Absolute: a container runs in a folder of its own, and its root is named in its env.
        self.root = root.absolute()
        self.images = images
        self.lookup = lookup
        self.issue_token = issue_token
        self.backoff_seconds = backoff_seconds
        #: The address probes reach a pod's processes at.
        self.pod_host = pod_host
        #: What each container's process is given (argv, environment with the API server's
        #: address and, through the node's proxy, the Services', a kubeconfig).
        self.setup = ContainerSetup(images, lookup, api_host=api_host, api_port=api_port, proxy=proxy)
        #: The kubelet's Events about the containers (``record`` writes one).
        self.events = KubeletEvents(record or (lambda ref, kind, reason, message: None))
        self.pods: dict[tuple[str, str], PodRun] = {}
        #: Forks the processes of Python images from a warm interpreter (None: each starts anew).
        self.fork_server = ForkServer() if fork_server else None
        self.changed: asyncio.Queue[Obj] = asyncio.Queue()
        self._stopping: set[asyncio.Task[None]] = set()
        #: The pods whose processes those tasks are stopping.
        self._ending: dict[asyncio.Task[None], PodRun] = {}

    # ------------------------------------------------------------------ which pods

    def status(self, pod: Obj) -> PodState:
        """The pod's phase, its containers' and init containers' statuses, and its conditions'
        inputs, as its processes have it."""
        return pod_state(self.pod_run(pod), pod)

    def handles(self, pod: Obj) -> bool:
        """Whether every container of ``pod`` has a local image."""
        containers = containers_of(pod)
        return bool(containers) and all(self.images.resolve(str(c.get("image") or "")) for c in containers)

    def local_image(self, container: Obj) -> LocalImage:
        return self.setup.local_image(container)

    # ------------------------------------------------------------------ start and stop

    def clean_up_left_behind(self) -> list[int]:
        """Kill what an earlier server process left running (its ids are in the pods' folders);
        the process groups killed."""
        return kill_left_behind(self.root)

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
            earlier = runs_logged(run.folder / name)
            state = run.containers[name] = ContainerRun(name, restart_count=earlier[-1] + 1 if earlier else 0)
        env = await self.setup.environment(pod, container)
        argv = self.setup.argv(container, env)
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
        process: ContainerProcess | None = await self._forked(container, argv, env, cwd) if not tty else None
        if process is None:
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
                    preexec_fn=preparation(tty=tty, memory=memory_limit(container)),
                )
            except OSError as exc:
                if controller is not None:
                    os.close(controller)
                raise CannotRun(f'failed to start container "{name}": {exc.strerror or exc}: {argv[0]}') from None
            finally:
                if terminal is not None:
                    os.close(terminal)
        (folder / "pid").write_text(process_mark(process.pid))
        self.events.started(pod, container)
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
                probe_run(pod, run, state, probes, target, events=self.events, changed=lambda: self._changed(run)), name=f"probes {run.name}/{name}"
            )
        log_file = folder / f"{state.restart_count}.log"
        for old in runs_logged(folder)[:-1]:  # the current run's log and the previous one are kept
            if old < state.restart_count - 1:
                (folder / f"{old}.log").unlink(missing_ok=True)
        writer = LogWriter(log_file, state.listeners)
        state.stdin, state.terminal, state.stdin_attached = process.stdin, controller, False
        if controller is not None:  # a terminal: one stream, read from its controlling side
            shown, state.terminal_transport = await terminal_reader(controller)
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

    async def _forked(
        self, container: Obj, argv: list[str], env: dict[str, str], cwd: str
    ) -> ForkedProcess | None:
        """The container's process forked by the fork server, if its command is a Python program
        the fork server runs as ``python`` would (``forkserver``); None: start it anew."""
        if self.fork_server is None or container.get("stdin") or memory_limit(container) is not None:
            return None
        program = python_program(
            argv, env, package=self.local_image(container).package, fork_env=self.fork_server.env
        )
        if program is None:
            return None
        try:
            return await self.fork_server.launch(program, env=env, cwd=cwd)
        except ForkServerUnavailable as exc:
            log.warning("process node: starting %s without the fork server: %s", argv[0], exc)
            return None

    def _enter(
        self, env: dict[str, str], folder: pathlib.Path, root: pathlib.Path, container: Obj, namespace: str
    ) -> str:
        """Complete a process's environment with the container's root (and a kubeconfig of its
        ServiceAccount's credentials); the folder it starts in."""
        env[ROOT_VARIABLE] = str(root)
        if mounts(container, SERVICE_ACCOUNT_DIR) and "KUBECONFIG" not in env:
            env["KUBECONFIG"] = str(self.setup.kubeconfig(folder, root, namespace))
        return working_dir(container, root)

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
        env = await self.setup.environment(pod, container)
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
        code = await exit_code(process)
        # What it started that left its process group ends with it too (a cgroup's kill).
        await asyncio.to_thread(kill_carrying, f"{ROOT_VARIABLE}={run.folder / state.name / 'root'}")
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
            tell(listener, ("", b""))
        terminated: Obj = {
            "exitCode": code if code >= 0 else 128 - code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": state.started_at,
            "finishedAt": timestamps.now(),
            "containerID": f"kubeloop://{run.uid}/{state.name}",
        }
        if code < 0:
            terminated["signal"] = -code
        message = termination_message(run.folder / state.name / "root", container)
        if not message and code != 0 and container.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            message = tail_message(log_file)
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

    def _changed(self, run: PodRun) -> None:
        self.changed.put_nowait(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": run.name, "namespace": run.namespace}}
        )

    def stop(
        self, namespace: str, name: str, grace_seconds: float | None = None, *, pod: Obj | None = None
    ) -> bool:
        """Stop the pod's processes: SIGTERM, then SIGKILL after ``grace_seconds`` (else its
        terminationGracePeriodSeconds), in the background (the grace period holds no caller;
        :meth:`close` awaits it); a Killing event for each container running (about ``pod``, or
        what the runtime knows of it once it is gone). Whether they are still stopping:
        :attr:`changed` names the pod once they have ended."""
        run = self.pods.pop((namespace, name), None)
        if run is not None:
            if grace_seconds is not None:
                run.grace_seconds = grace_seconds
            self._say_stopping(run, pod)
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
        self._say_stopping(run, pod)
        self._in_background(run, end_pod(run), f"halt {run.namespace}/{run.name}")

    def _say_stopping(self, run: PodRun, pod: Obj | None) -> None:
        """A Killing event for each of the run's containers that is running."""
        about = pod or {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": run.name, "namespace": run.namespace, "uid": run.uid}}
        for state in run.containers.values():
            if state.running:
                self.events.stopping(about, state.name)

    async def _stop(self, run: PodRun) -> None:
        """End the pod's processes and remove its folder; then name the pod in :attr:`changed`
        (a pod being deleted is removed once its processes have ended)."""
        try:
            await end_pod(run)
            shutil.rmtree(run.folder, ignore_errors=True)
        finally:
            self._ending = {task: ending for task, ending in self._ending.items() if ending is not run}
            self._changed(run)

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
                        signal_group(state, signal.SIGKILL)
            kill_carrying(f"{ROOT_VARIABLE}={self.root}/", prefix=True)
        try:
            await asyncio.gather(*self._stopping, return_exceptions=True)
        finally:  # once their ends are known: the fork server reports those of what it forked
            if self.fork_server is not None:
                await self.fork_server.close()

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
        for container in init_containers_of(pod):
            name = str(container.get("name"))
            state = run.containers.get(name)
            if container.get("restartPolicy") == "Always":  # a sidecar: runs as long as the pod
                wait = await self._keep(pod, run, container, "Always")
                if wait is not None:
                    again.append(wait)
                if state is None or not (state.running and state.started_ok):
                    return min(again) if again else None
                continue
            if init_done(container, state):
                continue
            if state is not None and state.terminated is not None and policy == "Never" and not state.running:
                return None  # failed, never again: the pod has failed
            wait = await self._keep(pod, run, container, "OnFailure")
            if wait is not None:
                again.append(wait)
            return min(again) if again else None
        for container in containers_of(pod):
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
            if state.waiting is None:  # it ended since it last started: once per back-off
                self.events.back_off(pod, name)
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
            self.events.failed(pod, name, str(refused))
            state = run.containers.setdefault(name, ContainerRun(name))
            state.waiting = {"reason": "RunContainerError", "message": str(refused)}
            state.backoff = min(MAX_BACKOFF_SECONDS, state.backoff * 2 if state.backoff else self.backoff_seconds)
            state.not_before = loop.time() + state.backoff
            return state.backoff
        return None

    # ------------------------------------------------------------------ logs

    def log_file(
        self, namespace: str, name: str, uid: str, container: str, *, previous: bool = False
    ) -> pathlib.Path | None:
        """The log of the container's latest run (or, with ``previous``, the one before), also of
        a pod an earlier server process ran."""
        runs = runs_logged(self.root / uid / container)
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
        container = next(c for c in [*init_containers_of(pod), *containers_of(pod)] if c.get("name") == container_name)
        return run, state, container

    def running(self, namespace: str, name: str, uid: str, container: str) -> bool:
        """Whether the container's current run, in the pod of ``uid``, goes on (its log may grow)."""
        run = self.pods.get((namespace, name))
        state = run.containers.get(container) if run is not None and run.uid == uid else None
        return state is not None and state.running

    # ------------------------------------------------------------------ what a container sees
