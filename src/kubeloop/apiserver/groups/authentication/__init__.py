"""The authentication.k8s.io API group: SelfSubjectReviews and TokenReviews."""

from __future__ import annotations

from kubeloop.apiserver.groups.declaration import BuiltinKind, review

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        review("authentication.k8s.io", "v1", "SelfSubjectReview"),
    ),
    BuiltinKind(
        review("authentication.k8s.io", "v1beta1", "SelfSubjectReview"),
    ),
    BuiltinKind(
        review("authentication.k8s.io", "v1", "TokenReview"),
    ),
)
