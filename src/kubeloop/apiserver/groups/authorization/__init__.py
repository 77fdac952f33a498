"""The authorization.k8s.io API group: SelfSubjectAccessReviews, SelfSubjectRulesReviews,
SubjectAccessReviews and LocalSubjectAccessReviews."""

from __future__ import annotations

from kubeloop.apiserver.groups.declaration import BuiltinKind, review

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        review("authorization.k8s.io", "v1", "SelfSubjectAccessReview"),
    ),
    BuiltinKind(
        review("authorization.k8s.io", "v1", "SelfSubjectRulesReview"),
    ),
    BuiltinKind(
        review("authorization.k8s.io", "v1", "SubjectAccessReview"),
    ),
    BuiltinKind(
        review("authorization.k8s.io", "v1", "LocalSubjectAccessReview", namespaced=True),
    ),
)
