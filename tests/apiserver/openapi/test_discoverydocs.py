"""Discovery documents (``/version``, ``/api``, ``/apis``, resource lists), checked against upstream's shapes."""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.groups import builtin_resources
from kubeloop.apiserver.openapi import discoverydocs


def test_version_info_uses_the_schema_release() -> None:
    release = schemas.schema_release()
    info = discoverydocs.version_info(release)
    major, minor = release.split(".")[:2]
    assert (info["major"], info["minor"]) == (major, minor)
    assert info["gitVersion"] == f"v{release}-kubeloop"
    for key in ("gitCommit", "gitTreeState", "buildDate", "goVersion", "compiler", "platform"):
        assert info[key]
    assert "/" in info["platform"]
    assert discoverydocs.version_info("1.33.0")["gitVersion"] == "v1.33.0-kubeloop"


def test_core_api_versions() -> None:
    versions = discoverydocs.core_api_versions("10.0.0.1:6443")
    assert versions == {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.1:6443"}],
    }


def test_group_list_and_groups(catalog: ResourceCatalog) -> None:
    groups = discoverydocs.api_group_list(catalog)
    assert groups["kind"] == "APIGroupList" and groups["apiVersion"] == "v1"
    names = [g["name"] for g in groups["groups"]]
    expected = {r.group for r in builtin_resources() if r.group}
    assert set(names) == expected
    assert "" not in names
    assert names.index("apps") < names.index("batch")  # kube-apiserver's priority order
    for group in groups["groups"]:
        version = "v2" if group["name"] == "autoscaling" else "v1"
        assert group["preferredVersion"] == {"groupVersion": f"{group['name']}/{version}", "version": version}
        assert group["versions"][0] == group["preferredVersion"]  # the preferred version comes first
    authentication = next(g for g in groups["groups"] if g["name"] == "authentication.k8s.io")
    assert [v["version"] for v in authentication["versions"]] == ["v1", "v1beta1"]
    apps = discoverydocs.api_group(catalog, "apps")
    assert apps is not None
    assert apps["kind"] == "APIGroup" and apps["name"] == "apps"
    assert discoverydocs.api_group(catalog, "nope.example.com") is None
    assert discoverydocs.api_group(catalog, "") is None


def test_preferred_version_is_kube_aware() -> None:
    catalog = ResourceCatalog(builtin_resources())
    for version in ("v1beta1", "v2alpha1", "v1", "v10"):
        catalog.add(ResourceType("stable.example.com", version, "widgets", "widget", "Widget", True))
    group = discoverydocs.api_group(catalog, "stable.example.com")
    assert group is not None
    assert [v["version"] for v in group["versions"]] == ["v10", "v1", "v1beta1", "v2alpha1"]
    assert group["preferredVersion"]["version"] == "v10"


@pytest.mark.parametrize("resource", builtin_resources(), ids=lambda r: f"{r.group or 'core'}/{r.plural}")
def test_every_builtin_resource_is_discoverable(catalog: ResourceCatalog, resource: ResourceType) -> None:
    listing = discoverydocs.api_resource_list(catalog, resource.group, resource.version)
    assert listing is not None
    assert listing["kind"] == "APIResourceList"
    assert listing["groupVersion"] == resource.group_version
    entries = {e["name"]: e for e in listing["resources"]}
    entry = entries[resource.plural]
    assert entry["singularName"] == resource.singular
    assert entry["namespaced"] is resource.namespaced
    assert entry["kind"] == resource.kind
    assert entry["verbs"] == list(resource.verbs)
    assert entry.get("shortNames", []) == list(resource.short_names)
    assert entry.get("categories", []) == list(resource.categories)
    # Only stored resources have a storage version (upstream: no hash for reviews, bindings and
    # component statuses).
    assert bool(entry.get("storageVersionHash")) is ("watch" in resource.verbs)
    for sub in resource.subresources:
        sub_entry = entries[f"{resource.plural}/{sub}"]
        assert sub_entry["namespaced"] is resource.namespaced
        assert sub_entry["singularName"] == ""
        assert "shortNames" not in sub_entry


def test_subresource_entries(catalog: ResourceCatalog) -> None:
    apps = discoverydocs.api_resource_list(catalog, "apps", "v1")
    core = discoverydocs.api_resource_list(catalog, "", "v1")
    assert apps is not None and core is not None
    by_name = {e["name"]: e for e in apps["resources"] + core["resources"]}
    assert by_name["deployments/status"] == {
        "name": "deployments/status",
        "singularName": "",
        "namespaced": True,
        "kind": "Deployment",
        "verbs": ["get", "patch", "update"],
    }
    scale = by_name["deployments/scale"]
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    assert scale["verbs"] == ["get", "patch", "update"]
    assert by_name["namespaces/finalize"]["verbs"] == ["update"]
    assert by_name["namespaces/finalize"]["namespaced"] is False
    names = [e["name"] for e in apps["resources"]]
    assert names == sorted(names)
    # Upstream's hash for apps/v1 Deployment.
    assert by_name["deployments"]["storageVersionHash"] == "8aSe+NMegvE="
    assert discoverydocs.api_resource_list(catalog, "apps", "v9") is None


