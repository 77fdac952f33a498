"""B5 — start-up, like for like: what an operator imports against what a kopf operator imports
(`import kopf`), in the same run, and the time until `kubeloop apiserver` prints its ready line.
Prints one JSON line.

Rows: `operator_imports_ms` loads examples/web_config/main.py — an operator written with the
facade (the manager, builder, helpers, predicates, errors, kinds and the core/v1 models) — and
calls its `setup(manager)` (what the names it uses load on first use is counted); the figure to
compare with kopf's (`ratio_operator_to_kopf`), which imports kopf and registers an async create
and update handler, as a kopf operator's module does. `import_kubeloop_ms` is the bare
`import kubeloop` (names load on first use, so it is nearly nothing and compares with nothing);
`import_kubeloop_apiserver_ms` the embedded server. `apiserver_ready_s` is `kubeloop apiserver` as
users start it (a process a core), `apiserver_ready_one_process_s` with `--workers 1`.

Targets (docs/design/performance.md): import kubeloop ≤ 200 ms and ≤ 0.4× import kopf; apiserver ready ≤ 1 s.
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = 7


ROOT = pathlib.Path(__file__).resolve().parent.parent
OPERATOR = ROOT / "examples" / "web_config" / "main.py"
LOAD_OPERATOR = (
    f"import importlib.util as u; s = u.spec_from_file_location('operator_main', {str(OPERATOR)!r}); "
    "m = u.module_from_spec(s); s.loader.exec_module(m); "
    "import kubeloop; from kubeloop.client.config import ClientConfig; "
    "m.setup(kubeloop.Manager(kubeloop.APIClient(ClientConfig(server='https://127.0.0.1:1'))))"
)
KOPF_OPERATOR = (
    "import kopf; "
    "reconcile = kopf.on.create('example.com', 'v1', 'widgets')("
    "kopf.on.update('example.com', 'v1', 'widgets')(lambda **_: None))"
)


def import_time(statement: str) -> float | None:
    """Median time of ``statement`` (an import) in a fresh interpreter, timed inside it
    (interpreter start-up excluded: subtracting an empty start made a sub-millisecond import
    noise). Byte code is written on the first run, as an installed package has it."""
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"

    def once() -> float:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        if result.returncode != 0:
            raise RuntimeError(result.stderr)
        return float(result.stdout.strip())

    try:
        once()
    except RuntimeError:
        return None
    return statistics.median(once() for _ in range(RUNS))


def apiserver_ready(*flags: str) -> float:
    """The median time from ``kubeloop apiserver`` (with ``flags``) to its ready line: on a new
    data directory, and again on it (PKI and database there: the common case)."""
    samples = []
    for _ in range(5):
        with tempfile.TemporaryDirectory() as tmp:
            for _start in ("new", "again"):
                started = time.perf_counter()
                proc = subprocess.Popen(
                    [sys.executable, "-m", "kubeloop.cli.main", "apiserver", "--data-dir", tmp, "--port", "0", *flags],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
                assert proc.stdout is not None
                line = proc.stdout.readline()
                samples.append(time.perf_counter() - started)
                proc.terminate()
                proc.wait(10)
                assert "ready" in line, line
    return statistics.median(samples)


def main() -> None:
    operator = import_time(LOAD_OPERATOR)
    kubeloop = import_time("import kubeloop")
    server_pkg = import_time("import kubeloop.apiserver.server")
    kopf = import_time(KOPF_OPERATOR)
    result = {
        "bench": "B5",
        "operator_imports_ms": round(operator * 1000, 1) if operator is not None else None,
        "ratio_operator_to_kopf": round(operator / kopf, 3) if operator is not None and kopf else None,
        "import_kubeloop_ms": round(kubeloop * 1000, 2) if kubeloop is not None else None,
        "import_kubeloop_apiserver_ms": round(server_pkg * 1000, 1) if server_pkg is not None else None,
        "kopf_operator_ms": round(kopf * 1000, 1) if kopf is not None else None,
        "apiserver_ready_s": round(apiserver_ready(), 3),  # a process a core, the default
        "apiserver_ready_one_process_s": round(apiserver_ready("--workers", "1"), 3),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "python": sys.version.split()[0],
        "cwd": str(pathlib.Path.cwd()),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
