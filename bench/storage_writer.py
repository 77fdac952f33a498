"""The storage writer alone: how many durable writes a second the log's writer process commits
when the server keeps it busy, and what each costs the writer and the process feeding it.

This is the ceiling of the one process that must stay single (it orders and commits every
write) once serving is spread over several: writes/s across any number of serving processes
cannot exceed it. The feeding side does what the store does each loop tick: one append of that
tick's writes (``--batch``, 50 as from B4's 50 clients), ``--inflight`` such appends outstanding.
Rows are small ConfigMaps (~300 bytes of JSON). Prints one JSON line, medians of ``--runs``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

import orjson

from kubeloop.apiserver.storage.log import LogRecord, SQLiteLog, StorageError

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from b4_apiserver_writes import process_cpu_seconds


def value(index: int) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"cm-{index}",
                "namespace": "default",
                "uid": f"00000000-0000-0000-0000-{index:012d}",
                "resourceVersion": str(index),
                "creationTimestamp": "2026-11-29T08:00:00Z",
            },
            "data": {"key": "value", "index": str(index)},
        }
    )


async def run(*, batch: int, inflight: int, seconds: float, fsync: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        log = SQLiteLog(pathlib.Path(folder) / "state.db", durable=fsync)
        log.load()
        loop = asyncio.get_running_loop()
        revision = 0
        committed = 0
        failed = 0

        async def append() -> None:
            nonlocal revision, committed, failed
            outcomes: list[asyncio.Future[StorageError | None]] = []
            writes = []
            for _ in range(batch):
                revision += 1
                outcome: asyncio.Future[StorageError | None] = loop.create_future()
                outcomes.append(outcome)
                record = LogRecord(revision, f"/registry/configmaps/default/cm-{revision}", True, False, revision,
                                   revision - 1, value(revision))  # fmt: skip
                writes.append((record, outcome.set_result))
            log.submit(writes)
            for error in await asyncio.gather(*outcomes):
                if error is None:
                    committed += 1
                else:
                    failed += 1

        await append()  # the writer started
        writer_pid = log.writer_pid
        assert writer_pid is not None
        committed = 0
        deadline = time.perf_counter() + seconds
        started = time.perf_counter()
        feeding_cpu, writer_cpu = time.process_time(), process_cpu_seconds(writer_pid)

        async def feeder() -> None:
            while time.perf_counter() < deadline:
                await append()

        await asyncio.gather(*(feeder() for _ in range(inflight)))
        elapsed = time.perf_counter() - started
        feeding_cpu = time.process_time() - feeding_cpu
        writer_cpu = process_cpu_seconds(writer_pid) - writer_cpu
        await log.close()
    return {
        "writes_per_s": committed / elapsed,
        "writer_cpu_us_per_write": writer_cpu / max(committed, 1) * 1e6,
        # Building the records is the bench's; the rest is what the store's side pays per write.
        "feeding_cpu_us_per_write": feeding_cpu / max(committed, 1) * 1e6,
        "writer_busy": writer_cpu / elapsed,
        "failed": failed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=50, help="writes per append (per loop tick)")
    parser.add_argument("--inflight", type=int, default=4, help="appends outstanding")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-fsync", action="store_true")
    args = parser.parse_args()
    results = [
        asyncio.run(run(batch=args.batch, inflight=args.inflight, seconds=args.seconds, fsync=not args.no_fsync))
        for _ in range(args.runs)
    ]
    medians = {key: round(statistics.median(r[key] for r in results), 2) for key in results[0]}
    print(
        json.dumps(
            {
                "bench": "storage_writer",
                "batch": args.batch,
                "inflight": args.inflight,
                "fsync": not args.no_fsync,
                "runs": args.runs,
                **medians,
                "cores": len(os.sched_getaffinity(0)),
            }
        )
    )


if __name__ == "__main__":
    main()
