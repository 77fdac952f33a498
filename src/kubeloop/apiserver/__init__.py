"""The embedded Kubernetes-compatible API server.

Where it sits in the flow: ``kubectl apply`` → **apiserver** (validate, store, watch) →
informers in the controller runtime. It is what an operator runs against on a laptop,
in CI and in kubeloop's own tests, with no cluster.

Its subpackages are kube-apiserver's layers, top down: ``admissionpolicy``
(ValidatingAdmissionPolicy), ``webhooks`` (admission and conversion webhooks),
``controllers`` (kube-controller-manager),
``apiextensions`` (CRDs), ``http``, ``registry`` and ``auth``, ``patch``/``printing``/``openapi``,
``protobuf``, ``storage``, ``catalog``; ``server`` puts them together (see docs/architecture.md).

Internal: run it with ``kubeloop apiserver``, ``kubeloop run --embedded`` or, in tests,
``kubeloop.testing``; its modules may change in any release.
"""
