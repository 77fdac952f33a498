"""The resource.k8s.io API group: DeviceClasses, DeviceTaintRules, ResourceClaims,
ResourceClaimTemplates and ResourceSlices."""

from __future__ import annotations

from kubeloop.apiserver.groups.declaration import BuiltinKind, plain
from kubeloop.apiserver.groups.resource import columns, defaults
from kubeloop.apiserver.printing.cells import name_and_age

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        plain("resource.k8s.io", "deviceclasses", "DeviceClass", False),
        columns=name_and_age,
    ),
    BuiltinKind(
        plain("resource.k8s.io", "devicetaintrules", "DeviceTaintRule", False, subresources=("status",)),
        columns=columns.devicetaintrule_columns,
    ),
    BuiltinKind(
        plain(
            "resource.k8s.io",
            "resourceclaims",
            "ResourceClaim",
            True,
            subresources=("status",),
            returns_deleted_object=True,
        ),
        defaults=defaults.resource_claim,
        columns=columns.resourceclaim_columns,
    ),
    BuiltinKind(
        plain("resource.k8s.io", "resourceclaimtemplates", "ResourceClaimTemplate", True),
        defaults=defaults.resource_claim_template,
        columns=name_and_age,
    ),
    BuiltinKind(
        plain("resource.k8s.io", "resourceslices", "ResourceSlice", False),
        columns=columns.resourceslice_columns,
    ),
)
