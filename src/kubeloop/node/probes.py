"""A local container's probes, as the kubelet's prober runs them.

``exec`` runs the command as the container would (its environment and working folder, in a
session of its own, killed at ``timeoutSeconds``): exit 0 is success. ``httpGet`` asks
``scheme://host:port/path`` (the host is the pod's address unless ``host`` says otherwise; a
named port is looked up in the container's ports; ``httpHeaders`` sent): a status from 200 to 399
is success, redirects are not followed, a certificate is not checked. ``tcpSocket`` connects.
``grpc`` is not run on the process node: it counts as success, and the pod gets a Warning event
saying so.

:class:`ProbeLoop` runs one probe every ``periodSeconds`` after ``initialDelaySeconds`` and
reports each result with the verdict it led to: success after ``successThreshold`` successes
in a row, failure after ``failureThreshold`` failures in a row. What a verdict does (ready,
started, a restart) is the process node's (``processes``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp

from kubeloop.api.object import Obj
from kubeloop.node.podevents import KubeletEvents
from kubeloop.node.podruns import ContainerRun, PodRun
from kubeloop.node.processgroups import kill_run

#: The kubelet's defaults.
PERIOD_SECONDS, TIMEOUT_SECONDS, SUCCESS_THRESHOLD, FAILURE_THRESHOLD = 10, 1, 1, 3
#: How much of an exec probe's output is kept for its message.
OUTPUT_BYTES = 10 * 1024


@dataclass(frozen=True)
class ProbeTarget:
    """What a probe of one container runs against."""

    host: str
    env: dict[str, str]
    cwd: str
    container: Obj
    #: Why an exec probe may not run (its command would run on this machine though the image
    #: allows only its entrypoint); "" when it may.
    exec_refused: str = ""


async def check(probe: Obj, target: ProbeTarget) -> tuple[bool, str]:
    """Run ``probe`` once: whether it succeeded, and what it said (the message of an Unhealthy
    event when it did not)."""
    timeout = float(probe.get("timeoutSeconds") or TIMEOUT_SECONDS)
    if isinstance(probe.get("exec"), dict):
        if target.exec_refused:
            return False, target.exec_refused
        return await _exec(list(probe["exec"].get("command") or ()), target, timeout)
    if isinstance(probe.get("httpGet"), dict):
        return await _http_get(probe["httpGet"], target, timeout)
    if isinstance(probe.get("tcpSocket"), dict):
        return await _tcp(probe["tcpSocket"], target, timeout)
    return True, ""


def port_of(value: object, container: Obj) -> int | None:
    """A probe's port: a number, or the name of one of the container's ports."""
    if isinstance(value, int):
        return value
    text = str(value)
    if text.isdigit():
        return int(text)
    for port in container.get("ports") or ():
        if port.get("name") == text:
            return int(port.get("containerPort"))
    return None


async def _exec(command: list[str], target: ProbeTarget, timeout: float) -> tuple[bool, str]:
    if not command:
        return False, "exec probe has no command"
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=target.cwd,
            env=target.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return False, f"exec probe failed to start: {exc.strerror or exc}: {command[0]}"
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        _kill(process)
        await process.wait()
        return False, f"command {command!r} timed out"
    except asyncio.CancelledError:  # the run it probes has ended: the probe goes with it
        _kill(process)
        raise
    said = output[:OUTPUT_BYTES].decode(errors="replace").strip()
    if process.returncode == 0:
        return True, said
    return False, said or f"command {command!r} exited with {process.returncode}"


def _kill(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def _http_get(action: Obj, target: ProbeTarget, timeout: float) -> tuple[bool, str]:
    port = port_of(action.get("port"), target.container)
    if port is None:
        return False, f"port {action.get('port')!r} is not a port of the container"
    scheme = str(action.get("scheme") or "HTTP").lower()
    host = str(action.get("host") or target.host)
    path = str(action.get("path") or "/")
    if not path.startswith("/"):
        path = "/" + path
    url = f"{scheme}://{host}:{port}{path}"
    headers = {"User-Agent": "kube-probe/1.33", "Accept": "*/*"}
    headers.update({str(h.get("name")): str(h.get("value")) for h in action.get("httpHeaders") or ()})
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout), trust_env=False) as session,
            session.get(url, headers=headers, allow_redirects=False, ssl=insecure) as response,
        ):
            body = (await response.content.read(OUTPUT_BYTES)).decode(errors="replace")
            if 200 <= response.status < 400:
                return True, body
            return False, f"HTTP probe failed with statuscode: {response.status}"
    except TimeoutError:
        return False, f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
    except aiohttp.ClientError as exc:
        return False, f'Get "{url}": {exc}'


async def _tcp(action: Obj, target: ProbeTarget, timeout: float) -> tuple[bool, str]:
    port = port_of(action.get("port"), target.container)
    if port is None:
        return False, f"port {action.get('port')!r} is not a port of the container"
    host = str(action.get("host") or target.host)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError) as exc:
        return False, f"dial tcp {host}:{port}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else 'i/o timeout'}"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True, ""


#: Told each result: (succeeded, what the probe said, the new verdict or None when unchanged).
Report = Callable[[bool, str, bool | None], Awaitable[None]]


class ProbeLoop:
    """Runs one probe of a container run, every ``periodSeconds`` after ``initialDelaySeconds``,
    until cancelled (or, ``until_success``, until its verdict is success). Its verdict starts as
    ``initial`` and becomes success after ``successThreshold`` successes in a row, failure after
    ``failureThreshold`` failures in a row; ``report`` is told every result."""

    def __init__(
        self,
        probe: Obj,
        target: ProbeTarget,
        report: Report,
        *,
        initial: bool | None = None,
        until_success: bool = False,
        run: Callable[[Obj, ProbeTarget], Awaitable[tuple[bool, str]]] = check,
    ) -> None:
        self.probe = probe
        self.target = target
        self.report = report
        self.ok = initial
        self.until_success = until_success
        self.run = run

    async def loop(self) -> None:
        period = float(self.probe.get("periodSeconds") or PERIOD_SECONDS)
        successes_needed = int(self.probe.get("successThreshold") or SUCCESS_THRESHOLD)
        failures_needed = int(self.probe.get("failureThreshold") or FAILURE_THRESHOLD)
        await asyncio.sleep(float(self.probe.get("initialDelaySeconds") or 0))
        successes = failures = 0
        while True:
            ok, message = await self.run(self.probe, self.target)
            successes, failures = (successes + 1, 0) if ok else (0, failures + 1)
            verdict: bool | None = None
            if ok and successes >= successes_needed and self.ok is not True:
                verdict = self.ok = True
            elif not ok and failures >= failures_needed and self.ok is not False:
                verdict = self.ok = False
            await self.report(ok, message, verdict)
            if self.until_success and self.ok:
                return
            await asyncio.sleep(period)


async def probe_run(
    pod: Obj,
    run: PodRun,
    state: ContainerRun,
    probes: dict[str, Obj],
    target: ProbeTarget,
    *,
    events: KubeletEvents,
    changed: Callable[[], None],
) -> None:
    """The run's probes: startup first, until it succeeds; then readiness and liveness side
    by side. A failed result is a Warning event (Unhealthy); startup or liveness failing
    its threshold kills the run (Killing), whose end its restart policy then handles. ``events``
    records them; ``changed`` says the run's status changed."""
    grace = run.grace_seconds

    def reporter(kind: str) -> Report:
        label = {"startupProbe": "Startup", "readinessProbe": "Readiness", "livenessProbe": "Liveness"}[kind]

        async def report(ok: bool, message: str, verdict: bool | None) -> None:
            if not ok:
                events.unhealthy(pod, state.name, f"{label} probe failed: {message}")
            if verdict is None:
                return
            if kind == "readinessProbe":
                state.ready = verdict
                changed()
            elif kind == "startupProbe" and verdict:
                state.started_ok = True
                state.ready = "readinessProbe" not in probes
                changed()
            elif not verdict:  # startup or liveness failed: the run is killed
                events.stopping(pod, state.name, f"Container {state.name} failed {label.lower()} probe, will be restarted")
                own = probes[kind].get("terminationGracePeriodSeconds")
                await kill_run(state, float(grace if own is None else own))

        return report

    for kind, probe in probes.items():
        if probe.get("grpc") is not None:
            events.unhealthy(pod, state.name, f"{kind}: grpc probes are not run by the process node; taken as success")
    if "startupProbe" in probes:
        await ProbeLoop(probes["startupProbe"], target, reporter("startupProbe"), until_success=True).loop()
    loops = [
        ProbeLoop(probes[kind], target, reporter(kind), initial=kind == "livenessProbe").loop()
        for kind in ("readinessProbe", "livenessProbe")
        if kind in probes
    ]
    await asyncio.gather(*loops)
