"""The built-in API groups, a package each (upstream's ``pkg/apis/<group>`` and
``pkg/registry/<group>`` side by side).

A group's ``__init__`` declares its kinds (``KINDS``: one :class:`BuiltinKind` per served
resource: what is served, its strategy, defaults, status at create, validation and ``kubectl
get`` columns); beside it, as the group needs them, ``defaults`` (``SetDefaults_<Kind>``),
``validation`` (``pkg/apis/<group>/validation``), ``columns`` (upstream's printers) and
``strategies`` (kinds whose writes or deletes differ from the generic store's). Groups stand
alone, except that apps and batch use core's pod templates and events.k8s.io is a view of core
Events. The engines (``catalog``, ``registry.strategies``, ``printing.tables``) know no group;
the server hands them these declarations.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.groups import (
    admissionregistration,
    apiextensions,
    apiregistration,
    apps,
    authentication,
    authorization,
    autoscaling,
    batch,
    certificates,
    coordination,
    core,
    discovery,
    events,
    flowcontrol,
    networking,
    node,
    policy,
    rbac,
    resource,
    scheduling,
    storage,
    storagemigration,
)
from kubeloop.apiserver.groups.declaration import BuiltinKind
from kubeloop.apiserver.registry.serviceips import ServiceAllocator
from kubeloop.apiserver.registry.strategies import BuiltinStrategy, KindRules

__all__ = ["BUILTIN_KINDS", "BuiltinKind", "builtin_kind", "builtin_resources", "builtin_strategy"]

#: Every built-in kind, group by group in the order discovery lists the groups.
BUILTIN_KINDS: tuple[BuiltinKind, ...] = (
    *core.KINDS,
    *apps.KINDS,
    *batch.KINDS,
    *coordination.KINDS,
    *events.KINDS,
    *apiextensions.KINDS,
    *authentication.KINDS,
    *authorization.KINDS,
    *rbac.KINDS,
    *admissionregistration.KINDS,
    *apiregistration.KINDS,
    *autoscaling.KINDS,
    *certificates.KINDS,
    *discovery.KINDS,
    *flowcontrol.KINDS,
    *networking.KINDS,
    *node.KINDS,
    *policy.KINDS,
    *resource.KINDS,
    *scheduling.KINDS,
    *storage.KINDS,
    *storagemigration.KINDS,
)

_BY_RESOURCE: Mapping[tuple[str, str, str], BuiltinKind] = MappingProxyType(
    {(k.resource.group, k.resource.version, k.resource.plural): k for k in BUILTIN_KINDS}
)


def builtin_resources() -> tuple[ResourceType, ...]:
    """What the server serves before any CustomResourceDefinition."""
    return tuple(kind.resource for kind in BUILTIN_KINDS)


def builtin_kind(resource: ResourceType) -> BuiltinKind | None:
    """The declaration of a built-in resource (None for one no group declares)."""
    return _BY_RESOURCE.get((resource.group, resource.version, resource.plural))


def builtin_strategy(resource: ResourceType, services: ServiceAllocator | None = None) -> BuiltinStrategy:
    """The strategy of a built-in resource; one no group declares gets the generic store's rules.
    Services take their cluster IPs and node ports from ``services``."""
    kind = builtin_kind(resource)
    if kind is None:
        return BuiltinStrategy(resource, KindRules())
    return kind.make_strategy(resource, services)
