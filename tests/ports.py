"""Ports for tests of what a client does when nothing answers."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A local port that refuses connections for as long as the block runs: a socket bound to it
    and never listening (a connection is answered with a reset, "connection refused"). A port
    found free and closed again could be taken by another test's server before it is dialled
    (and answer with its TLS certificate); a bound one cannot."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])
