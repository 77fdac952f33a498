"""What the API server's log, exec, attach and port-forward requests ask of the node that runs
pods' processes (upstream's kubelet streaming server): :class:`ProcessNode` and its sessions.

The HTTP handlers are written against these protocols; ``processes.ProcessRuntime`` implements
them. The node raises :class:`CommandRefused` or :class:`CommandFailed`, whose messages the
handlers pass to the client as kubectl expects them.
"""

from __future__ import annotations

import asyncio
import pathlib
from typing import Protocol

from kubeloop.api.object import Obj


class CommandRefused(Exception):
    """A command the node will not run in a container (not running, not allowed): its message
    says why."""


class CommandFailed(Exception):
    """A command that could not start in its container: its message says why."""


class ExecSession(Protocol):
    """A command to run in a container: once started, its process, and with a terminal, the
    terminal's controlling side (the process's streams are then the terminal)."""

    terminal: int | None

    @property
    def process(self) -> asyncio.subprocess.Process: ...

    async def start(self, width: int = 0, height: int = 0) -> None:
        """Start the command (with a terminal, of that size; CommandFailed: why it could not)."""
        ...

    def resize(self, width: int, height: int) -> None: ...

    async def write(self, data: bytes) -> None:
        """Input for the command (waits while it takes none)."""
        ...

    async def end_input(self) -> None:
        """The client's input has ended."""
        ...

    def kill(self) -> None: ...

    def close(self) -> None: ...


#: The stream name of the item that tells an attached client it fell too far behind.
TOO_SLOW = "too-slow"


class AttachSession(Protocol):
    """A running container's process to attach to: its output from now on, as (stream, chunk)
    with ("", b"") at the end; its stdin; its terminal's size (``tty``)."""

    tty: bool

    def listen(self) -> asyncio.Queue[tuple[str, bytes]]: ...

    def leave(self, queue: asyncio.Queue[tuple[str, bytes]], *, had_stdin: bool) -> None: ...

    async def write(self, data: bytes) -> None: ...

    def input_ended(self) -> None:
        """The attached client's input has ended (with ``stdinOnce``, so has the container's)."""
        ...

    def resize(self, width: int, height: int) -> None: ...


class ProcessNode(Protocol):
    """What the node that runs pods' processes (the process node's runtime) offers requests:
    its containers' logs, and commands run in them."""

    def log_file(
        self, namespace: str, name: str, uid: str, container: str, *, previous: bool = False
    ) -> pathlib.Path | None: ...

    def running(self, namespace: str, name: str, uid: str, container: str) -> bool: ...

    async def exec_in(
        self, pod: Obj, container_name: str, command: list[str], *, stdin: bool, tty: bool
    ) -> ExecSession:
        """``command``, ready to start in the container (CommandRefused: why the node will
        not run it)."""
        ...

    def address_of(self, pod: Obj) -> str:
        """Where the pod's processes listen (CommandRefused: it runs none here)."""
        ...

    def attach_to(self, pod: Obj, container_name: str) -> AttachSession:
        """The running container's process, to attach to (CommandRefused: not running here)."""
        ...
