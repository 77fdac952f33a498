"""networking.k8s.io kinds' columns: Ingresses, IngressClasses, NetworkPolicies, IPAddresses,
ServiceCIDRs.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping

from kubeloop.apiserver.printing.cells import (
    MORE,
    OBJECT_META,
    Cell,
    Column,
    Obj,
    age_column,
    api_doc,
    list_at,
    map_at,
    name_column,
    selector_or_none,
    text_at,
    value_at,
)


def _ingress_hosts(obj: Obj, now: datetime.datetime) -> Cell:
    """``formatHosts``: the first three hosts, ``*`` when no rule names one."""
    rules = list_at(obj, "spec.rules")
    hosts = [str(r.get("host")) for r in rules[:3] if isinstance(r, Mapping) and r.get("host")]
    if not hosts:
        return "*"
    text = ",".join(hosts)
    return MORE.format(text, len(rules) - 3) if len(rules) > 3 else text


def _ingress_address(obj: Obj, now: datetime.datetime) -> Cell:
    addresses = {
        str(entry.get("ip") or entry.get("hostname"))
        for entry in list_at(obj, "status.loadBalancer.ingress")
        if isinstance(entry, Mapping) and (entry.get("ip") or entry.get("hostname"))
    }
    return ",".join(sorted(addresses))


def ingress_columns() -> list[Column]:
    return [
        name_column(),
        Column(
            "Class",
            "string",
            lambda o, n: text_at(o, "spec.ingressClassName", "<none>"),
            "The name of the IngressClass resource that should be used for additional configuration",
        ),
        Column(
            "Hosts",
            "string",
            _ingress_hosts,
            "Hosts that incoming requests are matched against before the ingress rule",
        ),
        Column(
            "Address",
            "string",
            _ingress_address,
            "Address is a list containing ingress points for the load-balancer",
        ),
        Column(
            "Ports",
            "string",
            lambda o, n: "80, 443" if list_at(o, "spec.tls") else "80",
            "Ports of TLS configurations that open",
        ),
        age_column(),
    ]


def _ingress_class_name(obj: Obj, now: datetime.datetime) -> Cell:
    default = map_at(obj, "metadata.annotations").get("ingressclass.kubernetes.io/is-default-class") == "true"
    return text_at(obj, "metadata.name") + (" (default)" if default else "")


def _ingress_class_parameters(obj: Obj, now: datetime.datetime) -> Cell:
    parameters = map_at(obj, "spec.parameters")
    if not parameters:
        return "<none>"
    group = parameters.get("apiGroup")
    return f"{parameters.get('kind', '')}{'' if group is None else '.' + str(group)}/{parameters.get('name', '')}"


def ingressclass_columns() -> list[Column]:
    return [
        Column("Name", "string", _ingress_class_name, api_doc(OBJECT_META, "name"), format="name"),
        Column(
            "Controller",
            "string",
            lambda o, n: text_at(o, "spec.controller"),
            "Controller that is responsible for handling this class",
        ),
        Column(
            "Parameters",
            "string",
            _ingress_class_parameters,
            "A reference to a resource with additional parameters",
        ),
        age_column(),
    ]


def networkpolicy_columns() -> list[Column]:
    return [
        name_column(),
        Column(
            "Pod-Selector",
            "string",
            lambda o, n: selector_or_none(value_at(o, "spec.podSelector")),
            api_doc("io.k8s.api.networking.v1.NetworkPolicySpec", "podSelector"),
        ),
        age_column(),
    ]


def _ipaddress_parent(obj: Obj, now: datetime.datetime) -> Cell:
    ref = map_at(obj, "spec.parentRef")
    if not ref:
        return "<none>"
    resource, group = str(ref.get("resource", "")), str(ref.get("group", ""))
    text = (f"{resource}.{group}" if group else resource).lower()
    if ref.get("namespace"):
        text += f"/{ref['namespace']}"
    return f"{text}/{ref.get('name', '')}"


def ipaddress_columns() -> list[Column]:
    # Upstream declares two columns and fills three cells (the age); kubectl shows the two.
    return [
        name_column(),
        Column(
            "ParentRef",
            "string",
            _ipaddress_parent,
            api_doc("io.k8s.api.networking.v1.IPAddressSpec", "parentRef"),
        ),
    ]


def servicecidr_columns() -> list[Column]:
    return [
        name_column(),
        Column(
            "CIDRs",
            "string",
            lambda o, n: ",".join(str(c) for c in list_at(o, "spec.cidrs")),
            api_doc("io.k8s.api.networking.v1.ServiceCIDRSpec", "cidrs"),
        ),
        age_column(),
    ]
