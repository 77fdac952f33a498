"""The lazy RESTMapper: discovery read once per group-version, read again for an unknown kind
(a CRD installed after the first read), concurrent lookups sharing one read."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

import pytest

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.client.restmapper import NoKindMatch, RESTMapper


class Gone(Exception):
    pass


def document(*kinds: tuple[str, str, bool]) -> dict[str, Any]:
    resources = [
        {"name": plural, "kind": kind, "namespaced": namespaced, "verbs": ["get", "list"]}
        for plural, kind, namespaced in kinds
    ]
    resources += [
        {"name": f"{plural}/status", "kind": kind, "namespaced": namespaced, "verbs": ["get"]}
        for plural, kind, namespaced in kinds
    ]
    return {"kind": "APIResourceList", "resources": resources}


async def test_reads_once_and_refreshes_for_an_unknown_kind() -> None:
    served: dict[str, Mapping[str, Any]] = {"/apis/example.com/v1": document(("widgets", "Widget", True))}
    reads: list[str] = []

    async def fetch(path: str) -> Mapping[str, Any]:
        reads.append(path)
        await asyncio.sleep(0.01)
        if path not in served:
            raise Gone(path)
        return served[path]

    mapper = RESTMapper(fetch, Gone)
    widget = GroupVersionKind("example.com", "v1", "Widget")
    found = await asyncio.gather(*(mapper.mapping(widget) for _ in range(5)))
    assert reads == ["/apis/example.com/v1"]  # five lookups, one read
    assert found[0].resource == "widgets" and found[0].namespaced and found[0].subresources == {"status"}
    assert found[0].collection_path("ns") == "/apis/example.com/v1/namespaces/ns/widgets"

    gadget = GroupVersionKind("example.com", "v1", "Gadget")
    with pytest.raises(NoKindMatch):
        await mapper.mapping(gadget)
    assert reads == ["/apis/example.com/v1"] * 2  # re-read once, still unknown

    served["/apis/example.com/v1"] = document(("widgets", "Widget", True), ("gadgets", "Gadget", False))
    mapped = await mapper.mapping(gadget)  # the CRD appeared
    assert mapped.resource == "gadgets" and not mapped.namespaced
    assert mapped.collection_path("ignored") == "/apis/example.com/v1/gadgets"

    with pytest.raises(NoKindMatch, match=re.escape('no matches for kind "Thing" in version "other.io/v1"')):
        await mapper.mapping(GroupVersionKind("other.io", "v1", "Thing"))


@pytest.mark.parametrize(
    ("asked", "served", "suggested"),
    [
        ("Cronjob", ["Job", "CronJob"], "CronJob"),
        ("cronjob", ["Job", "CronJob"], "CronJob"),
        ("Deploymnet", ["Deployment", "ReplicaSet"], "Deployment"),
        ("Widget", ["Deployment", "ReplicaSet"], ""),
    ],
)
async def test_an_unknown_kind_names_the_served_kind_it_was_probably_meant_to_be(
    asked: str, served: list[str], suggested: str
) -> None:
    entries = [{"name": f"{kind.lower()}s", "kind": kind, "namespaced": True} for kind in served]

    async def fetch(path: str) -> dict[str, object]:
        return {"resources": entries}

    mapper = RESTMapper(fetch, LookupError)
    with pytest.raises(NoKindMatch) as refused:
        await mapper.mapping(GroupVersionKind("batch", "v1", asked))
    assert refused.value.suggestion == suggested
    hint = f" (did you mean {suggested}?)" if suggested else ""
    assert str(refused.value) == f'no matches for kind "{asked}" in version "batch/v1"{hint}'
