"""Where the test suite's CPU goes, by kind of process: the pytest workers, the servers they
start, pods, kubectl, the CLI. ``make test`` is bound by CPU on two cores, so this is what to cut.

Runs a command (by default the suite as ``make unit`` runs it) under the kernel's process
accounting, which records every process's CPU as it exits, while a poller records each new
process's command line (accounting keeps only the first 15 characters of its name); then prints
CPU seconds by kind. Accounting sees every process of the machine: run it on an otherwise idle
one. Needs root and Debian's ``acct`` package (``accton``, ``dump-acct``)::

    apt-get install acct
    python scripts/suite_cpu.py                      # the suite, three workers
    python scripts/suite_cpu.py -- pytest -q tests/node

A development tool: the tests do not run it.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

DEFAULT = [".venv/bin/pytest", "-q", "-p", "no:cacheprovider", "-n", "3", "--dist", "loadfile"]

#: (pattern over a command line, kind), the first that matches names the process.
KINDS = [
    (r"execnet|xdist|import sys;exec\(eval\(sys\.stdin", "pytest worker"),
    (r"kubeloop\.apiserver\.frontends", "kubeloop apiserver front-end"),
    (r"kubeloop\.apiserver\.storage\.writer", "storage writer"),
    (r"kubeloop(?:\.cli\.main)? (\w[\w-]*)", "kubeloop {0}"),
    # The node's fork server and what it forks (its children keep its command line).
    (r"kubeloop/node/zygote\.py", "pod: forked by the fork server (and the fork server)"),
    (r"-m (agentruntime[\w.]*)", "pod: python -m {0}"),
    (r"importlib\.import_module\('(\w[\w.]*)'\)", "pod: installed image {0}"),
    (r"kubectl", "kubectl"),
    (r"-m pytest", "nested pytest"),
    (r"helm", "helm"),
    (r"chrom", "chromium"),
]


def poll_command_lines(into: dict[int, str], stop: threading.Event) -> None:
    """Record each new process's command line, every 50 ms, until ``stop``."""
    while not stop.is_set():
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in into:
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    line = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            if line:
                into[int(name)] = line
        stop.wait(0.05)


def accounted(path: str) -> dict[int, tuple[str, float]]:
    """pid → (name, CPU seconds) of every process the accounting file recorded."""
    dump = subprocess.run(["dump-acct", path], capture_output=True, text=True, check=True).stdout
    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[int, tuple[str, float]] = {}
    for line in dump.splitlines():
        fields = [field.strip() for field in line.split("|")]
        found[int(fields[9])] = (fields[0], (float(fields[2]) + float(fields[3])) / ticks)
    return found


def kind_of(name: str, command: str | None) -> str:
    for pattern, kind in KINDS:
        match = re.search(pattern, command or name)
        if match:
            return kind.format(*match.groups())
    return name


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", nargs="*", help="what to run (default: the suite, as make unit runs it)")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    command = args.command or DEFAULT
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "pacct")
        open(path, "w").close()
        subprocess.run(["accton", path], check=True, stdout=subprocess.DEVNULL)
        lines: dict[int, str] = {}
        stop = threading.Event()
        poller = threading.Thread(target=poll_command_lines, args=(lines, stop), daemon=True)
        poller.start()
        started = time.monotonic()
        try:
            code = subprocess.run(command).returncode
        finally:
            subprocess.run(["accton", "off"], check=False, stdout=subprocess.DEVNULL)
            stop.set()
            poller.join()
        wall = time.monotonic() - started
        processes = accounted(path)
    seconds: collections.defaultdict[str, float] = collections.defaultdict(float)
    counts: collections.Counter[str] = collections.Counter()
    for pid, (name, cpu) in processes.items():
        kind = kind_of(name, lines.get(pid))
        seconds[kind] += cpu
        counts[kind] += 1
    total = sum(seconds.values())
    print(f"{wall:.0f} s of wall time, {total:.0f} s of CPU in {len(processes)} processes (exit {code})")
    for kind, cpu in sorted(seconds.items(), key=lambda item: -item[1])[: args.top]:
        print(
            f"{cpu:8.1f} s {100 * cpu / total:5.1f} % {counts[kind]:5d} × {cpu / counts[kind]:5.2f} s  {kind}"
        )
    return code


if __name__ == "__main__":
    sys.exit(main())
