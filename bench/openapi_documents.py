"""OpenAPI v3 documents: how long the server takes to build one group-version's document cold.

kubectl 1.29+ and ``kubectl explain`` ask for ``/openapi/v3/<group-version>``; the server builds a
document from the upstream schemas on first request and caches it. Timed: ``apis/apps/v1`` and
``api/v1`` from an empty document cache (the schemas themselves already loaded, as they are after
the first write). Prints one JSON line of milliseconds (median of repeats); no peer exists.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.catalog.resources import ResourceCatalog
from kubeloop.apiserver.groups import builtin_resources
from kubeloop.apiserver.openapi import v3


def build_ms(catalog: ResourceCatalog, group_version: str) -> float:
    v3.clear_caches()
    started = time.perf_counter()
    document = v3.openapi_v3_document(catalog, group_version)
    elapsed = time.perf_counter() - started
    assert document is not None, group_version
    return elapsed * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    schemas.definitions()
    catalog = ResourceCatalog(builtin_resources())
    results: dict[str, object] = {"bench": "openapi_documents", "repeats": args.repeats}
    for group_version in ("apis/apps/v1", "api/v1"):
        times = [build_ms(catalog, group_version) for _ in range(args.repeats)]
        results[f"{group_version}_ms"] = round(statistics.median(times), 1)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
