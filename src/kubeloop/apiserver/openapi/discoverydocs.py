"""Discovery documents as kube-apiserver serves them, built from a :class:`ResourceCatalog`.

``/version`` (version.Info), ``/api`` (APIVersions), ``/apis`` (APIGroupList), ``/apis/G`` (APIGroup)
and ``/api/v1`` / ``/apis/G/V`` (APIResourceList); and aggregated discovery (APIGroupDiscoveryList,
``apidiscovery.k8s.io`` v2 and v2beta1): ``/api`` and ``/apis`` answer with every group, version and
resource in one document when the client's ``Accept`` asks for it, as client-go does (kubectl 1.27
asks for v2beta1, 1.30 and later for v2 first), so a cold client makes two requests, not one per
group-version.

Everything here is a pure function of its arguments.
"""

from __future__ import annotations

import base64
import hashlib
import platform
import re
from typing import Any

from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType

#: Verbs of the subresources the server serves (upstream: status/scale are get+patch+update,
#: namespaces/finalize is update only).
_SUBRESOURCE_VERBS: dict[str, tuple[str, ...]] = {
    "status": ("get", "patch", "update"),
    "scale": ("get", "patch", "update"),
    "finalize": ("update",),
    "token": ("create",),
    "binding": ("create",),
    "eviction": ("create",),
    "log": ("get",),
    "exec": ("create", "get"),
    "attach": ("create", "get"),
    "portforward": ("create", "get"),
    "approval": ("get", "patch", "update"),
}
#: Subresources that take and return a kind of their own (group, version, kind).
_SUBRESOURCE_KINDS: dict[str, tuple[str, str, str]] = {
    "scale": ("autoscaling", "v1", "Scale"),
    "token": ("authentication.k8s.io", "v1", "TokenRequest"),
    "eviction": ("policy", "v1", "Eviction"),
    "binding": ("", "", "Binding"),
    "exec": ("", "v1", "PodExecOptions"),
    "attach": ("", "v1", "PodAttachOptions"),
    "portforward": ("", "v1", "PodPortForwardOptions"),
}

#: Order of the built-in groups in /apis, as kube-apiserver's APIService priorities sort them.
#: Other groups (custom resources) follow, alphabetically.
_GROUP_PRIORITY: dict[str, int] = {
    "apiregistration.k8s.io": 18000,
    "apps": 17800,
    "events.k8s.io": 17750,
    "authentication.k8s.io": 17700,
    "authorization.k8s.io": 17600,
    "autoscaling": 17500,
    "batch": 17400,
    "certificates.k8s.io": 17300,
    "networking.k8s.io": 17200,
    "policy": 17100,
    "rbac.authorization.k8s.io": 17000,
    "storage.k8s.io": 16800,
    "admissionregistration.k8s.io": 16700,
    "scheduling.k8s.io": 16600,
    "coordination.k8s.io": 16500,
    "apiextensions.k8s.io": 16400,
    "node.k8s.io": 16300,
    "discovery.k8s.io": 16200,
    "flowcontrol.apiserver.k8s.io": 16100,
    "resource.k8s.io": 15900,
    "storagemigration.k8s.io": 1800,
    "internal.apiserver.k8s.io": 30,
}

_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_sort_key(version: str) -> tuple[int, int, int, str]:
    """Sort key giving kube-apiserver's version priority (apimachinery CompareKubeAwareVersionStrings):
    GA before beta before alpha, higher numbers first, non-kube-like versions last, alphabetically."""
    match = _KUBE_VERSION.match(version)
    if match is None:
        return (3, 0, 0, version)
    major = int(match[1])
    stage = {None: 0, "beta": 1, "alpha": 2}[match[2]]
    minor = int(match[3]) if match[3] else 0
    return (stage, -major, -minor, "")


def _platform() -> str:
    system = platform.system().lower() or "linux"
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return f"{system}/{arch}"


def version_info(release: str) -> dict[str, str]:
    """``/version`` (k8s.io/apimachinery version.Info) for a Kubernetes release like ``"1.33.0"``."""
    parts = release.split(".")
    major = parts[0] if parts and parts[0] else "1"
    minor = parts[1] if len(parts) > 1 else "0"
    patch = parts[2] if len(parts) > 2 else "0"
    return {
        "major": major,
        "minor": minor,
        "emulationMajor": major,
        "emulationMinor": minor,
        "minCompatibilityMajor": major,
        "minCompatibilityMinor": str(max(int(minor) - 1, 0)) if minor.isdigit() else minor,
        "gitVersion": f"v{major}.{minor}.{patch}-kubeloop",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": f"python{platform.python_version()}",
        "compiler": platform.python_implementation().lower(),
        "platform": _platform(),
    }


