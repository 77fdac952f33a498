"""Starting a Python image's process by forking it from a warm interpreter (``zygote``) rather
than starting an interpreter anew: a container whose command is this interpreter running a
module (``-m``) or code (``-c``) starts in milliseconds, with the libraries its package requires
already imported (an AgentRun's runner imports ``openai``: a second of CPU per run otherwise).

A container's process is forked only where the result is the process ``python`` would have
made (:func:`python_program`): its argv names this very interpreter with ``-m`` or ``-c`` (and
``-I`` at most); without ``-I``, its environment has no ``PYTHON*`` variable (the interpreter
reads those as it starts) and no user site-packages folder would be on its path; its locale
variables are the fork server's (its stdio's encoding was chosen as it started); it has no
terminal, no stdin and no memory limit (the limit, RLIMIT_DATA, would count what the fork server
had loaded). Otherwise, or when the fork server cannot fork, it is started as
before.

What differs from a process of its own, and is why ``--no-fork-server`` exists:

- The libraries preloaded saw the fork server's environment (the node's ``PATH``, ``HOME``,
  ``LANG``, ``TZ``) as they were imported; a library that reads a variable at import (not
  when it is used) does not see the container's value. The program's own package is imported
  by each process, not preloaded.
- Its processes share the fork server's hash seed.
- ``/proc/<pid>/environ`` shows the fork server's environment for the container's leading
  process (what it starts shows its own): the node finds that process by the id it keeps in
  the pod's folder, not by ``KUBELOOP_CONTAINER_ROOT``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import json
import logging
import os
import pathlib
import signal
import site
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass

from kubeloop.node import zygote

log = logging.getLogger("kubeloop.node.forkserver")

#: The variables that choose a Python process's stdio encoding as it starts.
LOCALE_VARIABLES = ("LANG", "LC_ALL", "LC_CTYPE")

#: What the fork server's own environment is made of (what every container gets as well).
BASE_VARIABLES = ("PATH", "HOME", "LANG", "TZ")


#: The longest a launch waits for the fork server's answer (its first launch of a package imports
#: that package's libraries first: seconds on a loaded machine) before the node gives up on it.
ANSWER_TIMEOUT_SECONDS = 60.0


class ForkServerUnavailable(Exception):
    """The fork server could not start the process (it is gone, or refused): start it anew."""


@dataclass(frozen=True)
class PythonProgram:
    """A container's command as the fork server runs it."""

    #: ``-m MODULE``, or ``-c CODE``.
    module: str | None
    code: str | None
    #: What follows the module or code (``sys.argv[1:]``).
    args: tuple[str, ...]
    isolated: bool
    #: The command as given (``sys.orig_argv``).
    argv: tuple[str, ...]
    #: The packages whose distributions' requirements the fork server imports first.
    preload: tuple[str, ...]


def _same_interpreter(path: str) -> bool:
    return os.path.isabs(path) and os.path.abspath(path) == os.path.abspath(sys.executable)


def python_program(
    argv: list[str], env: dict[str, str], *, package: str | None = None, fork_env: dict[str, str] | None = None
) -> PythonProgram | None:
    """``argv`` as the fork server would run it in ``env``, or None when only an interpreter of
    its own would make the same process (see the module's docstring). ``package``: the package
    a ``-c`` program's code runs (an installed image's); ``fork_env``: the fork server's
    environment (the node's basics)."""
    if len(argv) < 3 or not _same_interpreter(argv[0]):
        return None
    rest, isolated = argv[1:], False
    if rest[0] == "-I":
        rest, isolated = rest[1:], True
    if len(rest) < 2 or rest[0] not in ("-m", "-c"):
        return None
    if not isolated:
        if any(name.startswith("PYTHON") for name in env):
            return None
        if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
            return None
    base = fork_env if fork_env is not None else base_environment()
    if any(env.get(name) != base.get(name) for name in LOCALE_VARIABLES):
        return None
    preload: tuple[str, ...]
    if rest[0] == "-m":
        module, code = rest[1], None
        if not all(part.isidentifier() for part in module.split(".")):
            return None
        preload = (module.partition(".")[0],)
    else:
        module, code = None, rest[1]
        preload = (package,) if package else ()
    return PythonProgram(module, code, tuple(rest[2:]), isolated, tuple(argv), preload)


