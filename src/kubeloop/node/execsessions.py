"""Commands run in a running container (``kubectl exec``) and clients attached to a container's
process (``kubectl attach``): what ``node.sessions`` asks of the node, for a process node.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pty
import signal
import struct
import termios
from dataclasses import dataclass

from kubeloop.node.podruns import ContainerRun
from kubeloop.node.processsetup import take_terminal
from kubeloop.node.sessions import TOO_SLOW, CommandFailed

#: How many chunks of output an attached client may fall behind before it is cut off (its
#: memory is bounded; what it missed is in the log).
LISTENER_CHUNKS = 1024


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
                preexec_fn=take_terminal,
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


def tell(listener: asyncio.Queue[tuple[str, bytes]], item: tuple[str, bytes]) -> None:
    """Give an attached client the output; one that has fallen LISTENER_CHUNKS behind is told
    so, in place of what it missed (``(TOO_SLOW, b"")``), and gets no more."""
    try:
        listener.put_nowait(item)
    except asyncio.QueueFull:
        while not listener.empty():
            listener.get_nowait()
        listener.put_nowait((TOO_SLOW, b""))


async def read(stream: asyncio.StreamReader) -> bytes:
    """The stream's next bytes; b"" at its end (a terminal's ends with EIO)."""
    try:
        return await stream.read(65536)
    except OSError:
        return b""


async def terminal_reader(controller: int) -> tuple[asyncio.StreamReader, asyncio.ReadTransport]:
    """A reader of what a terminal shows, from its controlling side (it ends, EIO, when every
    process holding the terminal has gone), and its transport (closed before the terminal)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(controller, "rb", buffering=0, closefd=False)
    )
    return reader, transport
