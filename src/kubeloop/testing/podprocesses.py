"""Which processes a process node's pods still run: what a test checks once their pods are gone."""

from __future__ import annotations

import os
import pathlib

from kubeloop.containerpath import ROOT_VARIABLE
from kubeloop.node.processgroups import process_mark


def pod_processes(pods_dir: str | os.PathLike[str]) -> list[int]:
    """The ids of the running processes of pods whose folders are under ``pods_dir`` (the
    ``pods_dir`` of :class:`SimulationOptions`): each container's leading process, whose id its
    folder keeps, and whatever carries a container's root in ``KUBELOOP_CONTAINER_ROOT`` (what
    a container's process starts inherits it). Processes of other users, or gone meanwhile, are
    not seen."""
    wanted = f"{ROOT_VARIABLE}={pathlib.Path(pods_dir)}".encode()
    # ``<pods dir>/<pod uid>/<container>/pid``, at any depth (``pods_dir`` may be a data directory).
    found = [pid for pid in map(leader, pathlib.Path(pods_dir).rglob("pid")) if pid is not None]
    for environ in pathlib.Path("/proc").glob("[0-9]*/environ"):
        try:
            variables = environ.read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if any(variable.startswith(wanted) for variable in variables) and int(environ.parent.name) not in found:
            found.append(int(environ.parent.name))
    return found


def leader(pid_file: pathlib.Path) -> int | None:
    """The id in a container's ``pid`` file, if that very process still runs (not one that has
    its id since: the file says when it started, and since which boot)."""
    try:
        mark = pid_file.read_text().strip()
        pid = int(mark.split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if mark.endswith(" unknown") or process_mark(pid) != mark:
        return None
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return None
    return None if state == "Z" else pid  # a zombie has ended: its parent has yet to reap it
