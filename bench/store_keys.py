"""The store at many keys: what a create and a delete cost the object store when it already holds
10,000, 100,000 or a million objects, for keys that sort before every stored key (a custom
resource's group before ``configmaps``, a namespace named ``a``) and after every one.

The store keeps its keys in order for lists by prefix and pages; a structure whose insertions
move the keys after them costs more with every object stored (one sorted list: ~7 µs at 20,000
keys, ~210 µs at a million for a key sorting first). What this shows is the cost staying flat.
The writes go through ``ObjectStore.write`` on an in-memory log (the same path as ``--memory``,
without HTTP); the stored objects are small ConfigMaps loaded as a log's state at start-up.

Prints one JSON line: per size, the median µs per create and per delete at the front and at the
back (``--runs`` runs of ``--writes`` each), and the ratio of the largest size's to the smallest's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

import orjson

from kubeloop.apiserver.storage.log import LoadedState, LogRecord, MemoryLog
from kubeloop.apiserver.storage.objectstore import ObjectStore
from kubeloop.gcpause import tune_for_serving


class PreloadedLog(MemoryLog):
    """An in-memory log that starts holding ``count`` ConfigMaps."""

    def __init__(self, count: int) -> None:
        self._count = count

    def load(self) -> LoadedState:
        records = [
            LogRecord(index + 1, key_of("default", index), True, False, index + 1, index, body(index))
            for index in range(self._count)
        ]
        return LoadedState(records, iter(()), 0, self._count)


def key_of(namespace: str, index: int) -> str:
    return f"/registry/configmaps/{namespace}/cm-{index:07d}"


def body(index: int) -> bytes:
    return orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{index:07d}"}})


def config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


async def measure(count: int, writes: int) -> dict[str, float]:
    store = ObjectStore(PreloadedLog(count))
    store.load()
    tune_for_serving()
    out: dict[str, float] = {}
    # Namespaces "a" (before "default") and "z" (after it, and after every stored key).
    for where, namespace in (("front", "a"), ("back", "z")):
        keys = [key_of(namespace, index) for index in range(writes)]
        started = time.perf_counter()
        for key in keys:
            await store.write(key, config_map(key.rsplit("/", 1)[1]), expected_revision=0)
        out[f"create_{where}_us"] = (time.perf_counter() - started) / writes * 1e6
        started = time.perf_counter()
        for key in keys:
            stored = store.get(key)
            assert stored is not None
            await store.write(key, None, expected_revision=stored.revision)
        out[f"delete_{where}_us"] = (time.perf_counter() - started) / writes * 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="objects stored before the writes")
    parser.add_argument("--writes", type=int, default=2000, help="creates (then deletes) per run and place")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    results: dict[str, Any] = {"bench": "store_keys", "writes": args.writes, "runs": args.runs}
    for size in sizes:
        runs = [asyncio.run(measure(size, args.writes)) for _ in range(args.runs)]
        results[str(size)] = {key: round(statistics.median(run[key] for run in runs), 1) for key in runs[0]}
    smallest, largest = results[str(min(sizes))], results[str(max(sizes))]
    results["largest_over_smallest"] = {key: round(largest[key] / smallest[key], 2) for key in smallest}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
