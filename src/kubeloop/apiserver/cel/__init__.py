"""The CEL engine the server shares (upstream's ``staging/src/k8s.io/apiserver/pkg/cel``):
CEL's optional syntax rewritten for the interpreter (:mod:`.syntax`), static type checking of an
expression against the schema of what it reads (:mod:`.typecheck`), and compiled rules with
their evaluation, cost and messages (:mod:`.rules`), on the interpreter loaded without its
command line (:mod:`.interpreter`).

Custom resources' ``x-kubernetes-validations`` (``apiextensions``), ValidatingAdmissionPolicies
(``admissionpolicy``) and webhooks' match conditions (``webhooks``) use it; it imports nothing
of the server's.
"""
