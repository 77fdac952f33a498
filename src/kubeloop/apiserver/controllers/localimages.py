"""Which images the embedded node runs as local processes (``kubeloop apiserver --local-image``).

``IMAGE=COMMAND`` says that a container of ``IMAGE`` runs ``COMMAND`` (split as a shell would,
without one) on this machine, with the container's ``args`` after it: the image's entrypoint.
``IMAGE=host`` says that a container of ``IMAGE`` runs its own ``command`` and ``args`` on this
machine, as they are written (what a busybox pod of the official client's tests needs). An
``IMAGE`` without a tag or digest matches every tag of its repository; ``busybox`` and
``docker.io/library/busybox`` are one repository, as a container runtime takes them.

Running a pod's command on the host is opt-in, image by image: a pod whose images are not all
named stays simulated. No isolation is claimed: a local image runs with the server's user's
rights.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass

#: The ``COMMAND`` that runs a container's own command and args.
HOST = "host"


@dataclass(frozen=True)
class LocalImage:
    """One ``--local-image``: the image as given, and its entrypoint (None: ``host``)."""

    image: str
    entrypoint: tuple[str, ...] | None

    @classmethod
    def parse(cls, spec: str) -> LocalImage:
        """``IMAGE=COMMAND`` or ``IMAGE=host``; ValueError saying what is wrong."""
        image, sep, command = spec.partition("=")
        image, command = image.strip(), command.strip()
        if not sep or not image or not command:
            raise ValueError(f"--local-image {spec!r}: expected IMAGE=COMMAND or IMAGE=host")
        if command == HOST:
            return cls(image, None)
        try:
            argv = tuple(shlex.split(command))
        except ValueError as exc:
            raise ValueError(f"--local-image {spec!r}: the command does not split: {exc}") from None
        return cls(image, argv)


def repository(image: str) -> str:
    """``image`` without its tag or digest, in the form a runtime resolves it to."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:  # a tag (a colon before the last slash is a registry's port)
        name = name[:colon]
    for prefix in ("docker.io/library/", "index.docker.io/library/", "docker.io/", "index.docker.io/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    return name


def _has_tag(image: str) -> bool:
    name = image.split("@", 1)[0]
    return "@" in image or name.rfind(":") > name.rfind("/")


class LocalImages:
    """The images named, looked up the way ``--local-image`` says."""

    def __init__(self, images: Iterable[LocalImage] = ()) -> None:
        self.images = tuple(images)

    @classmethod
    def parse(cls, specs: Iterable[str]) -> LocalImages:
        return cls(LocalImage.parse(spec) for spec in specs)

    def __bool__(self) -> bool:
        return bool(self.images)

    def resolve(self, image: str) -> LocalImage | None:
        """The entry that names ``image``: the same image first, then its repository."""
        for entry in self.images:
            if entry.image == image:
                return entry
        wanted = repository(image)
        for entry in self.images:
            if not _has_tag(entry.image) and repository(entry.image) == wanted:
                return entry
        return None
