"""The storage.k8s.io group's defaults: StorageClasses and CSIDrivers."""

from __future__ import annotations

from kubeloop.api.object import Obj
from kubeloop.apiserver.groups.defaulting import spec_of

__all__ = ["csi_driver", "storage_class"]


def storage_class(obj: Obj) -> None:
    obj.setdefault("reclaimPolicy", "Delete")
    obj.setdefault("volumeBindingMode", "Immediate")


def csi_driver(obj: Obj) -> None:
    spec = spec_of(obj)
    if spec is None:
        return
    spec.setdefault("attachRequired", True)
    spec.setdefault("podInfoOnMount", False)
    spec.setdefault("storageCapacity", False)
    spec.setdefault("fsGroupPolicy", "ReadWriteOnceWithFSType")
    spec.setdefault("volumeLifecycleModes", ["Persistent"])
    spec.setdefault("requiresRepublish", False)
    spec.setdefault("seLinuxMount", False)
