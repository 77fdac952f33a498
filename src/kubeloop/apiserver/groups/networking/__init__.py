"""The networking.k8s.io API group: IngressClasses, Ingresses, IPAddresses, NetworkPolicies and
ServiceCIDRs."""

from __future__ import annotations

from kubeloop.apiserver.groups.declaration import BuiltinKind, plain
from kubeloop.apiserver.groups.networking import columns, defaults

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        plain("networking.k8s.io", "ingressclasses", "IngressClass", False),
        columns=columns.ingressclass_columns,
    ),
    BuiltinKind(
        plain("networking.k8s.io", "ingresses", "Ingress", True, short_names=("ing",), subresources=("status",)),
        columns=columns.ingress_columns,
    ),
    BuiltinKind(
        plain("networking.k8s.io", "ipaddresses", "IPAddress", False, short_names=("ip",)),
        columns=columns.ipaddress_columns,
    ),
    BuiltinKind(
        plain("networking.k8s.io", "networkpolicies", "NetworkPolicy", True, short_names=("netpol",)),
        defaults=defaults.network_policy,
        columns=columns.networkpolicy_columns,
    ),
    BuiltinKind(
        plain("networking.k8s.io", "servicecidrs", "ServiceCIDR", False, subresources=("status",)),
        columns=columns.servicecidr_columns,
    ),
)
