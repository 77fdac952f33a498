"""B5 — start-up: `import kubeloop` (and the server package) against `import kopf` in the same run,
and the time until `kubeloop apiserver` prints its ready line. Prints one JSON line.

Targets (DESIGN.md): import kubeloop ≤ 200 ms and ≤ 0.4× import kopf; apiserver ready ≤ 1 s.
"""

from __future__ import annotations

import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = 7


def import_time(module: str) -> float | None:
    """Median time of `import module` in a fresh interpreter, timed inside it (interpreter
    start-up excluded: subtracting an empty start made a sub-millisecond import noise)."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"

    def once() -> float:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(result.stderr)
        return float(result.stdout.strip())

    try:
        once()
    except RuntimeError:
        return None
    return statistics.median(once() for _ in range(RUNS))


def apiserver_ready() -> float:
    samples = []
    for _ in range(5):
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            proc = subprocess.Popen(
                [sys.executable, "-m", "kubeloop.cli.main", "apiserver", "--data-dir", tmp, "--port", "0"],
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
            # Second start on the same data dir (PKI and database exist) is the common case.
            started = time.perf_counter()
            proc = subprocess.Popen(
                [sys.executable, "-m", "kubeloop.cli.main", "apiserver", "--data-dir", tmp, "--port", "0"],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            assert proc.stdout is not None
            proc.stdout.readline()
            samples.append(time.perf_counter() - started)
            proc.terminate()
            proc.wait(10)
    return statistics.median(samples)


def main() -> None:
    kubeloop = import_time("kubeloop")
    server_pkg = import_time("kubeloop.apiserver.server")
    kopf = import_time("kopf")
    result = {
        "bench": "B5",
        "import_kubeloop_ms": round(kubeloop * 1000, 1) if kubeloop is not None else None,
        "import_kubeloop_apiserver_ms": round(server_pkg * 1000, 1) if server_pkg is not None else None,
        "import_kopf_ms": round(kopf * 1000, 1) if kopf is not None else None,
        "ratio_kubeloop_to_kopf": round(kubeloop / kopf, 3) if kubeloop is not None and kopf else None,
        "apiserver_ready_s": round(apiserver_ready(), 3),
        "python": sys.version.split()[0],
        "cwd": str(pathlib.Path.cwd()),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
