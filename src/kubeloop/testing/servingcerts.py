"""Serving certificates for a test's own HTTPS servers (envtest's ``LocalServingCertDir``): a
fresh CA and a certificate it signed, written as a server reads them."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence

from kubeloop import certs


def write_serving_certificate(
    directory: str | pathlib.Path, hosts: Sequence[str] = ("127.0.0.1", "localhost")
) -> bytes:
    """Write ``tls.crt`` and ``tls.key`` for ``hosts`` into ``directory`` (made if missing),
    signed by a new CA, and return that CA's certificate (PEM) for the test's client to trust.
    Writing again replaces the pair, as a rotation does."""
    folder = pathlib.Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    issued = certs.issue_serving_certificate(hosts)
    key = folder / "tls.key"
    key.touch(mode=0o600)
    key.write_bytes(issued.key_pem)
    (folder / "tls.crt").write_bytes(issued.cert_pem)
    return issued.ca_cert_pem
