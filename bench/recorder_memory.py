"""The event recorder's memory over 100,000 distinct Events.

An operator records Events for as long as it runs. The recorder remembers the Events it wrote
(to bump their ``count`` on a repeat) and a spam-filter bucket per object; both are LRUs of 4096
entries, as client-go's correlator. Before, the record of written Events grew by one entry per
distinct Event forever. This benchmark records 100,000 Events, each about an object of its own,
through one recorder against the embedded server (its own process, in memory), and reads this
process's RSS (after a GC) and the size of the recorder's memory at checkpoints. Flat means: the
RSS from the first checkpoint to the last grows by no more than noise, and ``remembered`` stays
at 4096. The same run with an unbounded cache (``cache_size`` beyond the count) is the
baseline: what the old recorder held.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import pathlib
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _server import server_process

from kubeloop.client.config import load_kubeconfig
from kubeloop.client.rest import APIClient
from kubeloop.manager.recorder import NORMAL, EventRecorder


def rss_mb() -> float:
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def involved(index: int) -> dict[str, Any]:
    name = f"backup-{index:06d}"
    return {
        "apiVersion": "example.com/v1",
        "kind": "Backup",
        "metadata": {"name": name, "namespace": "default", "uid": f"00000000-0000-4000-8000-{index:012d}"},
    }


async def record(kubeconfig: str, count: int, cache_size: int, checkpoints: int) -> dict[str, Any]:
    async with APIClient(load_kubeconfig(kubeconfig)) as client:
        recorder = EventRecorder(client, "backup-controller", cache_size=cache_size)
        samples: list[dict[str, float]] = []
        step = count // checkpoints
        started = time.perf_counter()
        for index in range(count):
            recorder.event(involved(index), NORMAL, "Scheduled", f"backup {index} scheduled")
            if recorder.pending >= 500:  # let the writer keep up, as a real operator's pace would
                await recorder.flush()
            if (index + 1) % step == 0:
                await recorder.flush()
                gc.collect()
                samples.append({"events": index + 1, "rss_mb": rss_mb(), "remembered": recorder.remembered})
        elapsed = time.perf_counter() - started
        await recorder.stop()
    first, last = samples[0], samples[-1]
    return {
        "cache_size": cache_size,
        "events_per_s": round(count / elapsed),
        "samples": samples,
        "rss_growth_mb_first_to_last": round(last["rss_mb"] - first["rss_mb"], 1),
        "remembered": last["remembered"],
    }


def measure_in_a_fresh_process(events: int, checkpoints: int, cache_size: int) -> dict[str, Any]:
    """One run in a process of its own (nothing else in its heap), on a server of its own."""
    with server_process(memory=True) as server:
        command = [sys.executable, __file__, "--events", str(events), "--checkpoints", str(checkpoints)]
        command += ["--measure", server.kubeconfig, "--cache-size", str(cache_size)]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(output)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--checkpoints", type=int, default=5)
    parser.add_argument("--measure", metavar="KUBECONFIG", help=argparse.SUPPRESS)
    parser.add_argument("--cache-size", type=int, default=4096, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(asyncio.run(record(args.measure, args.events, args.cache_size, args.checkpoints))))
        return
    bounded = measure_in_a_fresh_process(args.events, args.checkpoints, 4096)
    unbounded = measure_in_a_fresh_process(args.events, args.checkpoints, args.events + 1)
    print(
        json.dumps(
            {
                "benchmark": "recorder_memory",
                "events": args.events,
                "bounded": bounded,
                "unbounded_baseline": unbounded,
                "flat": bounded["remembered"] == 4096,
            }
        )
    )


if __name__ == "__main__":
    main()
