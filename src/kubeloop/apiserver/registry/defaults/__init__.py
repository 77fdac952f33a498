"""Defaulting and create-time status of built-in kinds: upstream's ``SetDefaults_*`` and the
status their ``PrepareForCreate`` seeds, kept to the fields clients read back. One module per API
group, as ``pkg/apis/<group>/<version>/defaults.go`` (apps and batch default their pod templates
with core's), one function per kind; ``strategies`` says which kind uses which.
"""

from kubeloop.apiserver.registry.defaults import (
    admissionregistration,
    apps,
    autoscaling,
    batch,
    core,
    discovery,
    flowcontrol,
    networking,
    rbac,
    resource,
    scheduling,
    storage,
)
from kubeloop.apiserver.registry.defaults.common import empty_status

__all__ = [
    "admissionregistration",
    "apps",
    "autoscaling",
    "batch",
    "core",
    "discovery",
    "empty_status",
    "flowcontrol",
    "networking",
    "rbac",
    "resource",
    "scheduling",
    "storage",
]
