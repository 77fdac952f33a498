"""The server's data directory: private to its user, and used by one server at a time.

It holds the SQLite log (``state.db``), the PKI and the kubeconfig. :class:`DataDirectory` creates
it 0700 (and narrows an existing one to 0700), and holds an exclusive ``flock`` on its ``lock`` file
while the server runs: two servers sharing one log would hand out the same resourceVersions.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib


class DataDirectoryInUse(RuntimeError):
    """Another process holds the data directory."""


class DataDirectory:
    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self._fd: int | None = None

    def open(self) -> None:
        """Create or narrow the directory to 0700 and lock it; DataDirectoryInUse if already held."""
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.path, 0o700)
        fd = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise DataDirectoryInUse(
                f"the data directory {self.path} is in use by another kubeloop apiserver (pid {holder})"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)  # closing releases the lock
            self._fd = None
