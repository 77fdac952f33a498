"""What validating every built-in kind shares, the way kube-apiserver does it, in the order a
write meets it.

* (Go's typed decoding of the body comes first: :mod:`kubeloop.apiserver.decoding`);
* :mod:`.objectmeta` — ``ObjectMeta``, as apimachinery's ``objectmeta.go``;
* :mod:`.required` — fields the OpenAPI schema lists as required;
* each API group's own rules, as ``pkg/apis/<group>/validation``, live with the group
  (``apiserver/groups/<group>/validation.py``); :mod:`.selectors`, :mod:`.intstr` and
  :mod:`.causes` serve them all.

Every stage yields 422 causes in upstream's ``field: Reason: detail`` form (decoding: 400).
"""

from kubeloop.apiserver.registry.validation import causes
from kubeloop.apiserver.registry.validation.causes import deduplicated
from kubeloop.apiserver.registry.validation.objectmeta import validate_object_meta
from kubeloop.apiserver.registry.validation.required import validate_required

__all__ = [
    "causes",
    "deduplicated",
    "validate_object_meta",
    "validate_required",
]
