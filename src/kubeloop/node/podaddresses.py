"""The loopback addresses of local pods (127.244.B.1-250), given out so that no two pods on the
machine share one, whichever kubeloop server runs them.

Addresses come in blocks of 250, one block per third octet. A server holds a block through a
lock file (``flock``) in a folder of the machine's ``/tmp`` (whatever ``TMPDIR`` says: the
addresses are the machine's) for as long as it runs: two servers on one machine (tests in
parallel, two projects) take different blocks, and a block is free again the moment its server
ends, however it ends. A server that starts again with pods kept from before takes their blocks
first, so they keep their addresses. An address some socket is bound to already (a process that
outlived its server, a server that keeps its locks elsewhere) is never given out.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib
import tempfile
from collections.abc import Callable

PREFIX = "127.244."
BLOCKS = 256
PER_BLOCK = 250


def default_folder() -> pathlib.Path:
    shared = pathlib.Path("/tmp")
    base = shared if os.access(shared, os.W_OK | os.X_OK) else pathlib.Path(tempfile.gettempdir())
    return base / f"kubeloop-pod-addresses-{os.getuid()}"


def bound_addresses(table: pathlib.Path = pathlib.Path("/proc/net/tcp")) -> set[str]:
    """The IPv4 addresses TCP sockets of the machine are bound to (listening or connected)."""
    try:
        lines = table.read_text().splitlines()[1:]
    except OSError:
        return set()
    found = set()
    for line in lines:
        fields = line.split()
        if len(fields) > 1 and len(host := fields[1].partition(":")[0]) == 8:
            with contextlib.suppress(ValueError):
                found.add(".".join(str(octet) for octet in reversed(bytes.fromhex(host))))
    return found


class PodAddresses:
    """The addresses one server gives its local pods."""

    def __init__(
        self, folder: pathlib.Path | None = None, bound: Callable[[], set[str]] = bound_addresses
    ) -> None:
        self.folder = folder or default_folder()
        self.bound = bound
        self._held: dict[int, int] = {}  # block → the lock file's descriptor
        self._given: set[str] = set()
        self._next: dict[int, int] = {}

    def keep(self, address: str) -> None:
        """An address a pod has already (kept from an earlier server): never given again, and
        its block taken if it is free."""
        self._given.add(address)
        block = _block_of(address)
        if block is not None:
            self._claim(block)

    def take(self) -> str:
        """An address no other pod on the machine has."""
        bound = self.bound()
        for block in [*sorted(self._held), *range(BLOCKS)]:
            if block not in self._held and not self._claim(block):
                continue
            while (host := self._next.get(block, 1)) <= PER_BLOCK:
                self._next[block] = host + 1
                address = f"{PREFIX}{block}.{host}"
                if address not in self._given and address not in bound:
                    self._given.add(address)
                    return address
        raise RuntimeError(f"every block of local pod addresses ({PREFIX}0-{BLOCKS - 1}.x) is taken")

    def _claim(self, block: int) -> bool:
        if block in self._held:
            return True
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(self.folder / f"{block}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(descriptor)
            return False  # another server's
        self._held[block] = descriptor
        return True

    def close(self) -> None:
        """Give the blocks back."""
        for descriptor in self._held.values():
            with contextlib.suppress(OSError):
                os.close(descriptor)
        self._held.clear()


def _block_of(address: str) -> int | None:
    if not address.startswith(PREFIX):
        return None
    third = address[len(PREFIX) :].split(".")[0]
    return int(third) if third.isdigit() and int(third) < BLOCKS else None
