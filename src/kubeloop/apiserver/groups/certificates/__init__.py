"""The certificates.k8s.io API group: CertificateSigningRequests, ClusterTrustBundles and
PodCertificateRequests."""

from __future__ import annotations

from kubeloop.apiserver.groups.certificates import columns
from kubeloop.apiserver.groups.declaration import BuiltinKind, plain

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        plain(
            "certificates.k8s.io",
            "certificatesigningrequests",
            "CertificateSigningRequest",
            False,
            short_names=("csr",),
            subresources=("status", "approval"),
        ),
        columns=columns.csr_columns,
    ),
    BuiltinKind(
        plain("certificates.k8s.io", "clustertrustbundles", "ClusterTrustBundle", False),
        columns=columns.clustertrustbundle_columns,
    ),
    BuiltinKind(
        plain(
            "certificates.k8s.io",
            "podcertificaterequests",
            "PodCertificateRequest",
            True,
            subresources=("status",),
        ),
        columns=columns.podcertificaterequest_columns,
    ),
)
