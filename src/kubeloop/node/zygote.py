"""The Python fork server of the process node (``forkserver`` starts and talks to it): a process
of the node's own interpreter that has imported the libraries Python images need, and forks
a container's process from itself instead of starting an interpreter that imports them again.

It reads launches from a ``SOCK_SEQPACKET`` socket (its only argument is the socket's fd): one
JSON message each, with the container's stdin, stdout and stderr attached (``SCM_RIGHTS``). For
each it first imports what the launch names in ``preload`` (the distributions its program's
package requires, once), then forks; the child takes a session of its own, its fds, folder,
environment and argv, and runs the module (``-m``) or code (``-c``) as
``__main__``, as ``python`` would. It answers ``{"started": pid}`` (or ``{"refused": why}``),
and ``{"exited": pid, "code": c}`` once it has reaped a child (``code`` as
:attr:`asyncio.subprocess.Process.returncode` has it: minus the signal that killed it).

It ends when the node's end of the socket closes; its children do not end with it (a node that
starts again kills what an earlier one left, from the pods' folders).

It imports nothing of kubeloop but this module: what it has loaded, every child has.
"""

from __future__ import annotations

import array
import gc
import json
import os
import re
import selectors
import signal
import socket
import sys
import threading
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

#: The largest launch (its JSON: argv, environment...) the socket carries in one message.
MAX_LAUNCH_BYTES = 128 * 1024


@dataclass
class Launch:
    """What a child runs, and how it is set up."""

    module: str | None
    code: str | None
    argv: list[str]
    orig_argv: list[str]
    isolated: bool
    env: dict[str, str]
    cwd: str
    fds: list[int]
    #: The pipe's end whose closing tells the fork server that the child leads its own session
    #: (only then is its id answered: a signal to its group must reach it).
    ready: int = -1

    def enter(self) -> None:
        """In the child: its session, fds, folder and environment."""
        os.setsid()
        os.close(self.ready)
        for target, fd in enumerate(self.fds):
            os.dup2(fd, target)
        for fd in set(self.fds):
            if fd > 2:
                os.close(fd)
        os.chdir(self.cwd)
        os.environ.clear()
        os.environ.update(self.env)
        sys.orig_argv = self.orig_argv
        if not self.isolated:  # ``python -m``: the folder it starts in; ``-c``: the current one
            sys.path.insert(0, os.getcwd() if self.module is not None else "")

    def run(self) -> None:
        """In the child: its program as ``__main__`` (its exit is the interpreter's)."""
        import runpy

        if self.module is not None:
            sys.argv = [self.module, *self.argv]  # run_module puts the module's file first
            runpy.run_module(self.module, run_name="__main__", alter_sys=True)
            return
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = __builtins__
        sys.modules["__main__"] = main
        sys.argv = ["-c", *self.argv]
        exec(compile(self.code or "", "<string>", "exec"), main.__dict__)


# ---------------------------------------------------------------------------- preloading

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class Preloader:
    """Imports, once per package a launch names, the top-level modules of the distributions
    that package's distribution requires (what its programs import; not the package itself,
    whose code may read the container's environment as it is imported)."""

    def __init__(self) -> None:
        self.done: set[str] = set()
        self._distributions: dict[str, list[str]] | None = None

    def _modules_of(self) -> dict[str, list[str]]:
        import importlib.metadata

        if self._distributions is None:
            self._distributions = {}
            for module, names in importlib.metadata.packages_distributions().items():
                for name in names:
                    self._distributions.setdefault(_normal(name), []).append(module)
        return self._distributions

    def wanted(self, package: str) -> Iterator[str]:
        """The modules to import for ``package``'s programs."""
        import importlib.metadata

        by_distribution = self._modules_of()
        for distribution, modules in by_distribution.items():
            if package not in modules:
                continue
            for requirement in importlib.metadata.requires(distribution) or ():
                name, _, marker = requirement.partition(";")
                found = _NAME.match(name.strip())
                if found is None or "extra" in marker:
                    continue
                required = _normal(found.group())
                provided = [m for m in by_distribution.get(required, ()) if m.isidentifier() and not m.startswith("_")]
                # The module named as its distribution is, if there is one (slack_sdk, not the
                # deprecated ``slack`` it carries too); else every module it provides.
                yield from [m for m in provided if _normal(m) == required] or provided

    def load(self, packages: list[str]) -> None:
        import importlib

        for package in packages:
            if package in self.done:
                continue
            self.done.add(package)
            try:
                modules = sorted(set(self.wanted(package)))
            except Exception:  # (metadata it cannot read: nothing preloaded)
                continue
            for module in modules:
                # What it warns of as it loads is for a program that imports it to show.
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        importlib.import_module(module)
                    except BaseException:  # (a child that imports it says why)
                        continue


