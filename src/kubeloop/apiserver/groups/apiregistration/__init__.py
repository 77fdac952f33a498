"""The apiregistration.k8s.io API group: APIServices."""

from __future__ import annotations

from kubeloop.apiserver.groups.apiregistration import columns
from kubeloop.apiserver.groups.declaration import API_EXTENSIONS, BuiltinKind, plain

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        plain(
            "apiregistration.k8s.io",
            "apiservices",
            "APIService",
            False,
            categories=API_EXTENSIONS,
            subresources=("status",),
        ),
        columns=columns.apiservice_columns,
    ),
)
