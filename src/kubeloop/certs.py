"""kubeloop's certificates: the embedded server's PKI — a private CA, the serving certificate,
client certificates, the admin token — and the TLS contexts built from them; the webhook server
uses the same for its development certificate and its serving context.

Where it sits in the flow: ``kubectl`` → **TLS (this module) + authentication** → API handlers.
A data directory keeps the PKI across restarts (``ca.crt``, ``ca.key``,
``apiserver.crt``, ``apiserver.key``, ``admin.token``; secrets are mode 0600), so a kubeconfig
written once keeps working; without one everything lives in memory.

Keys are EC P-256, far cheaper to generate than RSA keys, so a fresh server starts at once. ``cryptography`` is imported on first
use, so importing the server does not pay for it.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import pathlib
import secrets
import ssl
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

CA_COMMON_NAME = "kubeloop-ca"
CA_VALIDITY = datetime.timedelta(days=3650)
SERVER_VALIDITY = datetime.timedelta(days=365)
#: A serving certificate this close to expiry is reissued at start-up.
RENEW_BEFORE = datetime.timedelta(days=30)
#: Tolerated clock skew between this host and its clients.
BACKDATE = datetime.timedelta(hours=1)
#: Names every serving certificate covers, whatever host the server binds.
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")

CA_CERT_FILE = "ca.crt"
CA_KEY_FILE = "ca.key"
SERVER_CERT_FILE = "apiserver.crt"
SERVER_KEY_FILE = "apiserver.key"
TOKEN_FILE = "admin.token"


@dataclass(frozen=True)
class ServerCredentials:
    """Everything the server needs to serve TLS and to recognise its administrator."""

    ca_cert_pem: bytes
    ca_key_pem: bytes
    server_cert_pem: bytes
    server_key_pem: bytes
    admin_token: str

    def __repr__(self) -> str:  # never print secrets in logs or tracebacks
        return "ServerCredentials(<redacted>)"


# --------------------------------------------------------------------------- public API


def load_or_create_credentials(directory: pathlib.Path | None, hosts: Sequence[str]) -> ServerCredentials:
    """Reuse the PKI found in ``directory`` and create what is missing; in memory when None.

    The CA is recreated when its certificate or key is missing, unreadable or expired (which
    invalidates the serving certificate too); the serving certificate is reissued when it is
    missing, not signed by the CA, close to expiry, or its SANs do not cover every host in
    ``hosts`` plus localhost, 127.0.0.1 and ::1. The token is kept as long as its file exists.
    """
    wanted = _normalise_hosts(hosts)
    if directory is None:
        ca_cert_pem, ca_key_pem = _new_ca()
        server_cert_pem, server_key_pem = _new_server_cert(ca_cert_pem, ca_key_pem, wanted)
        return ServerCredentials(ca_cert_pem, ca_key_pem, server_cert_pem, server_key_pem, _new_token())

    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    now = _now()

    found_ca_cert = _read(directory / CA_CERT_FILE)
    found_ca_key = _read(directory / CA_KEY_FILE, secret=True)
    ca_created = False
    if (
        found_ca_cert is not None
        and found_ca_key is not None
        and _ca_usable(found_ca_cert, found_ca_key, now)
    ):
        ca_cert_pem, ca_key_pem = found_ca_cert, found_ca_key
    else:
        ca_cert_pem, ca_key_pem = _new_ca()
        ca_created = True
        write_file_atomically(directory / CA_KEY_FILE, ca_key_pem, secret=True)
        write_file_atomically(directory / CA_CERT_FILE, ca_cert_pem)

    found_cert = _read(directory / SERVER_CERT_FILE)
    found_key = _read(directory / SERVER_KEY_FILE, secret=True)
    if (
        not ca_created
        and found_cert is not None
        and found_key is not None
        and _server_cert_usable(found_cert, found_key, ca_cert_pem, wanted, now)
    ):
        server_cert_pem, server_key_pem = found_cert, found_key
    else:
        server_cert_pem, server_key_pem = _new_server_cert(ca_cert_pem, ca_key_pem, wanted)
        write_file_atomically(directory / SERVER_KEY_FILE, server_key_pem, secret=True)
        write_file_atomically(directory / SERVER_CERT_FILE, server_cert_pem)

    token_bytes = _read(directory / TOKEN_FILE, secret=True)
    token = token_bytes.decode("ascii", "replace").strip() if token_bytes is not None else ""
    if not token:
        token = _new_token()
        write_file_atomically(directory / TOKEN_FILE, token.encode("ascii") + b"\n", secret=True)

    return ServerCredentials(ca_cert_pem, ca_key_pem, server_cert_pem, server_key_pem, token)


def issue_client_certificate(
    creds: ServerCredentials, user: str, groups: Sequence[str], days: int = 365
) -> tuple[bytes, bytes]:
    """A client certificate the server authenticates as ``user`` in ``groups``: ``(cert_pem, key_pem)``.

    Subject CN = user, one O per group (kube-apiserver's x509 authenticator convention),
    extended key usage clientAuth, signed by the server's CA.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if not user:
        raise ValueError("a client certificate needs a user name")
    if days <= 0:
        raise ValueError("days must be positive")
    ca_cert, ca_key = _load_ca(creds.ca_cert_pem, creds.ca_key_pem)
    key = ec.generate_private_key(ec.SECP256R1())
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
    now = _now()
    builder = (
        _leaf_builder(x509.Name(attributes), ca_cert, key, now, datetime.timedelta(days=days))
        .add_extension(_leaf_key_usage(), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    )
    cert = _sign(builder, ca_key)
    return _cert_pem(cert), _key_pem(key)


def server_ssl_context(creds: ServerCredentials) -> ssl.SSLContext:
    """TLS ≥ 1.2 server context: serves the server certificate; client certificates are
    optional but, when presented, must verify against the CA (else the handshake fails)."""
    context = serving_context()
    load_pair(context, creds.server_cert_pem, creds.server_key_pem)
    context.load_verify_locations(cadata=creds.ca_cert_pem.decode("ascii"))
    context.verify_mode = ssl.CERT_OPTIONAL
    return context


def serving_context() -> ssl.SSLContext:
    """A TLS ≥ 1.2 server context with no certificate yet (``load_pair`` gives it one)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION
    # aiohttp speaks HTTP/1.1 only; say so, so that h2-capable clients (kubectl) do not ask twice.
    context.set_alpn_protocols(["http/1.1"])
    return context


def load_pair(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """Serve ``cert_pem`` with ``key_pem`` from ``context`` (new connections use it at once);
    ssl.SSLError when they do not belong together."""
    _load_cert_chain(context, cert_pem, key_pem)


def client_ssl_context(
    ca_pem: bytes, cert_pem: bytes | None = None, key_pem: bytes | None = None
) -> ssl.SSLContext:
    """TLS ≥ 1.2 client context trusting ``ca_pem`` (hostname checked), with an optional
    client certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_verify_locations(cadata=ca_pem.decode("ascii"))
    if (cert_pem is None) != (key_pem is None):
        raise ValueError("give both cert_pem and key_pem, or neither")
    if cert_pem is not None and key_pem is not None:
        _load_cert_chain(context, cert_pem, key_pem)
    return context


# --------------------------------------------------------------------------- creation


def _new_token() -> str:
    return secrets.token_urlsafe(32)


def _new_ca() -> tuple[bytes, bytes]:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_COMMON_NAME)])
    now = _now()
    public_key = key.public_key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )
    cert = _sign(builder, key)
    return _cert_pem(cert), _key_pem(key)


