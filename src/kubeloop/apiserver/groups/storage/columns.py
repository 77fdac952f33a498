"""storage.k8s.io kinds' columns: StorageClasses, CSI drivers, nodes and capacities,
VolumeAttachments, VolumeAttributesClasses.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping

from kubeloop.apiserver.printing.cells import (
    OBJECT_META,
    Cell,
    CellFn,
    Column,
    Obj,
    age_column,
    api_doc,
    count_column,
    field_column,
    list_at,
    name_column,
    storage_class_name,
    text_at,
    value_at,
)


def storageclass_columns() -> list[Column]:
    kind = "io.k8s.api.storage.v1.StorageClass"
    return [
        Column(
            "Name",
            "string",
            storage_class_name,
            api_doc(OBJECT_META, "name"),
            format="name",
        ),
        field_column("Provisioner", kind, "provisioner"),
        field_column("ReclaimPolicy", kind, "reclaimPolicy"),
        field_column("VolumeBindingMode", kind, "volumeBindingMode"),
        Column(
            "AllowVolumeExpansion",
            "string",
            lambda o, n: str(bool(value_at(o, "allowVolumeExpansion", False))).lower(),
            api_doc(kind, "allowVolumeExpansion"),
        ),
        age_column(),
    ]


_STORAGE = "io.k8s.api.storage.v1."


def csidriver_columns() -> list[Column]:
    spec = _STORAGE + "CSIDriverSpec"

    def flag(field: str, default: bool) -> CellFn:
        return lambda o, n: bool(value_at(o, f"spec.{field}", default))

    def audiences(obj: Obj, now: datetime.datetime) -> Cell:
        requests = value_at(obj, "spec.tokenRequests")
        if not isinstance(requests, list):
            return "<unset>"
        return ",".join(str(r.get("audience", "")) for r in requests if isinstance(r, Mapping))

    return [
        name_column(),
        Column("AttachRequired", "boolean", flag("attachRequired", True), api_doc(spec, "attachRequired")),
        Column("PodInfoOnMount", "boolean", flag("podInfoOnMount", False), api_doc(spec, "podInfoOnMount")),
        Column(
            "StorageCapacity", "boolean", flag("storageCapacity", False), api_doc(spec, "storageCapacity")
        ),
        Column("TokenRequests", "string", audiences, api_doc(spec, "tokenRequests")),
        Column(
            "RequiresRepublish",
            "boolean",
            flag("requiresRepublish", False),
            api_doc(spec, "requiresRepublish"),
        ),
        Column(
            "Modes",
            "string",
            lambda o, n: ",".join(str(m) for m in list_at(o, "spec.volumeLifecycleModes")) or "<none>",
            api_doc(spec, "volumeLifecycleModes"),
        ),
        age_column(),
    ]


def csinode_columns() -> list[Column]:
    return [
        name_column(),
        count_column(
            "Drivers", "spec.drivers", "Drivers indicates the number of CSI drivers registered on the node"
        ),
        age_column(),
    ]


def csistoragecapacity_columns() -> list[Column]:
    kind = _STORAGE + "CSIStorageCapacity"
    return [
        name_column(),
        field_column("StorageClassName", kind, "storageClassName"),
        field_column("Capacity", kind, "capacity", default="<unset>"),
    ]


def volumeattachment_columns() -> list[Column]:
    spec = _STORAGE + "VolumeAttachmentSpec"
    return [
        name_column(),
        Column(
            "Attacher",
            "string",
            lambda o, n: text_at(o, "spec.attacher"),
            api_doc(spec, "attacher"),
            format="name",
        ),
        field_column("PV", _STORAGE + "VolumeAttachmentSource", "spec.source.persistentVolumeName"),
        field_column("Node", spec, "spec.nodeName"),
        Column(
            "Attached",
            "boolean",
            lambda o, n: bool(value_at(o, "status.attached", False)),
            api_doc(_STORAGE + "VolumeAttachmentStatus", "attached"),
        ),
        age_column(),
    ]


def volumeattributesclass_columns() -> list[Column]:
    return [
        name_column(),
        field_column("DriverName", _STORAGE + "VolumeAttributesClass", "driverName"),
        age_column(),
    ]
