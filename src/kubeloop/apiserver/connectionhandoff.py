"""Connections handed from one process to another: a front-end process opens a connection to the
server that owns the store by sending it one end of a new socket pair (``SCM_RIGHTS``) over a
channel both inherited, a ``SOCK_SEQPACKET`` socket pair the owner made.

Nothing is bound or named, so no other process can connect (a private port would have needed a
secret, a path a folder to guard and to leave behind), and the owner learns nothing from a
message but the connection it carries. The owner's end of the channel lives as long as the
owner: its descriptor is never closed and reused while the loop polls it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable

log = logging.getLogger("kubeloop.apiserver.connectionhandoff")

#: Connections taken from the channel at most per message (a sender puts one in each).
_MAX_FDS = 4


def channel_pair() -> tuple[socket.socket, socket.socket]:
    """A new channel: the receiver's end, and the end the senders inherit."""
    receiving, sending = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    receiving.setblocking(False)
    return receiving, sending


class ConnectionSender:
    """A front-end's end of the channel: :meth:`connect` opens a connection to the receiver."""

    def __init__(self, channel: socket.socket) -> None:
        channel.setblocking(False)
        self._channel = channel
        self._writable = asyncio.Lock()

    async def connect(self) -> socket.socket:
        """A new connection, whose other end the receiving process now serves."""
        ours, theirs = socket.socketpair()
        try:
            await self._send(theirs)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()  # the receiver holds its own copy from here
        return ours

    async def _send(self, connection: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        fd = self._channel.fileno()
        while True:
            try:
                socket.send_fds(self._channel, [b"c"], [connection.fileno()])
                return
            except BlockingIOError:
                pass
            async with self._writable:  # one waiter on the channel at a time: a writer replaces another
                writable: asyncio.Future[None] = loop.create_future()
                loop.add_writer(fd, _settle, writable)
                try:
                    await writable
                finally:
                    loop.remove_writer(fd)

    def close(self) -> None:
        self._channel.close()


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class ConnectionReceiver:
    """The owner's end of the channel: each connection a sender hands over goes to ``serve``
    (on this loop), until :meth:`close`."""

    def __init__(self, channel: socket.socket, serve: Callable[[socket.socket], None]) -> None:
        self._channel = channel
        self._serve = serve
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._channel.fileno(), self._readable)

    def _readable(self) -> None:
        while True:
            try:
                message, fds, _flags, _address = socket.recv_fds(
                    self._channel, 16, _MAX_FDS, socket.MSG_CMSG_CLOEXEC
                )
            except BlockingIOError:
                return
            except OSError as error:
                log.error("the front-ends' channel failed: %s", error)
                self.close()
                return
            if not message and not fds:  # every sender's end is closed: none is left to hear
                self.close()
                return
            for fd in fds:
                connection = socket.socket(fileno=fd)
                try:
                    self._serve(connection)
                except Exception:
                    connection.close()
                    log.exception("serving a connection a front-end handed over failed")

    def close(self) -> None:
        if self._channel.fileno() < 0:
            return
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                self._loop.remove_reader(self._channel.fileno())
        self._channel.close()
