"""What kube-apiserver allocates to a Service: a cluster IP from the service CIDR (with its IP
family fields) and, for NodePort and LoadBalancer Services, a node port per port; kept across
updates that leave them out, immutable once set, and unique among the stored Services.

Uniqueness is the store's to decide (:mod:`kubeloop.apiserver.storage.claims`): every Service
claims its cluster IPs and node ports there, and a write claiming a value another Service holds,
stored or still being written, fails — two creates asking for one address at once cannot both
get it. The allocator picks values no one holds, and says which field a refused value was in.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.storage.claims import ClaimTaken
from kubeloop.apiserver.storage.store import Store
from kubeloop.errors import StatusCause

#: kube-apiserver's default --service-cluster-ip-range.
SERVICE_CIDR = ipaddress.IPv4Network("10.96.0.0/12")
#: The ``kubernetes`` Service's address: the range's first.
KUBERNETES_SERVICE_IP = str(SERVICE_CIDR.network_address + 1)
#: kube-apiserver's default --service-node-port-range.
NODE_PORTS = range(30000, 32768)
SERVICES_PREFIX = "/registry/services/"


def _invalid(field: str, value: Any, detail: str) -> StatusCause:
    return StatusCause("FieldValueInvalid", f'Invalid value: "{value}": {detail}', field)


def _ip_allocated(ip: str) -> StatusCause:
    return _invalid("spec.clusterIPs", f'[]string{{"{ip}"}}', f"failed to allocate IP {ip}: provided IP is already allocated")


def _port_allocated(index: int, port: int) -> StatusCause:
    return _invalid(f"spec.ports[{index}].nodePort", port, "provided port is already allocated")


def service_claims(service: Obj) -> Iterator[str]:
    """What a stored Service holds alone: ``ip/<cluster IP>`` and ``nodeport/<port>``."""
    spec = service.get("spec") or {}
    for ip in spec.get("clusterIPs") or ():
        if ip != "None":
            yield f"ip/{ip}"
    for port in spec.get("ports") or ():
        if isinstance(port, dict) and port.get("nodePort"):
            yield f"nodeport/{int(port['nodePort'])}"


class ServiceAllocator:
    """Hands out cluster IPs and node ports no other Service holds (the store's claims, which
    refuse a write that takes a value held meanwhile). A cursor moves forward through each
    range, so that creates in flight are offered different values."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._next_ip = 2  # .1 is the kubernetes Service's
        self._next_port = 0
        store.add_claims(SERVICES_PREFIX, service_claims)

    def _held_by_another(self, claim: str, key: str) -> bool:
        holder = self.store.claim_holder(claim)
        return holder is not None and holder != key

    def claim_taken(self, service: Obj, taken: ClaimTaken) -> errors.APIError:
        """The 422 for a Service the store refused: another Service took ``taken.claim`` while
        this one was being decided (the field and words upstream's allocators use)."""
        name = str((service.get("metadata") or {}).get("name") or "")
        kind, _, value = taken.claim.partition("/")
        spec = service.get("spec") or {}
        if kind == "ip":
            cause = _ip_allocated(value)
        else:
            index = next(
                (i for i, port in enumerate(spec.get("ports") or ()) if str(port.get("nodePort")) == value), 0
            )
            cause = _port_allocated(index, int(value))
        return errors.invalid("", "Service", name, [cause])

    def allocate(self, service: Obj, old: Obj | None) -> None:
        """Fill a Service's cluster IP, IP family fields and node ports (keeping ``old``'s where
        the new one leaves them out); 422 for a requested value that is taken or out of range."""
        spec = service.get("spec")
        if not isinstance(spec, dict):
            return
        metadata = service.get("metadata") or {}
        name = str(metadata.get("name") or "")
        key = f"{SERVICES_PREFIX}{metadata.get('namespace') or ''}/{name}"
        old_spec = (old or {}).get("spec") or {}
        kind = spec.get("type") or "ClusterIP"
        causes: list[StatusCause] = []
        if kind == "ExternalName":
            for field in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                spec.pop(field, None)
        else:
            self._cluster_ip(spec, old_spec, key, causes)
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
            spec.setdefault("internalTrafficPolicy", "Cluster")
        if kind in ("NodePort", "LoadBalancer"):
            spec.setdefault("externalTrafficPolicy", "Cluster")
            if kind == "LoadBalancer":
                spec.setdefault("allocateLoadBalancerNodePorts", True)
            if kind == "NodePort" or spec.get("allocateLoadBalancerNodePorts"):
                self._node_ports(spec, old_spec, key, causes)
        else:
            for port in spec.get("ports") or ():
                if isinstance(port, dict):
                    port.pop("nodePort", None)
        if causes:
            raise errors.invalid("", "Service", name, causes)

    def _cluster_ip(self, spec: Obj, old_spec: Obj, key: str, causes: list[StatusCause]) -> None:
        old_ip = old_spec.get("clusterIP")
        wanted = spec.get("clusterIP") or ((spec.get("clusterIPs") or [None])[0])
        if not wanted and old_ip:
            wanted = old_ip
        if old_ip and wanted != old_ip:
            causes.append(_invalid("spec.clusterIPs[0]", wanted, "may not change once set"))
            return
        if wanted == "None":
            spec["clusterIP"] = "None"
            spec["clusterIPs"] = ["None"]
            return
        if wanted and wanted != old_ip:
            try:
                address = ipaddress.ip_address(wanted)
            except ValueError:
                causes.append(_invalid("spec.clusterIPs[0]", wanted, "must be a valid IP address"))
                return
            if address not in SERVICE_CIDR:
                causes.append(
                    _invalid(
                        "spec.clusterIPs",
                        f'[]string{{"{wanted}"}}',
                        f"failed to allocate IP {wanted}: the provided IP ({wanted}) is not in the "
                        f"valid range. The range of valid IPs is {SERVICE_CIDR}",
                    )
                )
                return
            if self._held_by_another(f"ip/{address}", key):
                causes.append(_ip_allocated(wanted))
                return
        if not wanted:
            wanted = self._free_ip(key)
        spec["clusterIP"] = wanted
        spec["clusterIPs"] = [wanted]

    def _free_ip(self, key: str) -> str:
        size = SERVICE_CIDR.num_addresses - 2
        for _ in range(size):
            offset = self._next_ip
            self._next_ip = 2 if self._next_ip >= size else self._next_ip + 1
            candidate = str(SERVICE_CIDR.network_address + offset)
            if not self._held_by_another(f"ip/{candidate}", key):
                return candidate
        raise errors.InternalError(f"failed to allocate a serviceIP: range {SERVICE_CIDR} is full")

    def _node_ports(self, spec: Obj, old_spec: Obj, key: str, causes: list[StatusCause]) -> None:
        previous = {
            (p.get("port"), p.get("protocol", "TCP")): p.get("nodePort")
            for p in old_spec.get("ports") or ()
            if isinstance(p, dict) and p.get("nodePort")
        }
        taken: set[int] = set()  # by this Service's earlier ports
        for index, port in enumerate(spec.get("ports") or ()):
            if not isinstance(port, dict):
                continue
            wanted = port.get("nodePort") or previous.get((port.get("port"), port.get("protocol", "TCP")))
            if wanted:
                if wanted not in NODE_PORTS:
                    causes.append(
                        _invalid(
                            f"spec.ports[{index}].nodePort",
                            wanted,
                            f"provided port is not in the valid range. The range of valid ports is "
                            f"{NODE_PORTS.start}-{NODE_PORTS.stop - 1}",
                        )
                    )
                    continue
                if (wanted in taken and wanted not in previous.values()) or self._held_by_another(
                    f"nodeport/{wanted}", key
                ):
                    causes.append(_port_allocated(index, wanted))
                    continue
            else:
                wanted = self._free_port(taken, key)
            port["nodePort"] = wanted
            taken.add(wanted)

    def _free_port(self, taken: set[int], key: str) -> int:
        for _ in range(len(NODE_PORTS)):
            candidate = NODE_PORTS[self._next_port]
            self._next_port = (self._next_port + 1) % len(NODE_PORTS)
            if candidate not in taken and not self._held_by_another(f"nodeport/{candidate}", key):
                return candidate
        raise errors.InternalError("failed to allocate a nodePort: range is full")
