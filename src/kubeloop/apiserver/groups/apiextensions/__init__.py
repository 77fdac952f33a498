"""The apiextensions.k8s.io API group: CustomResourceDefinitions."""

from __future__ import annotations

from kubeloop.apiserver.catalog.resources import ResourceType
from kubeloop.apiserver.groups.declaration import BuiltinKind

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        ResourceType(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "customresourcedefinition",
            "CustomResourceDefinition",
            False,
            short_names=("crd", "crds"),
            categories=("api-extensions",),
            subresources=("status",),
            tracks_generation=True,
        ),
    ),
)
