"""What an operator needs the API server to let it do, recorded as it is set up, and the
ClusterRole that grants exactly that (``kubeloop rbac TARGET``; kubebuilder writes it from
``+kubebuilder:rbac`` markers, kubeloop from the setup itself).

The builder records its kinds: ``for_`` — read, update and patch (finalizers and labels), its
``status`` and ``finalizers`` subresources; ``owns`` — read and write (create, update, patch,
delete); ``watches`` — read. An index of the cache reads its kind, an event recorder writes
Events, leader election reads and writes Leases. What the reconcilers do beyond that (create a
kind they do not own, list pods past the cache) the operator says with
``manager.permissions.allow(kind, *verbs)``; a kind the cluster may not serve (another
project's CRD, used only when installed) by its resource, as kubebuilder's markers name it:
``manager.permissions.allow_resource(group, resource, *verbs)``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubeloop import kinds
from kubeloop.api.gvk import GroupVersionKind
from kubeloop.client.interface import KindRef, gvk_of

READ = ("get", "list", "watch")
WRITE = ("create", "update", "patch", "delete")
#: The verbs of the for_ kind: read, and update its metadata (finalizers) and status.
RECONCILED = (*READ, "update", "patch")
EVENTS = (GroupVersionKind("", "v1", "Event"), GroupVersionKind("events.k8s.io", "v1", "Event"))
LEASE = kinds.Lease
#: Verbs in the order kubectl and kubebuilder print them.
_VERB_ORDER = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


@dataclass(frozen=True)
class Resource:
    """A kind's resource as a policy rule names it."""

    group: str
    resource: str
    subresources: frozenset[str] = frozenset()


#: Resolves a kind to its resource (the API client's discovery: ``client.mapping``).
Resolve = Callable[[GroupVersionKind], Awaitable[Resource]]


class Permissions:
    """The verbs an operator needs, per kind and subresource."""

    def __init__(self) -> None:
        self._verbs: dict[tuple[GroupVersionKind, str], set[str]] = {}
        #: Kinds whose status and finalizers subresources are needed (the reconciled kinds).
        self._reconciled: set[GroupVersionKind] = set()
        #: Verbs on resources named as they are, without discovery: (group, resource).
        self._resources: dict[tuple[str, str], set[str]] = {}

    def allow(self, kind: KindRef, *verbs: str, subresource: str = "") -> None:
        """Need ``verbs`` on ``kind`` (on its ``subresource``, e.g. "status", if given)."""
        self._verbs.setdefault((gvk_of(kind), subresource), set()).update(verbs)

    def allow_resource(self, group: str, resource: str, *verbs: str) -> None:
        """Need ``verbs`` on ``resource`` (a plural, "sandboxes") of ``group``, served or not:
        what an optional integration uses only when the cluster serves it."""
        self._resources.setdefault((group, resource), set()).update(verbs)

    def reconciles(self, kind: KindRef) -> None:
        """``kind`` is a controller's for_ kind: read, update, and write its status and finalizers."""
        self.allow(kind, *RECONCILED)
        self._reconciled.add(gvk_of(kind))

    def __contains__(self, needed: tuple[KindRef, str]) -> bool:
        kind, verb = needed
        return verb in self._verbs.get((gvk_of(kind), ""), ())

    async def rules(self, resolve: Resolve) -> list[dict[str, Any]]:
        """Policy rules: one per group and verb set, resources sorted, as kubebuilder writes them."""
        by_resource: dict[tuple[str, str], set[str]] = {
            key: set(verbs) for key, verbs in self._resources.items()
        }
        for (gvk, subresource), verbs in self._verbs.items():
            found = await resolve(gvk)
            name = f"{found.resource}/{subresource}" if subresource else found.resource
            by_resource.setdefault((found.group, name), set()).update(verbs)
            if gvk in self._reconciled:
                if "status" in found.subresources:
                    by_resource.setdefault((found.group, f"{found.resource}/status"), set()).update(
                        ("get", "update", "patch")
                    )
                by_resource.setdefault((found.group, f"{found.resource}/finalizers"), set()).add("update")
        grouped: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        for (group, resource), verbs in by_resource.items():
            grouped.setdefault((group, _ordered(verbs)), []).append(resource)
        return [
            {"apiGroups": [group], "resources": sorted(resources), "verbs": list(verbs)}
            for (group, verbs), resources in sorted(grouped.items())
        ]

    async def cluster_role(self, name: str, resolve: Resolve) -> dict[str, Any]:
        """A ClusterRole ``name`` granting these permissions (kinds resolved to resources by
        ``resolve``), as ``kubeloop rbac`` writes it."""
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": await self.rules(resolve),
        }


def _ordered(verbs: Iterable[str]) -> tuple[str, ...]:
    known = [verb for verb in _VERB_ORDER if verb in verbs]
    return (*known, *sorted(set(verbs) - set(_VERB_ORDER)))
