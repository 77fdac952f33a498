"""Front-end processes: ``kubeloop apiserver --workers N`` serves its port from N processes.

The server that owns the store (the log, revisions, claims; what a cluster runs once) starts
``N - 1`` front-end processes (:class:`FrontEndProcesses`), as kube-apiservers sit in front of
one etcd. Each is ``python -m kubeloop.apiserver.frontends --store-fd N --node-fd M``: it
inherits its end of a socket pair to the owner's store service (nothing in the file system), is
sent what it shares with the owner (the credentials, the controllers' token, the server's
options and its port), and serves that port too (``SO_REUSEPORT``: the kernel spreads new connections over the processes) with an
:class:`~kubeloop.apiserver.server.APIServer` whose store follows the owner's
(:class:`~kubeloop.apiserver.storage.remotestore.RemoteStore`). Every process keeps the
promises one does: a write is acknowledged once durable, no read sees it before, a read
without a resourceVersion sees every write acknowledged before it, anywhere. The node (``--simulate``)
runs in the owner: a front-end relays pods' logs, exec, attach and port-forwards to it over
connections it hands over a channel all front-ends inherit
(:mod:`~kubeloop.apiserver.connectionhandoff`, :mod:`~kubeloop.apiserver.http.nodestreams`).

A front-end that dies is started again; the others serve meanwhile. A front-end whose owner
has gone (its store connection ends) stops serving and exits: it has nothing current to serve.
The owner stops its front-ends (SIGTERM) before itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import faulthandler
import logging
import os
import pickle
import signal
import socket
import struct
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kubeloop.apiserver.connectionhandoff import ConnectionReceiver, ConnectionSender, channel_pair

if TYPE_CHECKING:
    from kubeloop.apiserver.server import APIServer

log = logging.getLogger("kubeloop.apiserver.frontends")

#: A front-end that exits this soon after it started is not started again at once (it would fail
#: again: its port or options are wrong), but after this long.
RESTART_DELAY_SECONDS = 1.0
_LENGTH = struct.Struct("<I")
_PR_SET_PDEATHSIG = 1


class FrontEndProcesses:
    """The owner's front-end processes, each with its store connection (a socket pair):
    launched (:meth:`launch`) as early as the owner can, so that their imports overlap its own
    and its start-up, then served by it (:meth:`start`)."""

    def __init__(self, count: int) -> None:
        self._owner: APIServer | None = None
        self._count = count
        self._supervisors: list[asyncio.Task[None]] = []
        self._processes: dict[int, asyncio.subprocess.Process] = {}
        self._stopping = False
        #: The channel front-ends hand the owner connections by, to relay pods' streams: the
        #: owner's end (read once it serves them), and the end each front-end inherits.
        self._node_channel_ours: socket.socket | None = None
        self._node_channel: ConnectionReceiver | None = None
        self._node_channel_end: socket.socket | None = None
        #: Processes launched, waiting for :meth:`start` to serve them.
        self._launched: list[tuple[asyncio.subprocess.Process, socket.socket]] = []

    @property
    def pids(self) -> list[int]:
        """The running front-end processes."""
        return [pid for pid, process in self._processes.items() if process.returncode is None]

    @property
    def count(self) -> int:
        return self._count

    async def launch(self) -> None:
        """Start the front-end processes without serving them yet (they import, then wait for
        the owner's welcome); :meth:`start` serves them."""
        self._node_channel_ours, self._node_channel_end = channel_pair()
        for _ in range(self._count):
            self._launched.append(await self._launch())

    async def start(self, owner: APIServer) -> None:
        """Serve the front-ends from ``owner`` (launched first if they are not), and return once
        each serves the port."""
        if self._node_channel_ours is None:
            await self.launch()
        assert self._node_channel_ours is not None
        self._owner = owner
        await owner.front_end_of()  # its store service and node endpoint, before any front-end
        self._node_channel = ConnectionReceiver(self._node_channel_ours, owner.serve_node_connection)
        self._node_channel_ours = None
        self._node_channel.start()
        ready = [asyncio.get_running_loop().create_future() for _ in range(self._count)]
        for number, started in enumerate(ready):
            launched = self._launched.pop()
            self._supervisors.append(
                asyncio.create_task(self._supervise(started, launched), name=f"kubeloop-front-end-{number + 1}")
            )
        await asyncio.gather(*ready)

    async def _launch(self) -> tuple[asyncio.subprocess.Process, socket.socket]:
        """A new front-end process, and the owner's end of its store connection."""
        # Its store connection is a socket pair: nothing in the file system to guard or to
        # leave behind, and no other process can reach the store (or the credentials) by it.
        ours, theirs = socket.socketpair()
        node_channel = self._node_channel_end
        assert node_channel is not None
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "kubeloop.apiserver.frontends",
                "--store-fd", str(theirs.fileno()), "--node-fd", str(node_channel.fileno()),
                stdout=asyncio.subprocess.PIPE, pass_fds=(theirs.fileno(), node_channel.fileno()),
            )  # fmt: skip
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._processes[process.pid] = process
        return process, ours

    async def _supervise(
        self, ready: asyncio.Future[None], launched: tuple[asyncio.subprocess.Process, socket.socket] | None
    ) -> None:
        """Serve one front-end process (``launched``), and another whenever it ends, until stopped."""
        while not self._stopping:
            process, ours = launched if launched is not None else await self._launch()
            launched = None
            assert self._owner is not None
            self._owner.serve_front_end(ours)
            try:
                assert process.stdout is not None
                line = await process.stdout.readline()
                if line.startswith(b"serving") and not ready.done():
                    ready.set_result(None)
                code = await process.wait()
            finally:
                await self._ended(process)
            if self._stopping:
                return
            if not ready.done():
                ready.set_exception(RuntimeError(f"a front-end process exited ({code}) before it served"))
                return
            log.error("front-end process %d exited (%d): starting another", process.pid, code)
            await asyncio.sleep(RESTART_DELAY_SECONDS)

    async def _ended(self, process: asyncio.subprocess.Process) -> None:
        """Wait for ``process`` to end (SIGTERM first, if it runs: the owner stops)."""
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            await process.wait()
        self._processes.pop(process.pid, None)

    async def stop(self) -> None:
        """Stop the front-ends (SIGTERM, awaited)."""
        self._stopping = True
        for process in list(self._processes.values()):
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        for task in self._supervisors:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._supervisors.clear()
        while self._launched:  # launched, never served: the owner's start failed
            process, ours = self._launched.pop()
            ours.close()
            await self._ended(process)
        if self._node_channel is not None:
            self._node_channel.close()
            self._node_channel = None
        if self._node_channel_ours is not None:
            self._node_channel_ours.close()
            self._node_channel_ours = None
        if self._node_channel_end is not None:
            self._node_channel_end.close()
            self._node_channel_end = None


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity; the machine's elsewhere): how many
    processes ``kubeloop apiserver`` serves its port from unless told."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def die_with_parent() -> None:
    """Have the kernel send this process SIGTERM when its parent (the owner) dies (Linux's
    PR_SET_PDEATHSIG): a backstop beside the store connection's end, which a front-end also
    leaves on. Nothing elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        log.warning("PR_SET_PDEATHSIG failed: errno %d", ctypes.get_errno())
    if os.getppid() == 1:  # the owner died before the call
        os.kill(os.getpid(), signal.SIGTERM)


def stop_taking_signals(loop: asyncio.AbstractEventLoop) -> None:
    """Before ``loop`` closes: its SIGTERM and SIGINT handlers removed, SIGTERM's default action
    back (a SIGTERM from here on ends the process at once, without a word) and SIGINT ignored (a
    Ctrl-C is the owner's). asyncio's loop closes its wakeup pipe before it removes its handlers,
    and a signal between the two was written to the closed pipe ("Exception ignored when trying
    to write to the signal wakeup fd", with a traceback): a front-end whose owner was killed gets
    the kernel's SIGTERM just after the store connection's end, which it is already stopping for."""
    signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        for signum in signals:
            loop.remove_signal_handler(signum)  # the last one removed unsets the wakeup fd
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)


async def _read_frame(reader: asyncio.StreamReader) -> Any:
    (length,) = _LENGTH.unpack(await reader.readexactly(4))
    return pickle.loads(await reader.readexactly(length))


async def serve(store_fd: int, node_fd: int) -> int:
    """A front-end process: serve the owner's port over its store (the connection on
    ``store_fd``, inherited) until SIGTERM (0) or until the owner goes away (1); pods' streams
    go to the owner's node by connections handed over the channel on ``node_fd``."""
    from kubeloop.apiserver.server import APIServer, FrontEndOf
    from kubeloop.apiserver.storage.remotestore import RemoteStore
    from kubeloop.gcpause import tune_for_serving

    reader, writer = await asyncio.open_connection(sock=socket.socket(fileno=store_fd))
    kind, credentials, controllers_token, options = await _read_frame(reader)
    if kind != "welcome":
        raise RuntimeError(f"the store sent {kind!r} first")
    handed = False

    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        nonlocal handed
        if handed:
            raise RuntimeError("a front-end process has one store connection")
        handed = True
        return reader, writer

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    die_with_parent()
    loop.add_signal_handler(signal.SIGINT, lambda: None)  # a Ctrl-C is the owner's to act on
    faulthandler.register(signal.SIGQUIT, all_threads=True)  # stacks to stderr, as the owner's
    node = ConnectionSender(socket.socket(fileno=node_fd))
    server = APIServer(options, front_end_of=FrontEndOf(credentials, controllers_token, connect, node.connect))
    async with server:
        tune_for_serving(collect_first=False)
        store = server.store
        assert isinstance(store, RemoteStore)
        print("serving", flush=True)
        lost = asyncio.ensure_future(store.wait_lost())
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait({lost, stopped}, return_when=asyncio.FIRST_COMPLETED)
        lost.cancel()
        stopped.cancel()
    node.close()
    stop_taking_signals(loop)
    if stop.is_set():
        return 0
    log.error("the store went away: this front-end stops")
    return 1


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kubeloop.apiserver.frontends")
    parser.add_argument(
        "--store-fd", type=int, required=True, help="this process's end of the owner's store connection"
    )
    parser.add_argument(
        "--node-fd", type=int, required=True, help="this process's end of the channel to the owner's node"
    )
    options = parser.parse_args(argv)
    from kubeloop.gcpause import start_up_without_gc

    start_up_without_gc()  # until tune_for_serving, once the server has started
    logging.basicConfig(level=logging.WARNING, format="kubeloop front-end %(process)d: %(message)s")
    sys.exit(asyncio.run(serve(options.store_fd, options.node_fd)))


if __name__ == "__main__":
    main(sys.argv[1:])
