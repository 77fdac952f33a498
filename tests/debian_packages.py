"""Installing a Debian package the tests need when the machine lacks it (``make test`` does this
before running the tests, so nothing is ever installed by hand)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable


def ensure_package(package: str, present: Callable[[], bool], purpose: str) -> int:
    """Install ``package`` with apt when ``present()`` is false; say which tests skip if that fails."""
    if present():
        return 0
    print(f"{purpose}: installing Debian's {package}", file=sys.stderr)
    apt = ["apt-get"] if os.geteuid() == 0 else ["sudo", "-n", "apt-get"]
    subprocess.run([*apt, "update", "-qq"], check=False)
    result = subprocess.run([*apt, "install", "-y", "-qq", package], check=False)
    if result.returncode != 0 or not present():
        print(f"could not install {package}; the tests that need it will be skipped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    # python -m tests.debian_packages COMMAND...: install the Debian package of each missing command
    # (the package is named as the command: curl, strace, ...).
    import shutil

    for command in sys.argv[1:]:
        ensure_package(command, lambda command=command: shutil.which(command) is not None, f"no {command}")