def base_environment() -> dict[str, str]:
    """The fork server's environment: the node's basics, which every container gets too."""
    return {name: os.environ[name] for name in BASE_VARIABLES if name in os.environ}


def _when_gone(pid: int, then: Callable[[], None]) -> None:
    """Call ``then`` once process ``pid`` (not a child of this one) has ended."""
    try:
        handle = os.pidfd_open(pid)
    except OSError:  # gone already
        then()
        return
    loop = asyncio.get_running_loop()

    def ended() -> None:
        loop.remove_reader(handle)
        os.close(handle)
        then()

    loop.add_reader(handle, ended)


class ForkedProcess:
    """A container's process the fork server forked: what :class:`asyncio.subprocess.Process`
    offers the node (its id, output, exit code)."""

    stdin: asyncio.StreamWriter | None = None

    def __init__(self, pid: int, stdout: asyncio.StreamReader, stderr: asyncio.StreamReader) -> None:
        self.pid = pid
        self.stdout: asyncio.StreamReader | None = stdout
        self.stderr: asyncio.StreamReader | None = stderr
        self.returncode: int | None = None
        self._ended = asyncio.get_running_loop().create_future()

    def ended(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            self._ended.set_result(code)

    async def wait(self) -> int:
        return int(await asyncio.shield(self._ended))


class ForkServer:
    """The node's fork server: started on the first launch, started again if it dies; owned by
    the process runtime, which :meth:`close`\\ s it after its pods' processes have ended."""

    def __init__(self, *, answer_timeout: float = ANSWER_TIMEOUT_SECONDS) -> None:
        self.env = base_environment()
        self.answer_timeout = answer_timeout
        self._process: asyncio.subprocess.Process | None = None
        self._channel: socket.socket | None = None
        self._lock = asyncio.Lock()
        #: The launches sent and not answered yet, in order (the fork server answers in order);
        #: a launch given up meanwhile leaves its future cancelled.
        self._answers: collections.deque[asyncio.Future[int]] = collections.deque()
        self._running: dict[int, ForkedProcess] = {}
        #: Exit codes of processes that ended before their launch had taken them.
        self._early: dict[int, int] = {}
        #: Processes started for a launch that was given up meanwhile (killed at once).
        self._abandoned: set[int] = set()
        self._closed = False

    async def _start(self) -> socket.socket:
        if self._channel is not None:
            return self._channel
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                str(pathlib.Path(zygote.__file__)),
                str(theirs.fileno()),
                pass_fds=(theirs.fileno(),),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,  # a terminal's Ctrl-C is the node's to pass on
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        asyncio.get_running_loop().add_reader(ours, self._read)
        self._channel = ours
        return ours

    def _read(self) -> None:
        channel = self._channel
        assert channel is not None
        while True:
            try:
                message = channel.recv(65536)
            except BlockingIOError:
                return
            except OSError:
                message = b""
            if not message:
                self._gone()
                return
            said = json.loads(message)
            if "exited" in said:
                process = self._running.pop(int(said["exited"]), None)
                if process is not None:
                    process.ended(int(said["code"]))
                elif int(said["exited"]) in self._abandoned:
                    self._abandoned.discard(int(said["exited"]))
                else:
                    self._early[int(said["exited"])] = int(said["code"])
            elif self._answers:
                answer = self._answers.popleft()
                if "started" in said and answer.done():  # its launch was given up
                    self._abandoned.add(int(said["started"]))
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(int(said["started"]), signal.SIGKILL)
                elif "started" in said:
                    answer.set_result(int(said["started"]))
                elif not answer.done():
                    answer.set_exception(ForkServerUnavailable(str(said.get("refused"))))

    def _gone(self, *, closing: bool = False) -> None:
        """The fork server ended (or is being closed): what it forked can no longer be reaped by
        this node, so it is killed and ends with SIGKILL's code; the next launch starts a new
        fork server."""
        channel, self._channel = self._channel, None
        if channel is not None:
            asyncio.get_running_loop().remove_reader(channel)
            channel.close()
        answers, self._answers = self._answers, collections.deque()
        for answer in answers:
            if not answer.done():
                answer.set_exception(ForkServerUnavailable("the fork server ended"))
        running, self._running = self._running, {}
        if running and not closing:
            log.warning("process node: the fork server ended; killing the %d process(es) it ran", len(running))
        for pid, process in running.items():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            _when_gone(pid, functools.partial(process.ended, -signal.SIGKILL))

    async def launch(
        self, program: PythonProgram, *, env: dict[str, str], cwd: str
    ) -> ForkedProcess:
        """Fork ``program``'s process (ForkServerUnavailable: start it another way)."""
        loop = asyncio.get_running_loop()
        request = json.dumps({
            "module": program.module, "code": program.code, "argv": list(program.args),
            "orig_argv": list(program.argv), "isolated": program.isolated, "env": env, "cwd": cwd,
            "preload": list(program.preload),
        }).encode()  # fmt: skip
        if len(request) > zygote.MAX_LAUNCH_BYTES:
            raise ForkServerUnavailable("the launch is too large for one message")
        async with self._lock:
            if self._closed:
                raise ForkServerUnavailable("the fork server is closed")
            try:
                channel = await self._start()
            except OSError as exc:
                raise ForkServerUnavailable(f"the fork server did not start: {exc}") from None
            out_read, out_write = os.pipe()
            err_read, err_write = os.pipe()
            null = os.open(os.devnull, os.O_RDONLY)
            answer: asyncio.Future[int] = loop.create_future()
            try:
                try:
                    socket.send_fds(channel, [request], [null, out_write, err_write])
                except OSError as exc:
                    self._gone()
                    raise ForkServerUnavailable(f"the fork server is gone: {exc}") from None
                self._answers.append(answer)
            finally:
                for fd in (null, out_write, err_write):
                    os.close(fd)
            try:
                try:
                    async with asyncio.timeout(self.answer_timeout):
                        pid = await asyncio.shield(answer)
                except TimeoutError:
                    # A fork server that does not answer is of no use: it goes (and what it ran:
                    # nothing could report their ends), and its launches start anew.
                    log.warning(
                        "process node: the fork server did not answer within %gs; stopping it",
                        self.answer_timeout,
                    )
                    answer.cancel()
                    if self._process is not None:
                        with contextlib.suppress(ProcessLookupError):
                            self._process.kill()
                    self._gone()
                    raise ForkServerUnavailable("the fork server did not answer") from None
            except BaseException:
                answer.cancel()  # given up: the process it starts is killed at once
                os.close(out_read)
                os.close(err_read)
                raise
            stdout, stderr = asyncio.StreamReader(limit=2**16), asyncio.StreamReader(limit=2**16)
            process = ForkedProcess(pid, stdout, stderr)
            if pid in self._early:
                process.ended(self._early.pop(pid))
            else:
                self._running[pid] = process
            pipes = [(stdout, os.fdopen(out_read, "rb", 0)), (stderr, os.fdopen(err_read, "rb", 0))]
            connected = 0
            try:
                for reader, pipe in pipes:
                    await loop.connect_read_pipe(functools.partial(asyncio.StreamReaderProtocol, reader), pipe)
                    connected += 1
            except BaseException:  # given up (its end is still reported)
                for _, pipe in pipes[connected:]:
                    pipe.close()
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                raise
            return process

    async def close(self) -> None:
        """End the fork server; what it still runs is killed (the node stops its pods first), and
        a later launch is refused (started anew, as without a fork server)."""
        self._closed = True
        self._gone(closing=True)
        if self._process is not None:
            await self._process.wait()
            self._process = None


__all__ = ["ForkServer", "ForkServerUnavailable", "ForkedProcess", "PythonProgram", "python_program"]
