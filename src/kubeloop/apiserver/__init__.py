"""The embedded Kubernetes-compatible API server.

Where it sits in the flow: ``kubectl apply`` → **apiserver** (validate, store, watch) →
informers in the controller runtime. It is what an operator runs against on a laptop,
in CI and in kubeloop's own tests, with no cluster.

Its subpackages are kube-apiserver's layers, top down: ``admission`` (the chain: ServiceAccount,
Pod Security, ValidatingAdmissionPolicy, webhooks), ``apiextensions`` (CRDs), ``groups`` (the
built-in API groups' kinds), ``webhookclient``, ``http``, ``registry`` and ``auth``,
``patch``/``printing``/``openapi``, ``protobuf``, ``storage`` and ``audit``, ``decoding``,
``catalog`` and ``cel``; ``server`` puts them together (see docs/architecture.md). The cluster's
controllers and node are not here: ``kubeloop.controllermanager``, ``kubeloop.node``.

Internal: run it with ``kubeloop apiserver``, ``kubeloop run --embedded`` or, in tests,
``kubeloop.testing``; its modules may change in any release.
"""
