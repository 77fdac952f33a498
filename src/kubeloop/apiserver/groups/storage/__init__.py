"""The storage.k8s.io API group: CSIDrivers, CSINodes, CSIStorageCapacities, StorageClasses,
VolumeAttachments and VolumeAttributesClasses."""

from __future__ import annotations

from kubeloop.apiserver.groups.declaration import BuiltinKind, plain
from kubeloop.apiserver.groups.storage import columns, defaults

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        plain("storage.k8s.io", "csidrivers", "CSIDriver", False),
        defaults=defaults.csi_driver,
        columns=columns.csidriver_columns,
    ),
    BuiltinKind(
        plain("storage.k8s.io", "csinodes", "CSINode", False),
        columns=columns.csinode_columns,
    ),
    BuiltinKind(
        plain("storage.k8s.io", "csistoragecapacities", "CSIStorageCapacity", True),
        columns=columns.csistoragecapacity_columns,
    ),
    BuiltinKind(
        plain("storage.k8s.io", "storageclasses", "StorageClass", False, short_names=("sc",)),
        defaults=defaults.storage_class,
        columns=columns.storageclass_columns,
    ),
    BuiltinKind(
        plain("storage.k8s.io", "volumeattachments", "VolumeAttachment", False, subresources=("status",)),
        columns=columns.volumeattachment_columns,
    ),
    BuiltinKind(
        plain("storage.k8s.io", "volumeattributesclasses", "VolumeAttributesClass", False, short_names=("vac",)),
        columns=columns.volumeattributesclass_columns,
    ),
)
