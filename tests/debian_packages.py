"""Installing a Debian package the tests need when the machine lacks it (``make test`` does this
before running the tests, so nothing is ever installed by hand).

``python -m tests.debian_packages COMMAND...`` installs the package of each missing command (named
as the command: curl, strace) and exits non-zero, naming it, when one cannot be had: a tool the
tests need fails the run, it never turns into skipped tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable


def ensure_package(package: str, present: Callable[[], bool], purpose: str) -> int:
    """Install ``package`` with apt when ``present()`` is false: 0 when it is there, 1 if not."""
    if present():
        return 0
    print(f"{purpose}: installing Debian's {package}", file=sys.stderr)
    apt = ["apt-get"] if os.geteuid() == 0 else ["sudo", "-n", "apt-get"]
    try:
        subprocess.run([*apt, "update", "-qq"], check=False)
        subprocess.run([*apt, "install", "-y", "-qq", package], check=False)
    except OSError as exc:
        print(f"cannot run apt-get: {exc}", file=sys.stderr)
    if not present():
        print(f"{package} could not be installed, and the tests need it ({purpose})", file=sys.stderr)
        return 1
    return 0


def ensure_commands(commands: list[str]) -> int:
    failed = 0
    for command in commands:
        failed |= ensure_package(command, lambda command=command: shutil.which(command) is not None, f"no {command}")
    return failed


if __name__ == "__main__":
    sys.exit(ensure_commands(sys.argv[1:]))
