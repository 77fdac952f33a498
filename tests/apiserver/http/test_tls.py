"""TLS and identity on the real server (the session's, over its real listener): the certificate
verifies against the kubeconfig's CA for 127.0.0.1 and localhost, TLS below 1.2 is refused,
``/version`` answers as kube-apiserver does, the health endpoints are public, and client
certificates count only when the server's CA issued them."""

from __future__ import annotations

import base64
import http.client
import re
import ssl
import warnings
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from kubeloop import certs
from kubeloop.api import timestamps
from tests.conftest import ServerThread, https_get


def ca_of(server: ServerThread) -> bytes:
    """The CA as a client finds it: in the kubeconfig the server wrote."""
    config = yaml.safe_load(server.kubeconfig.read_text())
    return base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])


def get(
    server: ServerThread,
    path: str,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, Any]:
    port = urlsplit(server.url).port
    assert port is not None
    context = context or certs.client_ssl_context(ca_of(server))
    status, _, body = https_get(host, port, path, context=context, token=token)
    return status, body


def test_version_over_verified_tls(shared_server: ServerThread) -> None:
    status, version = get(shared_server, "/version", token=shared_server.token)
    assert status == 200
    assert re.fullmatch(r"v1\.\d+\.\d+(-[0-9A-Za-z.-]+)?", version["gitVersion"]), version  # semver
    assert version["major"] == "1" and version["gitVersion"].startswith(f"v1.{version['minor']}.")
    assert re.fullmatch(r"[a-z0-9]+/[a-z0-9]+", version["platform"]) and version["compiler"]
    assert timestamps.parse_time(version["buildDate"]) is not None


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_the_certificate_covers_loopback_names(shared_server: ServerThread, host: str) -> None:
    context = certs.client_ssl_context(ca_of(shared_server))
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert get(shared_server, "/healthz", host=host, context=context) == (200, "ok")


def test_a_client_that_trusts_another_ca_refuses_the_server(shared_server: ServerThread) -> None:
    stranger = certs.load_or_create_credentials(None, ["127.0.0.1"])
    with pytest.raises(ssl.SSLCertVerificationError):
        get(shared_server, "/healthz", context=certs.client_ssl_context(stranger.ca_cert_pem))


def test_tls_below_1_2_is_refused(shared_server: ServerThread) -> None:
    context = certs.client_ssl_context(ca_of(shared_server))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = ssl.TLSVersion.TLSv1
        context.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises((ssl.SSLError, ConnectionError)):
        get(shared_server, "/healthz", context=context)


def test_health_is_public_and_the_api_is_not(shared_server: ServerThread) -> None:
    for path in ("/healthz", "/livez", "/readyz"):
        assert get(shared_server, path) == (200, "ok"), path
    status, body = get(shared_server, "/api/v1/namespaces")
    assert status == 401 and body["kind"] == "Status" and body["reason"] == "Unauthorized"
    assert get(shared_server, "/version", token="not-the-token")[0] == 401


def test_client_certificates_count_only_from_the_servers_ca(shared_server: ServerThread) -> None:
    credentials = shared_server.server.credentials
    assert credentials is not None
    cert, key = certs.issue_client_certificate(credentials, "alice", ["system:masters"])
    trusted = certs.client_ssl_context(ca_of(shared_server), cert, key)
    status, listed = get(shared_server, "/api/v1/namespaces", context=trusted)
    assert status == 200 and listed["kind"] == "NamespaceList"

    stranger = certs.load_or_create_credentials(None, ["127.0.0.1"])
    cert, key = certs.issue_client_certificate(stranger, "mallory", ["system:masters"])
    forged = certs.client_ssl_context(ca_of(shared_server), cert, key)
    try:
        status, _ = get(shared_server, "/api/v1/namespaces", context=forged)
    except (ssl.SSLError, ConnectionError, http.client.RemoteDisconnected):
        return  # refused in the handshake
    assert status == 401
