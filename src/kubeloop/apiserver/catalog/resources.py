"""What a served resource is (``ResourceType``) and the catalog of those served.

Handlers, discovery, OpenAPI, tables and storage read everything about a resource from its
``ResourceType``; the built-in ones are declared by their API groups (``apiserver.groups``), the
custom ones made from their CustomResourceDefinitions (``apiextensions``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

ALL_VERBS: tuple[str, ...] = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class PrinterColumn:
    """A column of ``kubectl get`` declared by a CustomResourceDefinition (additionalPrinterColumns)."""

    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0
    format: str = ""


@dataclass(frozen=True)
class ResourceType:
    """One REST resource (a group/version/plural) and everything the server needs to serve it."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[str, ...] = ()
    #: Extra field selectors beyond metadata.name/metadata.namespace: selector name → dotted path.
    field_selectors: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    #: Whether changes to metadata.annotations bump metadata.generation (upstream: Deployment-like kinds).
    annotations_bump_generation: bool = False
    #: Resource whose storage this one shares ((group, plural)); objects are converted on the way.
    storage_of: tuple[str, str] | None = None
    #: The version objects are stored in when it is not this one (autoscaling/v1
    #: HorizontalPodAutoscalers are stored as v2); "" for this resource's own version.
    stored_version: str = ""
    #: Whether the kind has metadata.generation (workloads do; ConfigMap, Secret, ... do not).
    tracks_generation: bool = False
    #: DELETE answers with the deleted object (pods, custom resources) rather than a Success Status.
    returns_deleted_object: bool = False
    #: Name syntax: "subdomain" (RFC 1123 subdomain), "label" (RFC 1123 label: Namespace,
    #: StatefulSet), "dns1035" (RFC 1035 label, starts with a letter: Service) or "path" (a
    #: path segment: RBAC objects).
    name_rule: str = "subdomain"
    #: Table columns a CustomResourceDefinition declares (None: the kind's built-in printer).
    printer_columns: tuple[PrinterColumn, ...] | None = None
    #: The CustomResourceDefinition serving this resource ("" for built-in resources).
    definition: str = ""
    #: A review: a create is answered from the request (who asks, what they may do) and nothing
    #: is stored (TokenReview, SubjectAccessReview, SelfSubjectReview...).
    review: bool = False
    #: Answered from the server's own state on every read, never stored (ComponentStatus).
    synthesized: bool = False

    # The names below are asked for several times by every request: made once per resource
    # (a frozen dataclass's cached_property keeps its value beside the fields, outside them).

    @functools.cached_property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @functools.cached_property
    def api_version(self) -> str:
        return self.group_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def storage_group_resource(self) -> tuple[str, str]:
        return self.storage_of if self.storage_of is not None else (self.group, self.plural)

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @functools.cached_property
    def _key_base(self) -> str:
        group, plural = self.storage_group_resource
        return f"/registry/{group}/{plural}/" if group else f"/registry/{plural}/"

    def key_prefix(self, namespace: str | None = None) -> str:
        """Storage key prefix in the style of kube-apiserver: /registry/[group/]plural/[ns/]."""
        if self.namespaced and namespace:
            return f"{self._key_base}{namespace}/"
        return self._key_base

    def key(self, namespace: str | None, name: str) -> str:
        return f"{self.key_prefix(namespace if self.namespaced else None)}{name}"


class ResourceCatalog:
    """Looks resource types up by group/version/plural and by kind; kinds come and go at run time
    (CustomResourceDefinitions), and ``generation`` counts the changes."""

    def __init__(self, resources: Iterable[ResourceType]) -> None:
        self._by_gvr: dict[tuple[str, str, str], ResourceType] = {}
        self._by_gvk: dict[tuple[str, str, str], ResourceType] = {}
        #: Bumped by every add and remove: what caches of the served API key on.
        self.generation = 0
        for resource in resources:
            self.add(resource)

    def add(self, resource: ResourceType) -> None:
        """Serve ``resource``, replacing what was served at its group/version/plural."""
        old = self._by_gvr.get((resource.group, resource.version, resource.plural))
        if old is not None and old.kind != resource.kind:
            self._by_gvk.pop((old.group, old.version, old.kind), None)
        self._by_gvr[(resource.group, resource.version, resource.plural)] = resource
        self._by_gvk[(resource.group, resource.version, resource.kind)] = resource
        self.generation += 1

    def remove(self, resource: ResourceType) -> None:
        self._by_gvr.pop((resource.group, resource.version, resource.plural), None)
        if self._by_gvk.get((resource.group, resource.version, resource.kind)) is resource:
            del self._by_gvk[(resource.group, resource.version, resource.kind)]
        self.generation += 1

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_gvr.get((group, version, plural))

    def by_kind(self, group: str, version: str, kind: str) -> ResourceType | None:
        return self._by_gvk.get((group, version, kind))

    def all(self) -> list[ResourceType]:
        return list(self._by_gvr.values())

    def group_versions(self) -> dict[str, list[str]]:
        """Group name → its served versions (the core group is the empty string)."""
        result: dict[str, list[str]] = {}
        for resource in list(self._by_gvr.values()):
            versions = result.setdefault(resource.group, [])
            if resource.version not in versions:
                versions.append(resource.version)
        return result

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [r for r in list(self._by_gvr.values()) if r.group == group and r.version == version]
