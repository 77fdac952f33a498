"""TLS, authentication and kubeconfig over real TLS on loopback: certs.py, http/authentication.py, kubeconfig.py
against a small aiohttp app, driven by the standard library, the official client and kubectl."""

from __future__ import annotations

import asyncio
import http.client
import json
import pathlib
import ssl
import stat
import subprocess
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from aiohttp import web
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubeloop import certs
from kubeloop.apiserver import kubeconfig
from kubeloop.apiserver.http.authentication import USER, Authenticator, auth_middleware
from kubeloop.apiserver.userinfo import UserInfo
from tests.conftest import https_get
from tests.kubectl_finder import kubectl_env, newest_kubectl

ADMIN = UserInfo("kubeloop-admin", ("system:masters", "system:authenticated"))
VERSION = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.0",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
UNAUTHORIZED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Unauthorized",
    "reason": "Unauthorized",
    "code": 401,
}


async def whoami(request: web.Request) -> web.Response:
    user = request[USER]
    return web.json_response({"name": user.name, "groups": list(user.groups)})


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def version(request: web.Request) -> web.Response:
    return web.json_response(VERSION)


class TLSApp:
    """The middleware and server_ssl_context in a tiny app, on its own loop in a thread."""

    def __init__(self, creds: certs.ServerCredentials) -> None:
        self.creds = creds
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    def _call(self, coro: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout=30)

    async def _start(self) -> None:
        app = web.Application(middlewares=[auth_middleware(Authenticator({self.creds.admin_token: ADMIN}))])
        app.add_routes(
            [
                web.get("/whoami", whoami),
                web.get("/healthz", healthz),
                web.get("/version", version),
                web.get("/version/", version),
            ]
        )
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=certs.server_ssl_context(self.creds))
        await site.start()
        self.port = self._runner.addresses[0][1]

    def start(self) -> TLSApp:
        self._thread.start()
        self._call(self._start())
        return self

    def stop(self) -> None:
        if self._runner is not None:
            self._call(self._runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def get(
        self, path: str, *, token: str | None = None, context: ssl.SSLContext | None = None
    ) -> tuple[int, str, Any]:
        """(status, content type, decoded body) of a GET over TLS."""
        context = context or certs.client_ssl_context(self.creds.ca_cert_pem)
        return https_get("127.0.0.1", self.port, path, context=context, token=token)


@pytest.fixture(scope="module")
def creds() -> certs.ServerCredentials:
    return certs.load_or_create_credentials(None, ["127.0.0.1"])


@pytest.fixture(scope="module")
def server(creds: certs.ServerCredentials) -> Iterator[TLSApp]:
    running = TLSApp(creds).start()
    yield running
    running.stop()


# --------------------------------------------------------------------------- authentication


def test_no_credentials_gets_401_status(server: TLSApp) -> None:
    status, content_type, body = server.get("/whoami")
    assert status == 401
    assert content_type.startswith("application/json")
    assert body == UNAUTHORIZED


@pytest.mark.parametrize("token", ["wrong", "", "x" * 43])
def test_wrong_token_gets_401_status(server: TLSApp, token: str) -> None:
    status, _, body = server.get("/whoami", token=token)
    assert status == 401
    assert body == UNAUTHORIZED


def test_malformed_authorization_header_gets_401(server: TLSApp, creds: certs.ServerCredentials) -> None:
    context = certs.client_ssl_context(creds.ca_cert_pem)
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)
    connection.request("GET", "/whoami", headers={"Authorization": f"Basic {creds.admin_token}"})
    assert connection.getresponse().status == 401
    connection.close()


def test_admin_token_is_accepted(server: TLSApp, creds: certs.ServerCredentials) -> None:
    status, _, body = server.get("/whoami", token=creds.admin_token)
    assert status == 200
    assert body == {"name": "kubeloop-admin", "groups": ["system:masters", "system:authenticated"]}


def test_client_certificate_is_accepted(server: TLSApp, creds: certs.ServerCredentials) -> None:
    cert_pem, key_pem = certs.issue_client_certificate(creds, "alice", ["developers", "ops"])
    context = certs.client_ssl_context(creds.ca_cert_pem, cert_pem, key_pem)
    status, _, body = server.get("/whoami", context=context)
    assert status == 200
    assert body == {"name": "alice", "groups": ["developers", "ops", "system:authenticated"]}