def _split_aggregated(
    document: dict[str, Any],
) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """client-go's ``SplitGroupsAndResources``: an aggregated document as the groups and resource
    lists the unaggregated documents give (what kubectl builds its REST mapping from)."""
    groups, resources = [], {}
    for item in document["items"]:
        name = item["metadata"].get("name", "")
        versions = []
        for version in item["versions"]:
            assert version["freshness"] == "Current"
            group_version = f"{name}/{version['version']}" if name else version["version"]
            versions.append({"groupVersion": group_version, "version": version["version"]})
            listing = []
            for entry in version["resources"]:
                kind = entry["responseKind"]
                parent = {
                    "name": entry["resource"],
                    "singularName": entry["singularResource"],
                    "namespaced": entry["scope"] == "Namespaced",
                    "group": kind["group"],
                    "version": kind["version"],
                    "kind": kind["kind"],
                    "verbs": entry["verbs"],
                    "shortNames": entry.get("shortNames", []),
                    "categories": entry.get("categories", []),
                }
                listing.append(parent)
                for sub in entry.get("subresources", []):
                    listing.append(
                        {
                            **parent,
                            "name": f"{entry['resource']}/{sub['subresource']}",
                            "singularName": "",  # client-go copies the parent's; upstream's v1 has ""
                            "shortNames": [],
                            "categories": [],
                            "verbs": sub["verbs"],
                            **sub["responseKind"],
                        }
                    )
            resources[group_version] = listing
        groups.append({"name": name, "versions": versions, "preferredVersion": versions[0]})
    return groups, resources


def _unaggregated_entry(entry: dict[str, Any], group: str, version: str) -> dict[str, Any]:
    """A v1 APIResource as the aggregated form carries it (no storage version hash; the group
    and version as its kind's, empty when they are the list's own for a built-in)."""
    return {
        "name": entry["name"],
        "singularName": entry["singularName"],
        "namespaced": entry["namespaced"],
        "group": entry.get("group", group),
        "version": entry.get("version", version),
        "kind": entry["kind"],
        "verbs": entry["verbs"],
        "shortNames": entry.get("shortNames", []),
        "categories": entry.get("categories", []),
    }


@pytest.mark.parametrize("version", discoverydocs.AGGREGATED_VERSIONS)
def test_aggregated_discovery_says_what_the_unaggregated_documents_say(version: str) -> None:
    catalog = ResourceCatalog(builtin_resources())
    for served in ("v1", "v2beta1"):
        catalog.add(
            ResourceType(
                "stable.example.com",
                served,
                "widgets",
                "widget",
                "Widget",
                True,
                short_names=("wd",),
                categories=("all",),
                subresources=("status", "scale"),
                definition="widgets.stable.example.com",
            )
        )
    core = discoverydocs.aggregated_discovery(catalog, core=True, version=version)
    named = discoverydocs.aggregated_discovery(catalog, core=False, version=version)
    for document in (core, named):
        assert document["kind"] == "APIGroupDiscoveryList"
        assert document["apiVersion"] == f"apidiscovery.k8s.io/{version}"
    core_groups, core_resources = _split_aggregated(core)
    groups, resources = _split_aggregated(named)
    assert core_groups == [
        {
            "name": "",
            "versions": [{"groupVersion": "v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": "v1", "version": "v1"},
        }
    ]
    assert groups == discoverydocs.api_group_list(catalog)["groups"]  # the same groups, order, preference
    resources.update(core_resources)
    assert set(resources) == {
        f"{g}/{v}" if g else v for g, vs in catalog.group_versions().items() for v in vs
    }
    for group_version, listing in resources.items():
        group, _, version_name = group_version.rpartition("/")
        unaggregated = discoverydocs.api_resource_list(catalog, group, version_name)
        assert unaggregated is not None
        custom = group == "stable.example.com"
        expected = [
            _unaggregated_entry(entry, group if custom else "", version_name if custom else "")
            for entry in unaggregated["resources"]
        ]
        assert listing == expected, group_version


def test_aggregated_discovery_names_a_subresources_kind() -> None:
    catalog = ResourceCatalog(builtin_resources())
    named = discoverydocs.aggregated_discovery(catalog, core=False)
    apps = next(item for item in named["items"] if item["metadata"]["name"] == "apps")
    assert apps["metadata"] == {"name": "apps", "creationTimestamp": None}
    v1 = next(v for v in apps["versions"] if v["version"] == "v1")
    deployments = next(r for r in v1["resources"] if r["resource"] == "deployments")
    assert deployments["responseKind"] == {"group": "", "version": "", "kind": "Deployment"}
    assert deployments["scope"] == "Namespaced" and deployments["singularResource"] == "deployment"
    assert deployments["subresources"] == [
        {
            "subresource": "scale",
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": ["get", "patch", "update"],
        },
        {
            "subresource": "status",
            "responseKind": {"group": "", "version": "", "kind": "Deployment"},
            "verbs": ["get", "patch", "update"],
        },
    ]
    assert discoverydocs.aggregated_media_type("v2") == (
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    )
