"""Finds the kubectl binaries the tests drive, installing one when the machine has none.

The machine image ships kubectl 1.27 … 1.33 in the Google Cloud SDK's ``bin`` folder (``kubectl``
on PATH links there, beside ``kubectl.1.27`` …); Debian's ``kubernetes-client`` is the fallback.
``python -m tests.kubectl_finder --ensure`` (run by ``make test``) makes sure at least one exists.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

from tests.debian_packages import ensure_package

_VERSIONED = re.compile(r"^kubectl\.(\d+)\.(\d+)$")


def find_kubectls() -> dict[tuple[int, int], pathlib.Path]:
    """(major, minor) → binary, for every kubectl found."""
    found: dict[tuple[int, int], pathlib.Path] = {}
    on_path = shutil.which("kubectl")
    folders: list[pathlib.Path] = []
    if on_path:
        folders.append(pathlib.Path(os.path.realpath(on_path)).parent)
    folders.append(pathlib.Path("/usr/lib/google-cloud-sdk/bin"))
    for folder in folders:
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            match = _VERSIONED.match(entry.name)
            if match and os.access(entry, os.X_OK):
                found.setdefault((int(match[1]), int(match[2])), entry)
    if on_path and not found:
        version = _client_version(pathlib.Path(on_path))
        if version is not None:
            found[version] = pathlib.Path(on_path)
    return found


def _client_version(binary: pathlib.Path) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [str(binary), "version", "--client", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout
    except OSError:
        return None
    match = re.search(r'"major":\s*"(\d+)".*?"minor":\s*"(\d+)', out, re.S)
    return (int(match[1]), int(match[2])) if match else None


def oldest_and_newest() -> list[pathlib.Path]:
    found = find_kubectls()
    if not found:
        return []
    versions = sorted(found)
    picked = [found[versions[0]]]
    if versions[-1] != versions[0]:
        picked.append(found[versions[-1]])
    return picked


def ensure() -> int:
    return ensure_package("kubernetes-client", lambda: bool(find_kubectls()), "no kubectl on this machine")


if __name__ == "__main__":
    if "--ensure" in sys.argv:
        sys.exit(ensure())
    for version, path in sorted(find_kubectls().items()):
        print(f"{version[0]}.{version[1]} {path}")
