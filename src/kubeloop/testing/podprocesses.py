"""Which processes a process node's pods still run: what a test checks once their pods are gone."""

from __future__ import annotations

import os
import pathlib

from kubeloop.containerpath import ROOT_VARIABLE


def pod_processes(pods_dir: str | os.PathLike[str]) -> list[int]:
    """The ids of the running processes of pods whose folders are under ``pods_dir`` (the
    ``pods_dir`` of :class:`SimulationOptions`): each carries its container's root in
    ``KUBELOOP_CONTAINER_ROOT``, and what it starts inherits it. Processes of other users, or
    gone meanwhile, are not seen."""
    wanted = f"{ROOT_VARIABLE}={pathlib.Path(pods_dir)}".encode()
    found = []
    for environ in pathlib.Path("/proc").glob("[0-9]*/environ"):
        try:
            variables = environ.read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if any(variable.startswith(wanted) for variable in variables):
            found.append(int(environ.parent.name))
    return found