# ---------------------------------------------------------------------------- serving


def _exit_code(status: int) -> int:
    return os.waitstatus_to_exitcode(status)


class Zygote:
    """The serving loop: launches in, children forked, their ends reported."""

    def __init__(self, channel: socket.socket) -> None:
        self.channel = channel
        self.preloader = Preloader()
        self.wakeup_read, self.wakeup_write = os.pipe()
        os.set_blocking(self.wakeup_read, False)
        os.set_blocking(self.wakeup_write, False)

    def serve(self) -> Launch | None:
        """Serve until the node goes (None), or, in a child, return what it is to run."""
        signal.set_wakeup_fd(self.wakeup_write)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        selector = selectors.DefaultSelector()
        selector.register(self.channel, selectors.EVENT_READ)
        selector.register(self.wakeup_read, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                if key.fileobj is self.channel:
                    launch = self._receive()
                    if launch is None:
                        return None
                    if self._fork(launch):
                        selector.close()
                        return launch
                else:
                    self._reap()

    def _send(self, message: dict[str, object]) -> None:
        self.channel.sendall(json.dumps(message).encode())

    def _receive(self) -> Launch | None:
        fds = array.array("i")
        try:
            message, ancillary, _, _ = self.channel.recvmsg(MAX_LAUNCH_BYTES, socket.CMSG_SPACE(3 * fds.itemsize))
        except ConnectionError:  # the node went with answers unread
            return None
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
        if not message:
            for fd in fds:
                os.close(fd)
            return None
        asked = json.loads(message)
        self.preloader.load([str(p) for p in asked.get("preload") or ()])
        return Launch(
            module=asked.get("module"),
            code=asked.get("code"),
            argv=[str(a) for a in asked["argv"]],
            orig_argv=[str(a) for a in asked["orig_argv"]],
            isolated=bool(asked.get("isolated")),
            env={str(k): str(v) for k, v in asked["env"].items()},
            cwd=str(asked["cwd"]),
            fds=list(fds),
        )

    def _fork(self, launch: Launch) -> bool:
        """Fork ``launch``'s child; whether this is it."""
        try:
            if len(launch.fds) != 3:
                raise ValueError(f"a launch carries 3 fds, not {len(launch.fds)}")
            if threading.active_count() > 1:  # what it preloaded started a thread: forking is unsafe
                raise RuntimeError("a preloaded module started a thread")
            # What it has loaded is never collected: children's collections (and their exits,
            # which would collect it all) skip it, and its pages stay shared.
            gc.freeze()
            ready, launch.ready = os.pipe()
            try:
                pid = os.fork()
            except OSError:
                os.close(ready)
                os.close(launch.ready)
                raise
        except (OSError, ValueError, RuntimeError) as exc:
            for fd in launch.fds:
                os.close(fd)
            self._send({"refused": str(exc)})
            return False
        if pid == 0:
            os.close(ready)
            gc.enable()
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            self.channel.close()
            os.close(self.wakeup_read)
            os.close(self.wakeup_write)
            return True
        for fd in [*launch.fds, launch.ready]:
            os.close(fd)
        os.read(ready, 1)  # b"": the child has its session (or has died)
        os.close(ready)
        self._send({"started": pid})
        return False

    def _reap(self) -> None:
        try:
            while os.read(self.wakeup_read, 512):
                pass
        except BlockingIOError:
            pass
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self._send({"exited": pid, "code": _exit_code(status)})


def main(argv: list[str]) -> None:
    gc.disable()  # no collection leaves holes in the pages children share
    channel = socket.socket(fileno=int(argv[0]))
    launch = Zygote(channel).serve()
    if launch is None:
        os._exit(0)  # nothing to flush; tearing down what it loaded would take a while
    launch.enter()
    launch.run()


if __name__ == "__main__":
    main(sys.argv[1:])
