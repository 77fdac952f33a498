"""ValidatingAdmissionPolicy and its bindings: admission by CEL, in process.

``policies`` reads and compiles the stored policies and bindings; ``policyadmission`` is the
admission plugin the chain runs between mutating and validating webhooks (kube-apiserver's
order), matching requests as webhooks are matched (``webhooks.matching``); ``typechecking``
writes each policy's type-checking status, as upstream's policy controller; ``expressioncheck``
compiles the expressions of policies and webhook configurations when they are written.
"""
