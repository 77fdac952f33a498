"""Pod Security admission, as kube-apiserver runs it: the Pod Security Standards
(``standards``: privileged, baseline, restricted), a namespace's policy from its
``pod-security.kubernetes.io/`` labels (``namespacepolicy``), and the admission plugin that
refuses, warns and audits by them (``enforcement``).
"""
