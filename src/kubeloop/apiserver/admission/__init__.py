"""Admission: the chain every client's write goes through, and its plugins (upstream's
``apiserver/pkg/admission`` with ``plugin/pkg/admission``).

``chain`` runs the plugins in kube-apiserver's order (``builtin_chain``); the plugins are
``serviceaccount``, ``podsecurity/`` (Pod Security admission), ``admissionpolicy/``
(ValidatingAdmissionPolicy) and ``webhooks/`` (the mutating and validating webhook plugins).
What the registry asks of admission, and where it asks, is ``registry.admissionhooks``; the
webhooks' HTTP client is ``webhookclient``, shared with CRD conversion webhooks.
"""
