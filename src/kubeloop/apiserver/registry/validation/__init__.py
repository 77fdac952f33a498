"""Validation of built-in kinds, the way kube-apiserver does it, in the order a write meets it.

* (Go's typed decoding of the body comes first: :mod:`kubeloop.apiserver.decoding`);
* :mod:`.objectmeta` — ``ObjectMeta``, as apimachinery's ``objectmeta.go``;
* :mod:`.required` — fields the OpenAPI schema lists as required;
* the rules of each API group, as ``pkg/apis/<group>/validation``: :mod:`.core`, :mod:`.apps`,
  :mod:`.batch`, :mod:`.rbac`, :mod:`.policy`, :mod:`.autoscaling`, :mod:`.coordination`,
  :mod:`.admissionregistration` (each
  a ``<kind>_rules(obj)`` per kind, and ``<kind>_update_rules(new, old)`` where updates are
  judged). Group modules are independent of each other, but apps and batch use core's pod
  template rules, as upstream's do; :mod:`.selectors`, :mod:`.intstr` and :mod:`.causes` serve
  them all.

Every stage yields 422 causes in upstream's ``field: Reason: detail`` form (decoding: 400).
"""

from kubeloop.apiserver.registry.validation import (
    admissionregistration,
    apps,
    autoscaling,
    batch,
    coordination,
    core,
    policy,
    rbac,
)
from kubeloop.apiserver.registry.validation.causes import deduplicated
from kubeloop.apiserver.registry.validation.objectmeta import validate_object_meta
from kubeloop.apiserver.registry.validation.required import validate_required

__all__ = [
    "admissionregistration",
    "apps",
    "autoscaling",
    "batch",
    "coordination",
    "core",
    "deduplicated",
    "policy",
    "rbac",
    "validate_object_meta",
    "validate_required",
]
