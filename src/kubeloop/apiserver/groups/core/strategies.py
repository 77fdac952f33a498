"""Core kinds whose serving differs from the generic store's: Namespaces terminate before they
go, pods are deleted gracefully, Nodes register with a status, Services get addresses,
ReplicationControllers select by a label map."""

from __future__ import annotations

import copy
from typing import Any

from kubeloop import errors
from kubeloop.api.labels import LabelSelector
from kubeloop.api.object import Obj
from kubeloop.apiserver.registry.serviceips import ServiceAllocator, service_claims
from kubeloop.apiserver.registry.strategies import BuiltinStrategy
from kubeloop.apiserver.storage.claims import ClaimTaken

#: Namespaces that exist from the start and may not be deleted.
PROTECTED_NAMESPACES = ("default", "kube-system", "kube-public")


class NamespaceStrategy(BuiltinStrategy):
    """Namespaces: status and spec (its finalizers) change only through /status and /finalize;
    deleting one makes it Terminating until the namespace controller has emptied it."""

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str) -> Obj:
        if subresource == "finalize":
            finalizers = (new.get("spec") or {}).get("finalizers")
            kept = copy.deepcopy(old)
            kept.setdefault("spec", {})["finalizers"] = finalizers or []
            return kept
        if subresource == "":
            new["status"] = old.get("status", {"phase": "Active"})
            new["spec"] = old.get("spec", {})
            return new
        return super().prepare_for_update(new, old, subresource)

    def check_delete(self, name: str) -> None:
        if name in PROTECTED_NAMESPACES:
            raise errors.Forbidden(
                f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                name=name,
                kind="namespaces",
            )

    def begin_deletion(self, obj: Obj) -> None:
        obj.setdefault("status", {})["phase"] = "Terminating"

    def holds_deletion(self, obj: Obj) -> bool:
        return bool((obj.get("spec") or {}).get("finalizers"))


class PodStrategy(BuiltinStrategy):
    """Pods are deleted gracefully, as upstream's pod strategy does: a pod on a node is marked
    (deletionTimestamp in the future, deletionGracePeriodSeconds) and its node removes it once
    its containers have stopped; one on no node, or already ended, goes at once."""

    def deletion_grace_seconds(self, obj: Obj, requested: int | None) -> int | None:
        spec = obj.get("spec") or {}
        if requested is not None:
            period = requested
        else:
            period = int(spec.get("terminationGracePeriodSeconds") or 0)
        if not spec.get("nodeName") or (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            period = 0
        return 1 if period < 0 else period


class NodeStrategy(BuiltinStrategy):
    """Nodes: a create may set status too (a kubelet registers its node with it), as upstream."""

    def prepare_for_create(self, obj: Obj) -> None:
        status = obj.get("status")
        super().prepare_for_create(obj)
        if status is not None:
            obj["status"] = status


class ServiceStrategy(BuiltinStrategy):
    """Services: a cluster IP and node ports allocated on create, kept by updates."""

    allocator: ServiceAllocator | None = None

    def attach_services(self, services: ServiceAllocator | None) -> None:
        self.allocator = services

    def finish(self, obj: Obj, old: Obj | None) -> None:
        super().finish(obj, old)
        if self.allocator is not None:
            self.allocator.allocate(obj, old)

    def claims_requested(self, obj: Obj) -> frozenset[str] | None:
        if self.allocator is None:
            return None
        ip = (obj.get("spec") or {}).get("clusterIP")
        asked = {f"ip/{ip}"} if isinstance(ip, str) and ip not in ("", "None") else set()
        return frozenset(service_claims(obj)) | asked

    def claim_taken(self, obj: Obj, taken: ClaimTaken) -> errors.APIError:
        if self.allocator is None:
            return super().claim_taken(obj, taken)
        return self.allocator.claim_taken(obj, taken)


class ReplicationControllerStrategy(BuiltinStrategy):
    """ReplicationControllers: their selector is a plain label map, not a LabelSelector."""

    def selector_of(self, selector: Any) -> LabelSelector:
        return LabelSelector.from_set(selector)
