"""What kube-apiserver allocates to a Service: a cluster IP from the service CIDR (with its IP
family fields) and, for NodePort and LoadBalancer Services, a node port per port; kept across
updates that leave them out, immutable once set, and unique among the stored Services.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.storage.watchcache import ObjectStore
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


class ServiceAllocator:
    """Hands out cluster IPs and node ports not used by any stored Service. A cursor moves
    forward through each range, so that two creates in flight never receive the same value."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._next_ip = 2  # .1 is the kubernetes Service's
        self._next_port = 0

    def _services(self) -> Iterator[Obj]:
        for _key, obj in self.store.items(SERVICES_PREFIX):
            yield obj

    def _used(self, skip_uid: str) -> tuple[set[str], set[int]]:
        """The cluster IPs and node ports of every stored Service but ``skip_uid``."""
        ips: set[str] = set()
        ports: set[int] = set()
        for service in self._services():
            if (service.get("metadata") or {}).get("uid") == skip_uid:
                continue
            spec = service.get("spec") or {}
            ips.update(str(ip) for ip in spec.get("clusterIPs") or () if ip != "None")
            ports.update(int(p["nodePort"]) for p in spec.get("ports") or () if p.get("nodePort"))
        return ips, ports

    @staticmethod
    def _unchanged(spec: Obj, old_spec: Obj) -> bool:
        """Whether an update asks for nothing new: the same type, IP and ports (a status write,
        a label change); then no Service needs to be looked at."""
        if not old_spec or spec.get("type") != old_spec.get("type"):
            return False
        if spec.get("clusterIP", old_spec.get("clusterIP")) != old_spec.get("clusterIP"):
            return False
        if spec.get("clusterIPs", old_spec.get("clusterIPs")) != old_spec.get("clusterIPs"):
            return False
        return spec.get("ports") == old_spec.get("ports")

    def allocate(self, service: Obj, old: Obj | None) -> None:
        """Fill a Service's cluster IP, IP family fields and node ports (keeping ``old``'s where
        the new one leaves them out); 422 for a requested value that is taken or out of range."""
        spec = service.get("spec")
        if not isinstance(spec, dict):
            return
        name = str((service.get("metadata") or {}).get("name") or "")
        uid = str((service.get("metadata") or {}).get("uid") or "")
        old_spec = (old or {}).get("spec") or {}
        kind = spec.get("type") or "ClusterIP"
        if self._unchanged(spec, old_spec):
            used_ips: set[str] = set()  # what it keeps is its own
            used_ports: set[int] = set()
        else:
            used_ips, used_ports = self._used(uid)
        causes: list[StatusCause] = []
        if kind == "ExternalName":
            for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                spec.pop(key, None)
        else:
            self._cluster_ip(spec, old_spec, used_ips, causes)
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
            spec.setdefault("internalTrafficPolicy", "Cluster")
        if kind in ("NodePort", "LoadBalancer"):
            spec.setdefault("externalTrafficPolicy", "Cluster")
            if kind == "LoadBalancer":
                spec.setdefault("allocateLoadBalancerNodePorts", True)
            if kind == "NodePort" or spec.get("allocateLoadBalancerNodePorts"):
                self._node_ports(spec, old_spec, used_ports, causes)
        else:
            for port in spec.get("ports") or ():
                if isinstance(port, dict):
                    port.pop("nodePort", None)
        if causes:
            raise errors.invalid("", "Service", name, causes)

    def _cluster_ip(self, spec: Obj, old_spec: Obj, used: set[str], causes: list[StatusCause]) -> None:
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
            if str(address) in used:
                causes.append(
                    _invalid(
                        "spec.clusterIPs",
                        f'[]string{{"{wanted}"}}',
                        f"failed to allocate IP {wanted}: provided IP is already allocated",
                    )
                )
                return
        if not wanted:
            wanted = self._free_ip(used)
        spec["clusterIP"] = wanted
        spec["clusterIPs"] = [wanted]

    def _free_ip(self, used: set[str]) -> str:
        size = SERVICE_CIDR.num_addresses - 2
        for _ in range(size):
            offset = self._next_ip
            self._next_ip = 2 if self._next_ip >= size else self._next_ip + 1
            candidate = str(SERVICE_CIDR.network_address + offset)
            if candidate not in used:
                return candidate
        raise errors.InternalError(f"failed to allocate a serviceIP: range {SERVICE_CIDR} is full")

    def _node_ports(self, spec: Obj, old_spec: Obj, used: set[int], causes: list[StatusCause]) -> None:
        previous = {
            (p.get("port"), p.get("protocol", "TCP")): p.get("nodePort")
            for p in old_spec.get("ports") or ()
            if isinstance(p, dict) and p.get("nodePort")
        }
        taken = set(used)
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
                if wanted in taken and wanted not in previous.values():
                    causes.append(
                        _invalid(
                            f"spec.ports[{index}].nodePort", wanted, "provided port is already allocated"
                        )
                    )
                    continue
            else:
                wanted = self._free_port(taken)
            port["nodePort"] = wanted
            taken.add(wanted)

    def _free_port(self, taken: set[int]) -> int:
        for _ in range(len(NODE_PORTS)):
            candidate = NODE_PORTS[self._next_port]
            self._next_port = (self._next_port + 1) % len(NODE_PORTS)
            if candidate not in taken:
                return candidate
        raise errors.InternalError("failed to allocate a nodePort: range is full")