def test_client_certificate_from_another_ca_is_rejected(
    server: TLSApp, creds: certs.ServerCredentials
) -> None:
    stranger = certs.load_or_create_credentials(None, ["127.0.0.1"])
    cert_pem, key_pem = certs.issue_client_certificate(stranger, "mallory", ["system:masters"])
    context = certs.client_ssl_context(creds.ca_cert_pem, cert_pem, key_pem)
    try:
        status, _, body = server.get("/whoami", context=context)
    except (ssl.SSLError, ConnectionError, http.client.RemoteDisconnected):
        return  # refused in the TLS handshake
    assert status == 401
    assert body == UNAUTHORIZED


def test_health_endpoints_are_public(server: TLSApp) -> None:
    status, _, body = server.get("/healthz")
    assert (status, body) == (200, "ok")
    assert server.get("/version")[0] == 401


def test_server_refuses_tls_below_1_2(server: TLSApp, creds: certs.ServerCredentials) -> None:
    context = certs.client_ssl_context(creds.ca_cert_pem)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = ssl.TLSVersion.TLSv1
        context.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises((ssl.SSLError, ConnectionError)):
        server.get("/healthz", context=context)


# --------------------------------------------------------------------------- certificates


def test_server_certificate_covers_hosts_and_loopback(creds: certs.ServerCredentials) -> None:
    issued = certs.load_or_create_credentials(None, ["10.1.2.3", "api.example.test", "[fd00::1]"])
    cert = x509.load_pem_x509_certificate(issued.server_cert_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)} == {
        "10.1.2.3",
        "fd00::1",
        "127.0.0.1",
        "::1",
    }
    assert set(sans.get_values_for_type(x509.DNSName)) == {"api.example.test", "localhost"}
    ca = x509.load_pem_x509_certificate(issued.ca_cert_pem)
    assert ca.subject.rfc4514_string() == "CN=kubeloop-ca"
    assert (ca.not_valid_after_utc - ca.not_valid_before_utc).days >= 3650
    cert.verify_directly_issued_by(ca)
    assert len(issued.admin_token) >= 43
    assert issued.admin_token not in repr(issued)


def test_client_certificate_contents(creds: certs.ServerCredentials) -> None:
    cert_pem, _ = certs.issue_client_certificate(creds, "bob", ["a", "b"], days=7)
    cert = x509.load_pem_x509_certificate(cert_pem)
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(creds.ca_cert_pem))
    names = {attribute.oid._name: attribute.value for attribute in cert.subject}
    assert names["commonName"] == "bob"
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "a",
        "b",
    ]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert 6 <= (cert.not_valid_after_utc - cert.not_valid_before_utc).days <= 8


