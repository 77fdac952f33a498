"""How long ``kubeloop run --reload`` takes from an edit of the operator to its reloaded manager:
an operator runs on its embedded server, its file is edited N times, and each time the span
from the write to the line ``controller(s) starting`` of the new manager is measured (the file
watch's polling and settling, forgetting and importing the modules, the preflight, the setup).
No peer runs here: kopf has no reload of its own. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import IO

OPERATOR = '''\
import kubeloop
from kubeloop import kinds

VALUE = "{value}"


def setup(manager):
    async def reconcile(request):
        return None

    kubeloop.Builder(manager).for_(kinds.ConfigMap).complete(reconcile)
'''


def read_until(stream: IO[str], wanted: str) -> None:
    while True:
        line = stream.readline()
        if not line:
            raise SystemExit(f"the operator ended before {wanted!r}")
        if wanted in line:
            return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--edits", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        operator = pathlib.Path(folder) / "op.py"
        operator.write_text(OPERATOR.format(value="start"))
        run = subprocess.Popen(
            [sys.executable, "-m", "kubeloop.cli.main", "run", "op.py", "--embedded", "--reload"],
            cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        assert run.stdout is not None
        took = []
        try:
            read_until(run.stdout, "controller(s) starting")
            for edit in range(args.edits):
                started = time.monotonic()
                operator.write_text(OPERATOR.format(value=f"edit-{edit}"))
                read_until(run.stdout, "controller(s) starting")
                took.append(time.monotonic() - started)
        finally:
            run.send_signal(signal.SIGTERM)
            run.wait(60)
    took.sort()
    print(
        json.dumps(
            {
                "benchmark": "reload",
                "edits": args.edits,
                "edit_to_reloaded_ms_median": round(statistics.median(took) * 1000, 1),
                "edit_to_reloaded_ms_max": round(took[-1] * 1000, 1),
                "cpus": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()
