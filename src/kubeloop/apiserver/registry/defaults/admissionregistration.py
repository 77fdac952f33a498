"""The admissionregistration.k8s.io group's defaults: ValidatingAdmissionPolicies and their
bindings.
"""

from __future__ import annotations

from kubeloop.api.object import Obj
from kubeloop.apiserver.registry.defaults.common import spec_of

__all__ = ["admission_policy"]


def admission_policy(obj: Obj) -> None:
    """Validating and mutating admission policies: Fail on errors, Equivalent matching,
    selectors that select everything."""
    spec = spec_of(obj)
    if spec is None:
        return
    spec.setdefault("failurePolicy", "Fail")
    constraints = spec.get("matchConstraints")
    if isinstance(constraints, dict):
        constraints.setdefault("matchPolicy", "Equivalent")
        constraints.setdefault("namespaceSelector", {})
        constraints.setdefault("objectSelector", {})
