"""Front-end processes: ``kubeloop apiserver --workers N`` serves its port from N processes.

The server that owns the store (the log, revisions, claims; what a cluster runs once) starts
``N - 1`` front-end processes (:class:`FrontEndProcesses`), as kube-apiservers sit in front of
one etcd. Each is ``python -m kubeloop.apiserver.frontends --store PATH``: it connects to the
owner's store service on a private Unix socket, is sent what it shares with the owner (the
credentials, the controllers' token, the server's options and its port), and serves that port
too (``SO_REUSEPORT``: the kernel spreads new connections over the processes) with an
:class:`~kubeloop.apiserver.server.APIServer` whose store follows the owner's
(:class:`~kubeloop.apiserver.storage.remotestore.RemoteStore`). Every process keeps the
promises one does: a write is acknowledged once durable, no read sees it before, a read
without a resourceVersion sees every write acknowledged before it, anywhere.

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
import pathlib
import pickle
import shutil
import signal
import struct
import sys
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubeloop.apiserver.server import APIServer

log = logging.getLogger("kubeloop.apiserver.frontends")

#: A front-end that exits this soon after it started is not started again at once (it would fail
#: again: its port or options are wrong), but after this long.
RESTART_DELAY_SECONDS = 1.0
_LENGTH = struct.Struct("<I")
_PR_SET_PDEATHSIG = 1


class FrontEndProcesses:
    """The owner's front-end processes and the Unix socket they reach its store on."""

    def __init__(self, owner: APIServer, count: int) -> None:
        self._owner = owner
        self._count = count
        self._folder = pathlib.Path(tempfile.mkdtemp(prefix="kubeloop-store-"))  # 0700, short path
        self.socket_path = self._folder / "store.sock"
        self._listener: asyncio.AbstractServer | None = None
        self._supervisors: list[asyncio.Task[None]] = []
        self._processes: dict[int, asyncio.subprocess.Process] = {}
        self._stopping = False

    @property
    def pids(self) -> list[int]:
        """The running front-end processes."""
        return [pid for pid, process in self._processes.items() if process.returncode is None]

    async def start(self) -> None:
        """Listen for front-ends, start them, and return once each serves the port."""
        self._listener = await asyncio.start_unix_server(self._owner.serve_front_end, path=str(self.socket_path))
        os.chmod(self.socket_path, 0o600)
        ready = [asyncio.get_running_loop().create_future() for _ in range(self._count)]
        for number, started in enumerate(ready):
            self._supervisors.append(
                asyncio.create_task(self._supervise(started), name=f"kubeloop-front-end-{number + 1}")
            )
        await asyncio.gather(*ready)

    async def _supervise(self, ready: asyncio.Future[None]) -> None:
        """Run one front-end process, and another whenever it ends, until stopped."""
        while not self._stopping:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "kubeloop.apiserver.frontends", "--store", str(self.socket_path),
                stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            self._processes[process.pid] = process
            try:
                assert process.stdout is not None
                line = await process.stdout.readline()
                if line.startswith(b"serving") and not ready.done():
                    ready.set_result(None)
                code = await process.wait()
            finally:
                if process.returncode is None:  # cancelled: the owner stops
                    with contextlib.suppress(ProcessLookupError):
                        process.terminate()
                    await process.wait()
                del self._processes[process.pid]
            if self._stopping:
                return
            if not ready.done():
                ready.set_exception(RuntimeError(f"a front-end process exited ({code}) before it served"))
                return
            log.error("front-end process %d exited (%d): starting another", process.pid, code)
            await asyncio.sleep(RESTART_DELAY_SECONDS)

    async def stop(self) -> None:
        """Stop the front-ends (SIGTERM, awaited) and stop listening."""
        self._stopping = True
        for process in list(self._processes.values()):
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        for task in self._supervisors:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._supervisors.clear()
        if self._listener is not None:
            self._listener.close()
            await self._listener.wait_closed()
            self._listener = None
        shutil.rmtree(self._folder, ignore_errors=True)


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


async def _read_frame(reader: asyncio.StreamReader) -> Any:
    (length,) = _LENGTH.unpack(await reader.readexactly(4))
    return pickle.loads(await reader.readexactly(length))


async def serve(store_path: str) -> int:
    """A front-end process: serve the owner's port over its store until SIGTERM (0) or until
    the owner goes away (1)."""
    from kubeloop.apiserver.server import APIServer, FrontEndOf
    from kubeloop.apiserver.storage.remotestore import RemoteStore
    from kubeloop.gcpause import tune_for_serving

    reader, writer = await asyncio.open_unix_connection(store_path)
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
    server = APIServer(options, front_end_of=FrontEndOf(credentials, controllers_token, connect))
    async with server:
        tune_for_serving()
        store = server.store
        assert isinstance(store, RemoteStore)
        print("serving", flush=True)
        lost = asyncio.ensure_future(store.wait_lost())
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait({lost, stopped}, return_when=asyncio.FIRST_COMPLETED)
        lost.cancel()
        stopped.cancel()
    if stop.is_set():
        return 0
    log.error("the store went away: this front-end stops")
    return 1


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kubeloop.apiserver.frontends")
    parser.add_argument("--store", required=True, help="the owner's store socket")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="kubeloop front-end %(process)d: %(message)s")
    sys.exit(asyncio.run(serve(options.store)))


if __name__ == "__main__":
    main(sys.argv[1:])
