"""Which images the embedded node runs as local processes (``kubeloop apiserver --local-image``).

``IMAGE=COMMAND`` says that a container of ``IMAGE`` runs ``COMMAND`` (split as a shell would,
without one) on this machine, with the container's ``args`` after it: the image's entrypoint.
``IMAGE=host`` says that a container of ``IMAGE`` runs its own ``command`` and ``args`` on this
machine, as they are written (what a busybox pod of the official client's tests needs). An
``IMAGE`` without a tag or digest matches every tag of its repository; ``busybox`` and
``docker.io/library/busybox`` are one repository, as a container runtime takes them.

An installed Python package declares images of its own in the entry-point group
``kubeloop.images``: the entry point's name is the image, its object a function that runs as the
image's entrypoint (the container's ``args`` in ``sys.argv[1:]``, its return value the exit
code), e.g. in ``pyproject.toml``::

    [project.entry-points."kubeloop.images"]
    "ghcr.io/example/greeter" = "greeter.main:run"

An image named with ``--local-image`` wins over an installed one.

Running a pod's command on the host is opt-in, image by image: a pod whose images are not all
named stays simulated. No isolation is claimed: a local image runs with the server's user's
rights.
"""

from __future__ import annotations

import importlib.metadata
import shlex
import sys
from collections.abc import Iterable
from dataclasses import dataclass

#: The ``COMMAND`` that runs a container's own command and args.
HOST = "host"
#: The entry-point group through which installed packages declare their images.
ENTRY_POINT_GROUP = "kubeloop.images"


@dataclass(frozen=True)
class LocalImage:
    """One ``--local-image``: the image as given, and its entrypoint (None: ``host``)."""

    image: str
    entrypoint: tuple[str, ...] | None
    #: The package an installed image's function is in (what the fork server preloads for).
    package: str | None = None

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

    def with_installed(self) -> LocalImages:
        """These images, then the ones installed packages declare (``kubeloop.images``)."""
        return LocalImages([*self.images, *installed_images()])

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


def installed_images() -> list[LocalImage]:
    """The images installed packages declare: each runs its function with this interpreter (its
    distribution's folder first on the path, so a package found there is found by the
    process too)."""
    images = []
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        module, _, attribute = entry.value.partition(":")
        where = str(entry.dist.locate_file("")) if entry.dist is not None else ""
        code = (
            f"import importlib, sys; sys.path.insert(0, {where!r}); "
            f"main = importlib.import_module({module.strip()!r})\n"
            f"for part in {attribute.strip()!r}.split('.'): main = getattr(main, part)\n"
            "sys.exit(main())"
        )
        # Isolated (-I): neither the working folder nor PYTHON* variables choose what it imports.
        images.append(
            LocalImage(entry.name, (sys.executable, "-I", "-c", code), package=module.strip().partition(".")[0])
        )
    return images
