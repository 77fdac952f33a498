"""Which tests cost the suite its CPU: a pytest plugin that records each test's CPU seconds, the
worker's own (the test, its in-process servers and clients) and its waited-for children's
(kubectl, `kubeloop` commands, servers it started and stopped), and prints the most costly
modules and tests at the end. ``make test`` on two cores is bound by CPU, so these sums (not the
durations ``--durations`` prints, which count waiting) are what to cut. A module's fixtures
count towards the first of its tests each worker runs; a process nobody waits for (a pod's,
a fork server's) counts towards none (``scripts/suite_cpu.py`` sees those)::

    PYTHONPATH=scripts .venv/bin/pytest -p cpu_by_test -q -n 3 --dist loadfile

A development tool: the tests do not run it.
"""

from __future__ import annotations

import collections
import os
import pathlib
import resource
import tempfile
from collections.abc import Generator
from typing import Any

import pytest

#: Where the workers append a line per test (emptied by the controller as the run starts).
LOG = pathlib.Path(os.environ.get("CPU_BY_TEST_DIR") or tempfile.gettempdir()) / "kubeloop-cpu-by-test.log"
TOP = 30


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller (or a run without xdist)
        LOG.write_text("")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, None]:
    own, children = _cpu()
    yield
    own_after, children_after = _cpu()
    with LOG.open("a") as log:
        log.write(f"{own_after - own:.3f} {children_after - children:.3f} {item.nodeid}\n")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if hasattr(terminalreporter.config, "workerinput") or not LOG.exists():
        return
    by_module: collections.Counter[str] = collections.Counter()
    by_test: collections.Counter[str] = collections.Counter()
    own_total = children_total = 0.0
    for line in LOG.read_text().splitlines():
        own, children, nodeid = line.split(" ", 2)
        cost = float(own) + float(children)
        own_total, children_total = own_total + float(own), children_total + float(children)
        by_module[nodeid.split("::")[0]] += cost
        by_test[nodeid.split("[")[0]] += cost  # a parametrized test's cases together
    write = terminalreporter.write_line
    write(f"CPU seconds by test: {own_total:.0f} in the workers, {children_total:.0f} in their children")
    for title, counts in (("modules", by_module), ("tests (cases summed)", by_test)):
        write(f"-- the most costly {title}")
        for name, cost in counts.most_common(TOP):
            write(f"{cost:8.1f}  {name}")
