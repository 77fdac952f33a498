"""Discovery documents: /version, /api, /apis, /apis/G and the APIResourceLists of each
group-version, built from the resource catalog."""

from __future__ import annotations

import base64
import hashlib
import platform
from typing import Any

from kubeloop.apiserver.resources import ResourceCatalog, ResourceType

_SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "scale": ["get", "patch", "update"],
    "finalize": ["update"],
}


def version_info(release: str) -> dict[str, str]:
    major, minor = release.split(".")[:2]
    return {
        "major": major,
        "minor": minor,
        "gitVersion": f"v{release}-kubeloop",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": f"python{platform.python_version()}",
        "compiler": "cpython",
        "platform": f"{platform.system().lower()}/{platform.machine()}",
    }


def core_api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(catalog: ResourceCatalog, group: str) -> dict[str, Any] | None:
    versions = catalog.group_versions().get(group)
    if not versions or not group:
        return None
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(catalog: ResourceCatalog) -> dict[str, Any]:
    groups = [g for name in catalog.group_versions() if (g := _group(catalog, name)) is not None]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(catalog: ResourceCatalog, group: str) -> dict[str, Any] | None:
    found = _group(catalog, group)
    if found is None:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **found}


def _storage_version_hash(resource: ResourceType) -> str:
    digest = hashlib.sha256(f"{resource.group}/{resource.version}/{resource.kind}".encode()).digest()

    return base64.b64encode(digest[:8]).decode()


def api_resource_list(catalog: ResourceCatalog, group: str, version: str) -> dict[str, Any] | None:
    resources = catalog.in_group_version(group, version)
    if not resources:
        return None
    entries: list[dict[str, Any]] = []
    for resource in sorted(resources, key=lambda r: r.plural):
        entry: dict[str, Any] = {
            "name": resource.plural,
            "singularName": resource.singular,
            "namespaced": resource.namespaced,
            "kind": resource.kind,
            "verbs": list(resource.verbs),
            "storageVersionHash": _storage_version_hash(resource),
        }
        if resource.short_names:
            entry["shortNames"] = list(resource.short_names)
        if resource.categories:
            entry["categories"] = list(resource.categories)
        entries.append(entry)
        for sub in resource.subresources:
            sub_entry: dict[str, Any] = {
                "name": f"{resource.plural}/{sub}",
                "singularName": "",
                "namespaced": resource.namespaced,
                "kind": resource.kind,
                "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"]),
            }
            if sub == "scale":
                sub_entry.update(kind="Scale", group="autoscaling", version="v1")
            entries.append(sub_entry)
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    }