def _mode(path: pathlib.Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_credentials_are_persisted_and_reused(tmp_path: pathlib.Path) -> None:
    pki = tmp_path / "pki"
    first = certs.load_or_create_credentials(pki, ["127.0.0.1"])
    for name in ("ca.key", "apiserver.key", "admin.token"):
        assert _mode(pki / name) == 0o600, name
    for name in ("ca.crt", "apiserver.crt"):
        assert (pki / name).read_bytes()
    assert not [p for p in pki.iterdir() if p.name.startswith(".")]  # no temporary files left
    second = certs.load_or_create_credentials(pki, ["127.0.0.1", "localhost"])
    assert second == first

    # A new host: the serving certificate is reissued, the CA and the token are kept.
    third = certs.load_or_create_credentials(pki, ["127.0.0.1", "kubeloop.example.test"])
    assert third.ca_cert_pem == first.ca_cert_pem and third.ca_key_pem == first.ca_key_pem
    assert third.admin_token == first.admin_token
    assert third.server_cert_pem != first.server_cert_pem
    sans = (
        x509.load_pem_x509_certificate(third.server_cert_pem)
        .extensions.get_extension_for_class(x509.SubjectAlternativeName)
        .value
    )
    assert "kubeloop.example.test" in sans.get_values_for_type(x509.DNSName)
    assert certs.load_or_create_credentials(pki, ["kubeloop.example.test"]) == third

    # A lost CA key: a new CA, and a serving certificate signed by it.
    (pki / "ca.key").unlink()
    fourth = certs.load_or_create_credentials(pki, ["127.0.0.1"])
    assert fourth.ca_cert_pem != first.ca_cert_pem
    assert fourth.admin_token == first.admin_token
    x509.load_pem_x509_certificate(fourth.server_cert_pem).verify_directly_issued_by(
        x509.load_pem_x509_certificate(fourth.ca_cert_pem)
    )

    # A lost token: a new one.
    (pki / "admin.token").unlink()
    assert certs.load_or_create_credentials(pki, ["127.0.0.1"]).admin_token != first.admin_token


# --------------------------------------------------------------------------- kubeconfig


@pytest.fixture
def kubeconfig_file(tmp_path: pathlib.Path, server: TLSApp, creds: certs.ServerCredentials) -> pathlib.Path:
    path = tmp_path / "nested" / "dir" / "kubeconfig"
    client_cert = certs.issue_client_certificate(creds, "kubeloop-admin", ["system:masters"])
    kubeconfig.write_kubeconfig(
        path,
        server_url=server.url,
        ca_pem=creds.ca_cert_pem,
        token=creds.admin_token,
        client_cert=client_cert,
    )
    return path


def test_kubeconfig_is_private_and_atomic(
    kubeconfig_file: pathlib.Path, creds: certs.ServerCredentials
) -> None:
    assert _mode(kubeconfig_file) == 0o600
    assert [p.name for p in kubeconfig_file.parent.iterdir()] == ["kubeconfig"]
    # Rewriting replaces the file (new inode, still 0600), even over a world-readable one.
    kubeconfig_file.chmod(0o644)
    before = kubeconfig_file.stat().st_ino
    kubeconfig.write_kubeconfig(
        kubeconfig_file, server_url="https://127.0.0.1:1", ca_pem=creds.ca_cert_pem, token="t"
    )
    assert kubeconfig_file.stat().st_ino != before
    assert _mode(kubeconfig_file) == 0o600
    import yaml

    config = yaml.safe_load(kubeconfig_file.read_text())
    assert config["current-context"] == "kubeloop"
    assert [u["name"] for u in config["users"]] == ["kubeloop"]
    assert config["contexts"][0]["context"]["namespace"] == "default"


@pytest.mark.parametrize("context", ["kubeloop", "kubeloop-cert"])
def test_official_client_loads_kubeconfig(kubeconfig_file: pathlib.Path, context: str) -> None:
    kubernetes = pytest.importorskip("kubernetes")
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(
        config_file=str(kubeconfig_file), context=context, client_configuration=configuration
    )
    with kubernetes.client.ApiClient(configuration) as api_client:
        info = kubernetes.client.VersionApi(api_client).get_code()
    assert (info.major, info.minor, info.git_version) == ("1", "33", "v1.33.0")


def _kubectl() -> str:
    return str(newest_kubectl())


@pytest.mark.kubectl
@pytest.mark.parametrize("context", ["kubeloop", "kubeloop-cert"])
def test_kubectl_reads_server_version(
    kubeconfig_file: pathlib.Path, tmp_path: pathlib.Path, context: str
) -> None:
    kubectl = _kubectl()
    result = subprocess.run(
        [kubectl, "--kubeconfig", str(kubeconfig_file), "--context", context, "version", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=kubectl_env(tmp_path),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    server_version = json.loads(result.stdout)["serverVersion"]
    assert server_version["gitVersion"] == "v1.33.0"
    assert (server_version["major"], server_version["minor"]) == ("1", "33")


@pytest.mark.kubectl
def test_kubectl_reports_unauthorized(
    tmp_path: pathlib.Path, server: TLSApp, creds: certs.ServerCredentials
) -> None:
    kubectl = _kubectl()
    path = tmp_path / "kubeconfig"
    kubeconfig.write_kubeconfig(path, server_url=server.url, ca_pem=creds.ca_cert_pem, token="not-the-token")
    result = subprocess.run(
        [kubectl, "--kubeconfig", str(path), "version", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=kubectl_env(tmp_path),
        check=False,
    )
    assert result.returncode != 0
    # kubectl version reads /version raw, so client-go words the 401 itself (the Status body is
    # used by the typed calls).
    assert "You must be logged in to the server" in result.stderr
