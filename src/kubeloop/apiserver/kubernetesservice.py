"""The objects through which a cluster's workloads find its API server, as kube-apiserver keeps
them: the ``kubernetes`` Service in ``default`` (the service range's first address, port 443) and
its Endpoints and EndpointSlice naming the address and port the server listens on now.
"""

from __future__ import annotations

import ipaddress

from kubeloop.api.object import Obj
from kubeloop.apiserver.registry.serviceips import KUBERNETES_SERVICE_IP

NAME = "kubernetes"
NAMESPACE = "default"
_LABELS = {"component": "apiserver", "provider": "kubernetes"}


def advertised_address(host: str) -> str:
    """The IP other components reach the server at (a wildcard or a name: the loopback)."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return "127.0.0.1"
    if address.is_unspecified:
        return "::1" if address.version == 6 else "127.0.0.1"
    return str(address)


def service(port: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": dict(_LABELS)},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": KUBERNETES_SERVICE_IP,
            "sessionAffinity": "None",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
        },
    }


def endpoints(address: str, port: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
        },
        "subsets": [
            {"addresses": [{"ip": address}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}
        ],
    }


def endpoint_slice(address: str, port: int) -> Obj:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {"kubernetes.io/service-name": NAME},
        },
        "addressType": "IPv6" if ":" in address else "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    }
