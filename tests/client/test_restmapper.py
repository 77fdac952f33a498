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


def aggregated(*groups: tuple[str, list[tuple[str, str, list[tuple[str, str, bool]]]]]) -> dict[str, Any]:
    """An APIGroupDiscoveryList: (group, [(version, freshness, [(plural, kind, namespaced)])])."""
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "items": [
            {
                "metadata": {"name": group} if group else {},
                "versions": [
                    {
                        "version": version,
                        "freshness": freshness,
                        "resources": [
                            {
                                "resource": plural,
                                "responseKind": {"group": "", "version": "", "kind": kind},
                                "scope": "Namespaced" if namespaced else "Cluster",
                                "verbs": ["get", "list"],
                                "subresources": [{"subresource": "status", "verbs": ["get"]}],
                            }
                            for plural, kind, namespaced in resources
                        ],
                    }
                    for version, freshness, resources in versions
                ],
            }
            for group, versions in groups
        ],
    }


async def test_every_groups_resources_come_from_two_aggregated_documents() -> None:
    served = {
        "/api": aggregated(("", [("v1", "Current", [("pods", "Pod", True)])])),
        "/apis": aggregated(
            ("stale.example.com", [("v2", "Stale", [("olds", "Old", True)]), ("v1", "Current", [("news", "New", True)])]),
            ("apps", [("v1", "Current", [("deployments", "Deployment", True)]), ("v1beta1", "Current", [("betas", "Beta", False)])]),
        ),
    }
    reads: list[str] = []

    async def fetch(path: str) -> Mapping[str, Any]:
        reads.append(path)
        raise AssertionError(f"an unaggregated read of {path}")

    async def fetch_aggregated(path: str) -> Mapping[str, Any]:
        reads.append(path)
        return served[path]

    mapper = RESTMapper(fetch, Gone, fetch_aggregated=fetch_aggregated)
    found = {(m.gvk.group, m.gvk.version, m.gvk.kind): m for m in await mapper.preferred_resources()}
    assert reads == ["/api", "/apis"]
    # The preferred (first fresh) version of each group; a stale version is passed over.
    assert set(found) == {("", "v1", "Pod"), ("stale.example.com", "v1", "New"), ("apps", "v1", "Deployment")}
    assert found[("", "v1", "Pod")].subresources == {"status"} and found[("", "v1", "Pod")].namespaced
    # Every version was remembered: a kind of another version needs no read.
    beta = await mapper.mapping(GroupVersionKind("apps", "v1beta1", "Beta"))
    assert not beta.namespaced and beta.collection_path("ns") == "/apis/apps/v1beta1/betas"
    assert reads == ["/api", "/apis"]


async def test_a_server_without_aggregated_discovery_is_read_group_version_by_group_version() -> None:
    served: dict[str, Mapping[str, Any]] = {
        "/api": {"kind": "APIVersions", "versions": ["v1"]},
        "/apis": {
            "kind": "APIGroupList",
            "groups": [{"name": "apps", "preferredVersion": {"groupVersion": "apps/v1"}}],
        },
        "/api/v1": document(("pods", "Pod", True)),
        "/apis/apps/v1": document(("deployments", "Deployment", True)),
    }
    reads: list[str] = []

    async def fetch(path: str) -> Mapping[str, Any]:
        reads.append(path)
        return served[path]

    mapper = RESTMapper(fetch, Gone, fetch_aggregated=fetch)  # it answers the plain documents
    found = {(m.gvk.group, m.gvk.kind) for m in await mapper.preferred_resources()}
    assert found == {("", "Pod"), ("apps", "Deployment")}
    assert reads == ["/api", "/apis", "/api/v1", "/apis/apps/v1"]
