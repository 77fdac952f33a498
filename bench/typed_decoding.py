"""Typed decoding of a write: a Deployment checked against its upstream schema as Go's decoder
would (unknown and duplicate fields, types), with ``fieldValidation=Warn``.

Every create and update of a built-in kind pays this before validation. Prints one JSON line:
µs per Deployment, the median of ``--rounds`` rounds of ``--count`` decodes (the plans compiled
first); no peer exists. It was a timed assertion in the tests (< 2 ms), which a noisy machine
could fail and a slow change could pass.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from kubeloop.apiserver import decoding
from kubeloop.apiserver.catalog.schemas import kind_schema


def deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx:1.25",
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                        }
                    ]
                },
            },
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    schema = kind_schema("apps", "v1", "Deployment")
    assert schema is not None
    obj = deployment()

    def decode(mode: str) -> object:
        return decoding.decode_against_schema(obj, schema, kind="Deployment", version="v1", mode=mode)

    decode("Strict")  # compiles the plans
    rounds = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        for _ in range(args.count):
            decode("Warn")
        rounds.append((time.perf_counter() - started) / args.count * 1e6)
    print(
        json.dumps(
            {
                "bench": "typed_decoding",
                "count": args.count,
                "us_per_deployment_median": round(statistics.median(rounds), 1),
                "rounds_us": [round(value, 1) for value in rounds],
            }
        )
    )


if __name__ == "__main__":
    main()
