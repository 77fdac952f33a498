"""How long from an empty folder to a passing test of a new operator: ``kubeloop init``, then
``kubeloop create api`` (model, controller, tests, sample, manifests), then the generated tests
(``python -m pytest``: the operator against the embedded server with pods simulated, and the
one-reconcile unit test on ``fake_manager``). Each step is a command as the user types it,
timed from its start to its exit; the run is repeated and medians printed. No peer runs: kopf
has no scaffold, and kubebuilder's needs Go and envtest's binaries. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time


def timed(args: list[str], folder: pathlib.Path) -> float:
    env = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
    env["PATH"] = f"{pathlib.Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    started = time.perf_counter()
    done = subprocess.run(args, cwd=folder, capture_output=True, text=True, env=env, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return took


def one_run() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as parent:
        folder = pathlib.Path(parent)
        kubeloop = [sys.executable, "-m", "kubeloop.cli.main"]
        init = timed([*kubeloop, "init", "shop"], folder)
        project = folder / "shop"
        api = timed([*kubeloop, "create", "api", "--group", "web.example.com", "--version", "v1", "--kind", "Website"], project)  # fmt: skip
        tests = timed([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], project)
    return {"init_s": init, "create_api_s": api, "tests_s": tests, "total_s": init + api + tests}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs = [one_run() for _ in range(args.runs)]
    medians = {key: round(statistics.median(run[key] for run in runs), 2) for key in runs[0]}
    print(json.dumps({"bench": "first_test", "runs": args.runs, **medians}))


if __name__ == "__main__":
    main()
