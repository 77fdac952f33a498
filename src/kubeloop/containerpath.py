"""Paths as a container sees them, for programs that may run on kubeloop's process node.

A pod of a local image (``kubeloop apiserver --local-image``) runs as a plain process on the
machine, without a mount namespace: its volumes are not at their ``mountPath`` but under the
container's root, a folder whose path the process gets as ``KUBELOOP_CONTAINER_ROOT``.
:func:`container_path` gives the path to open: under that root when it is set, the path itself
otherwise (in a real container). ``kubeloop``'s in-cluster configuration reads the
ServiceAccount's token and CA through it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

#: The environment variable the process node sets to a container's root.
ROOT_VARIABLE = "KUBELOOP_CONTAINER_ROOT"


def container_path(path: str | os.PathLike[str], *, environ: Mapping[str, str] = os.environ) -> Path:
    """Where a path the container would use (``/etc/config/settings.yaml``) is: under
    ``$KUBELOOP_CONTAINER_ROOT`` when the process runs on kubeloop's process node, else as
    written. A relative path is returned as it is."""
    root = environ.get(ROOT_VARIABLE)
    wanted = PurePosixPath(os.fspath(path))
    if not root or not wanted.is_absolute():
        return Path(wanted)
    return Path(root).joinpath(*wanted.parts[1:])
