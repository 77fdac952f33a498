"""Kinds to resources, learnt from the server's discovery documents, lazily and per group-version.

A kind's URL needs its plural resource name and scope, which only discovery tells. The mapper
reads ``/api/v1`` or ``/apis/<group>/<version>`` the first time a kind of that group-version is
used and reads it again when a kind is not in it (a CRD installed after the first read), as
controller-runtime's lazy dynamic RESTMapper does. Every group's resources at once (the garbage
collector's and the namespace controller's question) come from aggregated discovery where the
server serves it: two requests, ``/api`` and ``/apis``, as client-go makes them. A kind it still does not serve is
``NoKindMatch``, with the served kind of that group-version it was probably meant to be
(``Cronjob`` → "did you mean CronJob?").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeloop.api.gvk import GroupVersionKind, GroupVersionResource

#: Fetches a discovery document by path (``/api/v1``); raises the client's NotFound when absent.
Fetch = Callable[[str], Awaitable[Mapping[str, Any]]]

#: What a client asks ``/api`` and ``/apis`` for to get every group's resources in one answer
#: (client-go's ``AcceptV2``), the unaggregated documents from a server without it.
AGGREGATED_ACCEPT = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"


class NoKindMatch(LookupError):
    """The server serves no resource of this kind (its group-version, or the kind, is unknown);
    ``suggestion`` is a served kind it was probably meant to be (``CronJob`` for ``Cronjob``)."""

    def __init__(self, gvk: GroupVersionKind, suggestion: str = "") -> None:
        hint = f" (did you mean {suggestion}?)" if suggestion else ""
        super().__init__(f'no matches for kind "{gvk.kind}" in version "{gvk.api_version}"{hint}')
        self.gvk = gvk
        self.suggestion = suggestion

    def __reduce__(self) -> tuple[type[NoKindMatch], tuple[GroupVersionKind, str]]:
        return (NoKindMatch, (self.gvk, self.suggestion))  # copies and pickles rebuild it whole


def closest_kind(kind: str, served: Iterable[str]) -> str:
    """The served kind ``kind`` was most likely meant to be: the same name in another case, else
    one a typo away (difflib's ratio ≥ 0.8); "" when none is close."""
    names = list(served)
    for name in names:
        if name.lower() == kind.lower():
            return name
    import difflib  # only for a kind not served: ~130 KiB every client would carry otherwise

    close = difflib.get_close_matches(kind, names, n=1, cutoff=0.8)
    return close[0] if close else ""


@dataclass(frozen=True)
class ResourceMapping:
    """Where a kind lives: its resource (plural), scope and verbs."""

    gvk: GroupVersionKind
    resource: str
    namespaced: bool
    verbs: frozenset[str]
    subresources: frozenset[str]

    @property
    def gvr(self) -> GroupVersionResource:
        """The resource's group, version and plural."""
        return GroupVersionResource(self.gvk.group, self.gvk.version, self.resource)

    def collection_path(self, namespace: str | None) -> str:
        """``/apis/apps/v1/namespaces/ns/deployments`` (or cluster-wide without ``namespace``)."""
        root = f"/apis/{self.gvk.group}/{self.gvk.version}" if self.gvk.group else f"/api/{self.gvk.version}"
        if self.namespaced and namespace:
            return f"{root}/namespaces/{namespace}/{self.resource}"
        return f"{root}/{self.resource}"


class RESTMapper:
    """Kinds to resources, from the server's discovery (client-go's ``DeferredDiscoveryRESTMapper``):
    a group-version is read on first use and read again once when a kind is not in it (a CRD
    installed since)."""

    def __init__(self, fetch: Fetch, not_found: type[Exception], *, fetch_aggregated: Fetch | None = None) -> None:
        self._fetch = fetch
        #: Fetches ``/api`` and ``/apis`` asking for aggregated discovery (``AGGREGATED_ACCEPT``).
        self._fetch_aggregated = fetch_aggregated
        self._not_found = not_found
        self._by_group_version: dict[str, dict[str, ResourceMapping]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def mapping(self, gvk: GroupVersionKind) -> ResourceMapping:
        """The resource serving ``gvk``; refreshes its group-version once when the kind is unknown."""
        known = self._by_group_version.get(gvk.api_version)
        if known is not None and gvk.kind in known:
            return known[gvk.kind]
        kinds = await self._load(gvk, stale=known)
        found = kinds.get(gvk.kind)
        if found is None:
            raise NoKindMatch(gvk, closest_kind(gvk.kind, kinds))
        return found

    async def preferred_resources(self) -> list[ResourceMapping]:
        """Every resource of the server's preferred version of each group (client-go's
        ``ServerPreferredResources``), read afresh and remembered for later lookups: from
        ``/api`` and ``/apis`` alone when the server answers them in aggregated form, else from
        them and then each preferred group-version's document."""
        fetch = self._fetch_aggregated or self._fetch
        core = await fetch("/api")
        groups = await fetch("/apis")
        if core.get("kind") == groups.get("kind") == "APIGroupDiscoveryList":
            return self._aggregated(core, groups)
        api_versions = [f"{version}" for version in core.get("versions") or ()][:1]
        for group in groups.get("groups") or ():
            preferred = (group.get("preferredVersion") or {}).get("groupVersion")
            if not preferred:
                versions = group.get("versions") or ()
                preferred = (versions[0] or {}).get("groupVersion") if versions else None
            if preferred:
                api_versions.append(str(preferred))
        found: list[ResourceMapping] = []
        for api_version in api_versions:
            path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
            try:
                document = await self._fetch(path)
            except self._not_found:
                continue  # a group that went away between the two reads
            group, _, version = api_version.rpartition("/")
            kinds = _mappings(group, version, document)
            self._by_group_version[api_version] = kinds
            found.extend(kinds.values())
        return found

    def _aggregated(self, *documents: Mapping[str, Any]) -> list[ResourceMapping]:
        """The preferred version's resources of each group of APIGroupDiscoveryLists; every
        version's are remembered. A version marked stale is passed over, as client-go does."""
        found: list[ResourceMapping] = []
        for document in documents:
            for item in document.get("items") or ():
                group = str((item.get("metadata") or {}).get("name") or "")
                fresh = [v for v in item.get("versions") or () if v.get("freshness") != "Stale"]
                for index, entry in enumerate(fresh):
                    version = str(entry.get("version") or "")
                    kinds = _aggregated_mappings(group, version, entry.get("resources") or ())
                    self._by_group_version[f"{group}/{version}" if group else version] = kinds
                    if index == 0:
                        found.extend(kinds.values())
        return found

    def forget(self, api_version: str | None = None) -> None:
        """Drop what was learnt (of one group-version, or all), e.g. after a CRD was deleted."""
        if api_version is None:
            self._by_group_version.clear()
        else:
            self._by_group_version.pop(api_version, None)

    async def _load(
        self, gvk: GroupVersionKind, *, stale: dict[str, ResourceMapping] | None
    ) -> dict[str, ResourceMapping]:
        api_version = gvk.api_version
        lock = self._locks.setdefault(api_version, asyncio.Lock())
        async with lock:
            current = self._by_group_version.get(api_version)
            if current is not None and current is not stale:
                return current  # another task refreshed it while this one waited
            path = f"/apis/{api_version}" if gvk.group else f"/api/{api_version}"
            try:
                document = await self._fetch(path)
            except self._not_found:
                raise NoKindMatch(gvk) from None
            kinds = _mappings(gvk.group, gvk.version, document)
            self._by_group_version[api_version] = kinds
            return kinds


def _mappings(group: str, version: str, document: Mapping[str, Any]) -> dict[str, ResourceMapping]:
    resources = [r for r in document.get("resources") or () if isinstance(r, Mapping)]
    subresources: dict[str, set[str]] = {}
    for entry in resources:
        name = str(entry.get("name", ""))
        if "/" in name:
            parent, _, sub = name.partition("/")
            subresources.setdefault(parent, set()).add(sub)
    kinds: dict[str, ResourceMapping] = {}
    for entry in resources:
        name = str(entry.get("name", ""))
        kind = str(entry.get("kind", ""))
        if "/" in name or not kind or kind in kinds:
            continue
        kinds[kind] = ResourceMapping(
            gvk=GroupVersionKind(group, version, kind),
            resource=name,
            namespaced=bool(entry.get("namespaced")),
            verbs=frozenset(str(v) for v in entry.get("verbs") or ()),
            subresources=frozenset(subresources.get(name, ())),
        )
    return kinds


def _aggregated_mappings(group: str, version: str, resources: Iterable[Mapping[str, Any]]) -> dict[str, ResourceMapping]:
    """One version's resources of an APIGroupDiscovery as mappings; a resource without a kind
    (only the parent of its subresources) maps nothing, as client-go leaves it out."""
    kinds: dict[str, ResourceMapping] = {}
    for entry in resources:
        kind = str((entry.get("responseKind") or {}).get("kind") or "")
        if not kind or kind in kinds:
            continue
        kinds[kind] = ResourceMapping(
            gvk=GroupVersionKind(group, version, kind),
            resource=str(entry.get("resource") or ""),
            namespaced=entry.get("scope") == "Namespaced",
            verbs=frozenset(str(v) for v in entry.get("verbs") or ()),
            subresources=frozenset(str(sub.get("subresource")) for sub in entry.get("subresources") or ()),
        )
    return kinds
