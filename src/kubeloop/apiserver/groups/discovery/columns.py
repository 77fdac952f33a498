"""discovery.k8s.io kinds' columns: EndpointSlices."""

from __future__ import annotations

import datetime
from collections.abc import Mapping

from kubeloop.apiserver.printing.cells import (
    Cell,
    Column,
    Obj,
    age_column,
    api_doc,
    field_column,
    list_at,
    name_column,
    with_more,
)


def _slice_ports(obj: Obj, now: datetime.datetime) -> Cell:
    ports = [p for p in list_at(obj, "ports") if isinstance(p, Mapping)]
    shown = [str(p["port"]) if p.get("port") is not None else str(p.get("name") or "*") for p in ports]
    return with_more(shown, len(ports))


def _slice_endpoints(obj: Obj, now: datetime.datetime) -> Cell:
    addresses = [
        str(address)
        for endpoint in list_at(obj, "endpoints")
        if isinstance(endpoint, Mapping)
        for address in endpoint.get("addresses") or ()
    ]
    return with_more(addresses, len(addresses))


def endpointslice_columns() -> list[Column]:
    kind = "io.k8s.api.discovery.v1.EndpointSlice"
    return [
        name_column(),
        field_column("AddressType", kind, "addressType"),
        Column("Ports", "string", _slice_ports, api_doc(kind, "ports")),
        Column("Endpoints", "string", _slice_endpoints, api_doc(kind, "endpoints")),
        age_column(),
    ]
