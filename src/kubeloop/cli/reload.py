"""``kubeloop run --reload``: the operator's files watched, and its modules forgotten, so that a
change restarts the manager on the new code while the process (and an embedded API server, with
its port and state) stays.

:class:`FileWatcher` polls the modification times of the ``.py`` files under the operator's
folder (hidden folders, ``__pycache__``, ``build``, ``dist`` and virtualenvs left out), off the
event loop, and reports a change once the files have stopped changing (an editor's save is often
several writes). :func:`forget_modules` drops the modules loaded from that folder, and
:func:`forget_bytecode` the changed files' cached bytecode, so the next load imports them
afresh. :class:`CommandSignals` keeps SIGTERM and SIGINT with the command across the managers
it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import pathlib
import signal
import sys
from collections.abc import Iterable
from types import ModuleType

from kubeloop.lifecycle import cancel_and_wait
from kubeloop.manager.manager import Manager

log = logging.getLogger("kubeloop.manager")

_SKIPPED = frozenset({"__pycache__", "build", "dist", "node_modules", "venv", "site-packages"})


def _scan(root: pathlib.Path) -> dict[str, int]:
    found: dict[str, int] = {}
    for folder, folders, files in os.walk(root):
        folders[:] = [name for name in folders if not name.startswith(".") and name not in _SKIPPED]
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                try:
                    found[path] = os.stat(path).st_mtime_ns
                except OSError:
                    continue  # removed between the listing and the look
    return found


class FileWatcher:
    """Reports changes to the ``.py`` files under ``root``."""

    def __init__(self, root: pathlib.Path, *, interval: float = 0.2) -> None:
        self.root = root
        self.interval = interval
        self._seen = _scan(root)

    async def changed(self) -> list[str]:
        """Wait until some files changed (and then stayed the same for one interval); the
        files that did, relative to the root."""
        while True:
            await asyncio.sleep(self.interval)
            now = await asyncio.to_thread(_scan, self.root)
            if now == self._seen:
                continue
            while True:  # settle: an editor's save may be several writes
                await asyncio.sleep(self.interval)
                later = await asyncio.to_thread(_scan, self.root)
                if later == now:
                    break
                now = later
            differing = sorted(
                path for path in now.keys() | self._seen.keys() if now.get(path) != self._seen.get(path)
            )
            self._seen = now
            return [str(pathlib.PurePath(path).relative_to(self.root)) for path in differing]


def operator_root(target: str, module: ModuleType) -> pathlib.Path:
    """The folder an operator's files are in: a folder TARGET itself, a file's folder, or the
    folder a ``module:function`` TARGET's top package was imported from."""
    path = pathlib.Path(target)
    if path.is_dir():
        return path.resolve()
    if path.suffix == ".py":
        return path.resolve().parent
    file = pathlib.Path(getattr(module, "__file__", None) or os.getcwd()).resolve()
    levels = module.__name__.count(".") + (1 if file.name == "__init__.py" else 0)
    folder = file.parent
    for _ in range(levels):
        folder = folder.parent
    return folder


class CommandSignals:
    """SIGTERM and SIGINT for the whole of ``kubeloop run``, owned by the command (not by each
    manager it runs): the first stops the current manager (or the one about to start), a
    second exits at once. Installed from the start, so no signal falls between two managers."""

    def __init__(self) -> None:
        self.requested = asyncio.Event()
        self.manager: Manager | None = None
        self._installed: list[signal.Signals] = []

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._on_signal)
                self._installed.append(sig)

    def remove(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in self._installed:
            loop.remove_signal_handler(sig)
        self._installed.clear()

    def _on_signal(self) -> None:
        if self.requested.is_set():
            with contextlib.suppress(Exception):
                sys.stderr.write("second signal: exiting at once\n")
            os._exit(1)
        log.info("stopping (signal); a second signal exits at once")
        self.requested.set()
        if self.manager is not None:
            self.manager.request_stop()

    async def changed_or_stopped(self, watcher: FileWatcher) -> list[str] | None:
        """Wait for a change (its files) or a signal (None), while no manager runs."""
        change = asyncio.create_task(watcher.changed(), name="kubeloop reload watch")
        stop = asyncio.create_task(self.requested.wait(), name="kubeloop reload signal")
        try:
            await asyncio.wait({change, stop}, return_when=asyncio.FIRST_COMPLETED)
            return change.result() if change.done() and not self.requested.is_set() else None
        finally:
            await cancel_and_wait([change, stop])


def forget_bytecode(root: pathlib.Path, changed: Iterable[str]) -> None:
    """Remove the cached bytecode of the ``changed`` files (relative to ``root``). Python takes a
    ``.pyc`` as current while its source's modification time, in whole seconds, and its size are
    those it recorded: an edit within the same second as the one before that keeps the file's
    size (``VALUE = "one"`` to ``"two"``) would otherwise load the code from before it."""
    for name in changed:
        with contextlib.suppress(OSError, NotImplementedError):  # none cached; no cache tag
            os.unlink(importlib.util.cache_from_source(str(root / name)))


def forget_modules(root: pathlib.Path) -> list[str]:
    """Drop the modules loaded from files under ``root`` (kubeloop's own never); their names."""
    kubeloop_dir = str(pathlib.Path(__file__).resolve().parent.parent)
    prefix = str(root.resolve()) + os.sep
    dropped = []
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file:
            continue
        resolved = str(pathlib.Path(file).resolve())
        if resolved.startswith(prefix) and not resolved.startswith(kubeloop_dir + os.sep):
            del sys.modules[name]
            dropped.append(name)
    return dropped
