"""certificates.k8s.io kinds' columns: CertificateSigningRequests, ClusterTrustBundles,
PodCertificateRequests.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping

from kubeloop.apiserver.printing.cells import (
    Cell,
    CellFn,
    Column,
    Obj,
    age_column,
    api_doc,
    format_labels,
    human_duration,
    int_at,
    list_at,
    map_at,
    name_column,
    text_at,
    value_at,
)


def _csr_condition(obj: Obj, now: datetime.datetime) -> Cell:
    """``extractCSRStatus``: Approved, Denied or Pending, then Failed and Issued."""
    types = {c.get("type") for c in list_at(obj, "status.conditions") if isinstance(c, Mapping)}
    text = "Denied" if "Denied" in types else "Approved" if "Approved" in types else "Pending"
    if "Failed" in types:
        text += ",Failed"
    if value_at(obj, "status.certificate"):
        text += ",Issued"
    return text


def _csr_duration(obj: Obj, now: datetime.datetime) -> Cell:
    seconds = value_at(obj, "spec.expirationSeconds")
    return "<none>" if seconds is None else human_duration(int_at(obj, "spec.expirationSeconds"))


def csr_columns() -> list[Column]:
    spec = "io.k8s.api.certificates.v1.CertificateSigningRequestSpec"
    return [
        name_column(),
        age_column(),
        Column(
            "SignerName",
            "string",
            lambda o, n: text_at(o, "spec.signerName") or "<none>",
            api_doc(spec, "signerName"),
        ),
        Column("Requestor", "string", lambda o, n: text_at(o, "spec.username"), api_doc(spec, "request")),
        Column("RequestedDuration", "string", _csr_duration, api_doc(spec, "expirationSeconds")),
        Column(
            "Condition",
            "string",
            _csr_condition,
            api_doc("io.k8s.api.certificates.v1.CertificateSigningRequestStatus", "conditions"),
        ),
    ]


def clustertrustbundle_columns() -> list[Column]:
    return [
        name_column(),
        Column(
            "SignerName",
            "string",
            lambda o, n: text_at(o, "spec.signerName") or "<none>",
            api_doc("io.k8s.api.certificates.v1.ClusterTrustBundleSpec", "signerName"),
        ),
    ]


def _pod_certificate_state(obj: Obj, now: datetime.datetime) -> Cell:
    state = "Pending"
    for condition in list_at(obj, "status.conditions"):
        if isinstance(condition, Mapping) and condition.get("type") in ("Issued", "Denied", "Failed"):
            state = str(condition["type"])
    return state


def _spec_text(field: str) -> CellFn:
    return lambda o, n: text_at(o, f"spec.{field}")


def podcertificaterequest_columns() -> list[Column]:
    spec = "io.k8s.api.certificates.v1.PodCertificateRequestSpec"
    return [
        name_column(),
        *(
            Column(title, "string", _spec_text(field), api_doc(spec, field))
            for title, field in (
                ("PodName", "podName"),
                ("ServiceAccountName", "serviceAccountName"),
                ("NodeName", "nodeName"),
                ("SignerName", "signerName"),
            )
        ),
        Column(
            "State", "string", _pod_certificate_state, "Is the request Pending, Issued, Denied, or Failed?"
        ),
        Column(
            "UnverifiedUserAnnotations",
            "string",
            lambda o, n: format_labels(map_at(o, "spec.unverifiedUserAnnotations")),
            api_doc(spec, "unverifiedUserAnnotations"),
        ),
    ]
