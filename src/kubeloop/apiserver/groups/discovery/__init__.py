"""The discovery.k8s.io API group: EndpointSlices."""

from __future__ import annotations

from kubeloop.apiserver.groups.declaration import BuiltinKind, plain
from kubeloop.apiserver.groups.discovery import columns, defaults

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        plain("discovery.k8s.io", "endpointslices", "EndpointSlice", True),
        defaults=defaults.endpoint_slice,
        columns=columns.endpointslice_columns,
    ),
)