def core_api_versions(server_address: str) -> dict[str, Any]:
    """``/api``: APIVersions. Upstream serves it without ``apiVersion``."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group_entry(catalog: ResourceCatalog, group: str) -> dict[str, Any] | None:
    if not group:
        return None
    versions = catalog.group_versions().get(group)
    if not versions:
        return None
    entries = [
        {"groupVersion": f"{group}/{version}", "version": version}
        for version in sorted(versions, key=version_sort_key)
    ]
    return {"name": group, "versions": entries, "preferredVersion": dict(entries[0])}


def _group_order(group: str) -> tuple[int, str]:
    return (-_GROUP_PRIORITY.get(group, 1000), group)


def api_group_list(catalog: ResourceCatalog) -> dict[str, Any]:
    """``/apis``: APIGroupList of every named group (the core group is served at ``/api``)."""
    groups = [
        entry
        for name in sorted(catalog.group_versions(), key=_group_order)
        if (entry := _group_entry(catalog, name)) is not None
    ]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(catalog: ResourceCatalog, group: str) -> dict[str, Any] | None:
    """``/apis/G``: APIGroup, or None when the group is not served."""
    entry = _group_entry(catalog, group)
    if entry is None:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **entry}


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """Upstream's storageVersionHash: base64 of the first 8 bytes of sha256("group/version/kind")."""
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def _resource_entry(resource: ResourceType) -> dict[str, Any]:
    storage_group, _plural = resource.storage_group_resource
    storage_kind = resource.kind
    entry: dict[str, Any] = {
        "name": resource.plural,
        "singularName": resource.singular,
        "namespaced": resource.namespaced,
        "kind": resource.kind,
        "verbs": list(resource.verbs),
    }
    _add_names(entry, resource)
    # Resources sharing storage (events.k8s.io events stored as core events) report the hash of the
    # storage version, like upstream.
    if "watch" not in resource.verbs:
        return entry  # not stored (reviews, bindings, component statuses): no storage version
    storage_version = resource.stored_version or (
        resource.version if storage_group == resource.group else "v1"
    )
    entry["storageVersionHash"] = storage_version_hash(storage_group, storage_version, storage_kind)
    return entry


def _add_names(entry: dict[str, Any], resource: ResourceType) -> None:
    """The short names and categories a discovery entry carries when the resource has any."""
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)


def _subresource_entry(resource: ResourceType, subresource: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": f"{resource.plural}/{subresource}",
        "singularName": "",
        "namespaced": resource.namespaced,
        "kind": resource.kind,
        "verbs": list(_SUBRESOURCE_VERBS.get(subresource, ("get",))),
    }
    own = _SUBRESOURCE_KINDS.get(subresource)
    if own is not None:
        group, version, kind = own
        entry["kind"] = kind
        if group:
            entry = {**entry, "group": group, "version": version}
    return entry


def api_resource_list(catalog: ResourceCatalog, group: str, version: str) -> dict[str, Any] | None:
    """``/api/v1`` or ``/apis/G/V``: APIResourceList (resources and their subresources, sorted by
    name like upstream's installer), or None when the group-version is not served."""
    resources = catalog.in_group_version(group, version)
    if not resources:
        return None
    entries: list[dict[str, Any]] = []
    for resource in resources:
        entries.append(_resource_entry(resource))
        entries.extend(_subresource_entry(resource, sub) for sub in resource.subresources)
    entries.sort(key=lambda e: str(e["name"]))
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    }


#: The aggregated discovery versions served (``apidiscovery.k8s.io``); their documents differ only
#: in ``apiVersion``.
AGGREGATED_VERSIONS = ("v2", "v2beta1")


def aggregated_media_type(version: str) -> str:
    """The Content-Type of an aggregated discovery answer: client-go reads the body as
    APIGroupDiscoveryList only when the ``g``, ``v`` and ``as`` parameters say so."""
    return f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"


def aggregated_discovery(catalog: ResourceCatalog, *, core: bool, version: str = "v2") -> dict[str, Any]:
    """``/api`` (``core``: the legacy group, named "") or ``/apis`` (the named groups, in
    kube-apiserver's priority order) as an APIGroupDiscoveryList of ``version``. Each group lists
    its versions in preference order, each version its resources sorted by name with their
    subresources inside (upstream's ``ConvertGroupVersionIntoToDiscovery``)."""
    served = catalog.group_versions()
    groups = [""] if core else sorted((name for name in served if name), key=_group_order)
    items = [_group_discovery(catalog, group, served[group]) for group in groups if served.get(group)]
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{version}",
        "metadata": {},
        "items": items,
    }


def _group_discovery(catalog: ResourceCatalog, group: str, versions: list[str]) -> dict[str, Any]:
    metadata: dict[str, Any] = (
        {"name": group, "creationTimestamp": None} if group else {"creationTimestamp": None}
    )
    return {
        "metadata": metadata,
        "versions": [
            {
                "version": version,
                "resources": [
                    _resource_discovery(resource)
                    for resource in sorted(catalog.in_group_version(group, version), key=lambda r: r.plural)
                ],
                "freshness": "Current",
            }
            for version in sorted(versions, key=version_sort_key)
        ],
    }


def _resource_discovery(resource: ResourceType) -> dict[str, Any]:
    # Built-in resources name their kind alone (the group and version are the list's), as the
    # unaggregated documents do; a CustomResourceDefinition's resources name all three, as
    # apiextensions-apiserver's discovery does.
    group, version = (resource.group, resource.version) if resource.definition else ("", "")
    entry: dict[str, Any] = {
        "resource": resource.plural,
        "responseKind": {"group": group, "version": version, "kind": resource.kind},
        "scope": "Namespaced" if resource.namespaced else "Cluster",
        "singularResource": resource.singular,
        "verbs": list(resource.verbs),
    }
    _add_names(entry, resource)
    if resource.subresources:
        entry["subresources"] = [
            _subresource_discovery(resource, subresource, group, version)
            for subresource in sorted(resource.subresources)
        ]
    return entry


def _subresource_discovery(
    resource: ResourceType, subresource: str, group: str, version: str
) -> dict[str, Any]:
    unaggregated = _subresource_entry(resource, subresource)
    if "group" in unaggregated:  # a kind of another group (autoscaling/v1 Scale, policy/v1 Eviction)
        group, version = unaggregated["group"], unaggregated["version"]
    return {
        "subresource": subresource,
        "responseKind": {"group": group, "version": version, "kind": unaggregated["kind"]},
        "verbs": unaggregated["verbs"],
    }