def _new_server_cert(ca_cert_pem: bytes, ca_key_pem: bytes, hosts: Sequence[str]) -> tuple[bytes, bytes]:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_cert, ca_key = _load_ca(ca_cert_pem, ca_key_pem)
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        address = _ip(host)
        names.append(x509.IPAddress(address) if address is not None else x509.DNSName(host))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubeloop-apiserver")])
    builder = (
        _leaf_builder(subject, ca_cert, key, _now(), SERVER_VALIDITY)
        .add_extension(_leaf_key_usage(), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
    )
    cert = _sign(builder, ca_key)
    return _cert_pem(cert), _key_pem(key)


def _leaf_builder(
    subject: x509.Name,
    ca_cert: x509.Certificate,
    key: ec.EllipticCurvePrivateKey,
    now: datetime.datetime,
    validity: datetime.timedelta,
) -> x509.CertificateBuilder:
    from cryptography import x509

    public_key = key.public_key()
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(min(now + validity, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
    )


def _leaf_key_usage() -> x509.KeyUsage:
    from cryptography import x509

    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


def _sign(builder: x509.CertificateBuilder, key: ec.EllipticCurvePrivateKey) -> x509.Certificate:
    from cryptography.hazmat.primitives import hashes

    return builder.sign(key, hashes.SHA256())


def _cert_pem(cert: x509.Certificate) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


# --------------------------------------------------------------------------- reuse checks


def _load_ca(ca_cert_pem: bytes, ca_key_pem: bytes) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    cert = x509.load_pem_x509_certificate(ca_cert_pem)
    key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key must be an EC key")
    return cert, key


def _ca_usable(ca_cert_pem: bytes, ca_key_pem: bytes, now: datetime.datetime) -> bool:
    """Whether the CA found on disk is complete, consistent and valid for a while yet."""
    from cryptography import x509

    try:
        cert, key = _load_ca(ca_cert_pem, ca_key_pem)
        cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except (ValueError, TypeError, x509.ExtensionNotFound):
        return False
    return (
        constraints.ca
        and cert.public_key() == key.public_key()
        and cert.not_valid_after_utc - RENEW_BEFORE > now
    )


def _server_cert_usable(
    cert_pem: bytes, key_pem: bytes, ca_cert_pem: bytes, hosts: Sequence[str], now: datetime.datetime
) -> bool:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization

    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
        ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
        cert.verify_directly_issued_by(ca_cert)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        return False
    if cert.public_key() != key.public_key():
        return False
    if cert.not_valid_after_utc - RENEW_BEFORE <= now:
        return False
    ips = set(sans.get_values_for_type(x509.IPAddress))
    dns = {name.lower() for name in sans.get_values_for_type(x509.DNSName)}
    for host in hosts:
        address = _ip(host)
        if address is not None:
            if address not in ips:
                return False
        elif host.lower() not in dns:
            return False
    return True


# --------------------------------------------------------------------------- helpers


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0)


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _normalise_hosts(hosts: Sequence[str]) -> list[str]:
    """The hosts plus the loopback names, without brackets, zone ids, blanks or duplicates."""
    out: list[str] = []
    seen: set[str] = set()
    for raw in (*hosts, *DEFAULT_HOSTS):
        host = raw.strip()
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        host = host.split("%", 1)[0]  # fe80::1%eth0: the zone is not part of a SAN
        if not host or host in ("0.0.0.0", "::"):
            continue
        address = _ip(host)
        key = str(address) if address is not None else host.lower().rstrip(".")
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


@dataclass(frozen=True)
class ServingCertificate:
    """A CA and a serving certificate it signed (a webhook server's, kept in a Secret)."""

    ca_cert_pem: bytes
    ca_key_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def __repr__(self) -> str:
        return "ServingCertificate(<redacted>)"

    def ca_usable(self) -> bool:
        """The CA is whole, consistent and not within ``RENEW_BEFORE`` of expiry."""
        return _ca_usable(self.ca_cert_pem, self.ca_key_pem, _now())

    def usable_for(self, hosts: Sequence[str]) -> bool:
        """Whether it can serve ``hosts`` for a while yet: the CA usable, the certificate signed
        by it, matching its key, covering every host and not within ``RENEW_BEFORE`` of expiry."""
        now = _now()
        return _ca_usable(self.ca_cert_pem, self.ca_key_pem, now) and _server_cert_usable(
            self.cert_pem, self.key_pem, self.ca_cert_pem, hosts, now
        )


def issue_serving_certificate(
    hosts: Sequence[str], *, ca: tuple[bytes, bytes] | None = None
) -> ServingCertificate:
    """A serving certificate for ``hosts`` signed by ``ca`` (certificate and key, PEM), or by a
    new CA when None."""
    ca_cert_pem, ca_key_pem = ca if ca is not None else _new_ca()
    cert_pem, key_pem = _new_server_cert(ca_cert_pem, ca_key_pem, list(hosts))
    return ServingCertificate(ca_cert_pem, ca_key_pem, cert_pem, key_pem)


def _read(path: pathlib.Path, *, secret: bool = False) -> bytes | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if secret:
        with contextlib.suppress(OSError):
            if path.stat().st_mode & 0o077:
                path.chmod(0o600)
    return data or None


def write_file_atomically(path: pathlib.Path, data: bytes, *, secret: bool = False) -> None:
    """Write atomically (temporary file in the same directory, then rename, then fsync the
    directory); secrets are 0600 from creation on (mkstemp), other files 0644."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            if not secret:
                os.fchmod(handle.fileno(), 0o644)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


@contextlib.contextmanager
def _pem_files(cert_pem: bytes, key_pem: bytes) -> Iterator[tuple[str, str]]:
    """The certificate and key as files in a private (0700) temporary directory, deleted on exit."""
    with tempfile.TemporaryDirectory(prefix="kubeloop-tls-") as folder:
        cert_path = os.path.join(folder, "tls.crt")
        key_path = os.path.join(folder, "tls.key")
        for path, data in ((cert_path, cert_pem), (key_path, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        yield cert_path, key_path


def _load_cert_chain(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    with _pem_files(cert_pem, key_pem) as (cert_path, key_path):
        context.load_cert_chain(cert_path, key_path)
