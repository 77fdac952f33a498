"""Where the API server is and how to reach it: kubeconfig files (merged the kubectl way),
in-cluster service-account configuration, and the TLS context for a connection.

``load_config()`` picks like kubectl and client-go: an explicit path, else ``$KUBECONFIG`` (a
list of files merged: the first file that defines a cluster, user or context name wins, and the
first that sets current-context), else ``~/.kube/config``, else the in-cluster service account.
Relative paths in a file are relative to that file. Bad or missing configuration raises
``ConfigError`` naming the file and field.

Credentials come from the context's user: a static token or client certificate, a token file
(re-read), or an exec plugin (``execplugin``); they are used only over https, as client-go does.

    config = load_config(context="staging")
    async with Client(config) as client:   # kubeloop.client.rest
        ...
"""

from __future__ import annotations

import base64
import os
import socket
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

import yaml

from kubeloop.client.credentials import (
    CredentialError,
    Credentials,
    CredentialSource,
    StaticCredentials,
    TokenFileCredentials,
    read_token_file,
)
from kubeloop.client.execplugin import CLUSTER_EXTENSION, ClusterInfo, ExecConfig, ExecCredentials
from kubeloop.containerpath import container_path
from kubeloop.version import __version__

__all__ = [
    "ClientConfig",
    "ConfigError",
    "CredentialSource",
    "Credentials",
    "in_cluster_config",
    "load_config",
    "load_kubeconfig",
    "ssl_context",
]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
USER_AGENT = f"kubeloop/{__version__} (python)"


class ConfigError(Exception):
    """The configuration is missing or wrong; the message names the file and field."""


#: A connection to the server, already open (``ClientConfig.dial``).
Dial = Callable[[], Awaitable[socket.socket]]


@dataclass(frozen=True)
class ClientConfig:
    """How to reach one API server (client-go ``rest.Config``)."""

    server: str
    """``https://host:port`` (a path prefix allowed), no trailing slash. client-go: ``Host``."""
    namespace: str = "default"
    """The context's namespace, or the pod's in a cluster; used when a call names none."""
    ca_pem: bytes | None = None
    """CA certificates (PEM) the server's certificate is verified with; None: the system's."""
    insecure_skip_tls_verify: bool = False
    """Do not verify the server's certificate (``insecure-skip-tls-verify``)."""
    tls_server_name: str | None = None
    """The name the server certificate is checked against and sent as SNI (``tls-server-name``)."""
    proxy_url: str | None = None
    """An http(s) proxy for every request (``proxy-url``)."""
    credentials: CredentialSource | None = None
    """Token / token file / client certificate / exec plugin; None: anonymous."""
    user_agent: str = USER_AGENT
    """The User-Agent header (client-go: ``<binary>/<version> (<os>/<arch>) kubernetes/<commit>``)."""
    qps: float | None = None
    """Client-side rate limit in requests per second; None (default): off, as since client-go
    1.29 where API Priority and Fairness on the server does the limiting."""
    burst: int = 10
    """Requests allowed at once above ``qps`` (client-go default 10)."""
    dial: Dial | None = None
    """How to connect instead of TCP to the server's host and port (client-go: ``Dial``): an
    in-process server's ``APIServer.dial`` hands back one end of a socket pair."""

    def with_token(self, token: str) -> ClientConfig:
        """The same server, CA and settings, authenticating with the bearer ``token`` instead
        (client-go: a ``rest.Config`` with ``BearerToken``) — how a test acts as a ServiceAccount
        whose token it asked for."""
        return replace(self, credentials=StaticCredentials(Credentials(token=token)))


# ---------------------------------------------------------------------------- loading


def load_config(path: str | os.PathLike[str] | None = None, *, context: str | None = None) -> ClientConfig:
    """An explicit kubeconfig, else $KUBECONFIG, else ~/.kube/config, else in-cluster."""
    if path is not None or os.environ.get("KUBECONFIG") or _default_kubeconfig().exists():
        return load_kubeconfig(path, context=context)
    if os.environ.get("KUBERNETES_SERVICE_HOST") and os.environ.get("KUBERNETES_SERVICE_PORT"):
        return in_cluster_config()
    raise ConfigError(
        f"no configuration: no kubeconfig at {_default_kubeconfig()}, $KUBECONFIG unset, "
        "and not in a cluster (KUBERNETES_SERVICE_HOST/PORT unset)"
    )


def load_kubeconfig(
    path: str | os.PathLike[str] | None = None, *, context: str | None = None
) -> ClientConfig:
    """The client configuration of ``context`` (default: current-context) of the kubeconfig(s):
    ``path``, else the files listed in ``$KUBECONFIG`` (missing ones skipped), else ~/.kube/config."""
    if path is not None:
        files = [Path(os.path.expanduser(os.fspath(path)))]
        if not files[0].is_file():
            raise ConfigError(f"the kubeconfig {files[0]} does not exist")
    elif os.environ.get("KUBECONFIG"):
        listed = list(dict.fromkeys(p for p in os.environ["KUBECONFIG"].split(os.pathsep) if p))
        files = [Path(p) for p in listed if Path(p).is_file()]
        if not files:
            raise ConfigError(f"none of the files in $KUBECONFIG exists: {os.environ['KUBECONFIG']}")
    else:
        files = [_default_kubeconfig()]
        if not files[0].is_file():
            raise ConfigError(f"the kubeconfig {files[0]} does not exist")
    merged = _merge([Path(os.path.abspath(f)) for f in files])
    name = context or merged.current_context
    if not name:
        raise ConfigError(f"no current-context in {_names(merged.files)} and no context given")
    context_entry = merged.contexts.get(name)
    if context_entry is None:
        raise ConfigError(f'context "{name}" is not in {_names(merged.files)}')
    ctx = context_entry.body
    cluster_name = str(ctx.get("cluster") or "")
    if not cluster_name:
        raise ConfigError(f'{context_entry.source}: context "{name}" names no cluster')
    cluster_entry = merged.clusters.get(cluster_name)
    if cluster_entry is None:
        raise ConfigError(
            f'context "{name}" refers to cluster "{cluster_name}", which is not in {_names(merged.files)}'
        )
    user_name = str(ctx.get("user") or "")
    user_entry = merged.users.get(user_name) if user_name else None
    if user_name and user_entry is None:
        raise ConfigError(
            f'context "{name}" refers to user "{user_name}", which is not in {_names(merged.files)}'
        )
    return _client_config(name, ctx, cluster_entry, user_entry)


@dataclass
class _Entry:
    """A named cluster/user/context entry and the file it came from (for relative paths)."""

    body: Mapping[str, Any]
    source: Path


@dataclass
class _Merged:
    clusters: dict[str, _Entry]
    users: dict[str, _Entry]
    contexts: dict[str, _Entry]
    current_context: str
    files: list[Path]


def _default_kubeconfig() -> Path:
    return Path.home() / ".kube" / "config"


def _names(files: list[Path]) -> str:
    return ", ".join(str(f) for f in files)


def _merge(files: list[Path]) -> _Merged:
    """client-go's loader: for named entries the first file wins; current-context from the
    first file that sets one."""
    merged = _Merged({}, {}, {}, "", files)
    for file in files:
        try:
            document = yaml.safe_load(file.read_text()) or {}
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            raise ConfigError(f"the kubeconfig {file} is not YAML: {exc.problem}{where}") from None
        except OSError as exc:
            raise ConfigError(f"cannot read the kubeconfig {file}: {exc.strerror or exc}") from None
        except (UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read the kubeconfig {file}: {exc}") from None
        if not isinstance(document, Mapping):
            raise ConfigError(f"the kubeconfig {file} is not a mapping")
        for section, target, inner in (
            ("clusters", merged.clusters, "cluster"),
            ("users", merged.users, "user"),
            ("contexts", merged.contexts, "context"),
        ):
            entries = document.get(section) or []
            if not isinstance(entries, list):
                raise ConfigError(f"{file}: {section} must be a list")
            for item in entries:
                if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item["name"]:
                    raise ConfigError(f"{file}: every entry of {section} needs a name")
                body = item.get(inner) or {}
                if not isinstance(body, Mapping):
                    raise ConfigError(f'{file}: {section} entry "{item["name"]}" has no {inner} mapping')
                target.setdefault(item["name"], _Entry(body, file))
        current = document.get("current-context")
        if not merged.current_context and current:
            merged.current_context = str(current)
    return merged


# ---------------------------------------------------------------------------- one context


def _client_config(
    context_name: str, ctx: Mapping[str, Any], cluster: _Entry, user: _Entry | None
) -> ClientConfig:
    c = cluster.body
    where = f'{cluster.source}: cluster for context "{context_name}"'
    ca_pem = _data_or_file(c, "certificate-authority-data", "certificate-authority", cluster.source, where)
    insecure = bool(c.get("insecure-skip-tls-verify"))
    if insecure and ca_pem:
        raise ConfigError(f"{where}: certificate-authority and insecure-skip-tls-verify cannot both be set")
    tls_server_name = str(c.get("tls-server-name") or "") or None
    proxy_url = _proxy_url(c.get("proxy-url"), where)
    server = _server_url(c.get("server"), where, tls=bool(ca_pem or insecure or tls_server_name))
    credentials: CredentialSource | None = None
    # Like client-go, present credentials only over TLS: a plain-http server gets none.
    if user is not None and server.startswith("https://"):
        cluster_info = ClusterInfo(
            server=server,
            ca_pem=ca_pem,
            tls_server_name=tls_server_name,
            insecure_skip_tls_verify=insecure,
            proxy_url=proxy_url,
            extension=_exec_extension(c),
        )
        credentials = _credentials(user, cluster_info, f'{user.source}: user for context "{context_name}"')
    return ClientConfig(
        server=server,
        namespace=str(ctx.get("namespace") or "default"),
        ca_pem=ca_pem,
        insecure_skip_tls_verify=insecure,
        tls_server_name=tls_server_name,
        proxy_url=proxy_url,
        credentials=credentials,
    )


def _server_url(server: Any, where: str, *, tls: bool) -> str:
    """The server URL without a trailing slash. A bare ``host:port`` gets https when TLS settings
    are present, http otherwise (client-go's DefaultServerURL)."""
    if not isinstance(server, str) or not server:
        raise ConfigError(f"{where}: server is required")
    if "://" not in server:
        server = f"{'https' if tls else 'http'}://{server}"
    parts = urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{where}: server {server!r} is not an http(s) URL")
    return f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")  # query and fragment dropped


def _proxy_url(proxy: Any, where: str) -> str | None:
    if not proxy:
        return None
    parts = urlsplit(str(proxy))
    if parts.scheme == "socks5":
        raise ConfigError(f"{where}: proxy-url {proxy!r}: socks5 proxies are not supported (http/https are)")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where}: proxy-url {proxy!r} is not an http(s) URL")
    return str(proxy)


def _exec_extension(cluster: Mapping[str, Any]) -> Any:
    for extension in cluster.get("extensions") or ():
        if isinstance(extension, Mapping) and extension.get("name") == CLUSTER_EXTENSION:
            return extension.get("extension")
    return None


def _credentials(user: _Entry, cluster: ClusterInfo, where: str) -> CredentialSource | None:
    """The user's credential source. As in client-go, a token, token file or client certificate
    in the kubeconfig takes precedence over an exec plugin."""
    u = user.body
    if u.get("username") or u.get("password"):
        raise ConfigError(
            f"{where}: basic authentication (username/password) is not supported "
            "(Kubernetes removed it in 1.19); use a token, a client certificate or an exec plugin"
        )
    provider = u.get("auth-provider")
    if provider:
        name = provider.get("name") if isinstance(provider, Mapping) else provider
        raise ConfigError(
            f'{where}: the legacy auth-provider "{name}" is not supported; use its exec plugin '
            "(gke-gcloud-auth-plugin, kubelogin)"
        )
    if u.get("as") or u.get("as-groups") or u.get("as-uid") or u.get("as-user-extra"):
        raise ConfigError(f"{where}: impersonation (as, as-groups, as-uid, as-user-extra) is not supported")
    cert = _data_or_file(u, "client-certificate-data", "client-certificate", user.source, where)
    key = _data_or_file(u, "client-key-data", "client-key", user.source, where)
    if (cert is None) != (key is None):
        raise ConfigError(f"{where}: client-certificate and client-key must be set together")
    token = str(u.get("token") or "") or None
    token_file = u.get("tokenFile")
    if token_file:
        path = _resolve(str(token_file), user.source)
        if token is None:  # client-go reads it when loading (a static token stands in otherwise)
            try:
                read_token_file(path)
            except CredentialError as exc:
                raise ConfigError(f"{where}: tokenFile: {exc}") from None
        return TokenFileCredentials(
            path, fallback=token, certificate=Credentials(client_cert_pem=cert, client_key_pem=key)
        )
    if token or cert:
        return StaticCredentials(Credentials(token=token, client_cert_pem=cert, client_key_pem=key))
    exec_entry = u.get("exec")
    if exec_entry:
        if not isinstance(exec_entry, Mapping):
            raise ConfigError(f"{where}: exec must be a mapping")
        command = exec_entry.get("command")
        if isinstance(command, str) and os.sep in command and not os.path.isabs(command):
            exec_entry = {**exec_entry, "command": str(user.source.parent / command)}
        try:
            return ExecCredentials(ExecConfig.from_kubeconfig(exec_entry, cluster, where))
        except CredentialError as exc:
            raise ConfigError(str(exc)) from None
    return None


def _data_or_file(
    entry: Mapping[str, Any], data_key: str, file_key: str, source: Path, where: str
) -> bytes | None:
    """``<x>-data`` (base64; it wins when both are set, as in client-go) or the file ``<x>``."""
    data = entry.get(data_key)
    if data:
        try:
            return base64.b64decode(str(data), validate=True)
        except ValueError:
            raise ConfigError(f"{where}: {data_key} is not valid base64") from None
    path = entry.get(file_key)
    if path:
        resolved = _resolve(str(path), source)
        try:
            return resolved.read_bytes()
        except OSError as exc:
            raise ConfigError(f"{where}: cannot read {file_key} {resolved}: {exc.strerror or exc}") from None
    return None


def _resolve(path: str, source: Path) -> Path:
    """``path`` as written in the kubeconfig ``source``: relative to that file's directory."""
    candidate = Path(os.path.expanduser(path))
    return candidate if candidate.is_absolute() else source.parent / candidate


# ---------------------------------------------------------------------------- in-cluster


def in_cluster_config(*, root: Path | None = None, environ: Mapping[str, str] = os.environ) -> ClientConfig:
    """The pod's service account: KUBERNETES_SERVICE_HOST/PORT, its token (re-read as the
    kubelet rotates it), CA and namespace ($POD_NAMESPACE, else the namespace file). Its files
    are at ``root``, else at the usual path in the container (under
    ``$KUBELOOP_CONTAINER_ROOT`` on kubeloop's process node: :func:`kubeloop.container_path`)."""
    if root is None:
        root = container_path(SERVICE_ACCOUNT_DIR, environ=environ)
    host = environ.get("KUBERNETES_SERVICE_HOST")
    port = environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError(
            "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set"
        )
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address
    token = root / "token"
    try:
        read_token_file(token)
    except CredentialError as exc:
        raise ConfigError(f"in-cluster service account: {exc}") from None
    try:
        ca_pem = (root / "ca.crt").read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the service-account CA {root / 'ca.crt'}: {exc.strerror or exc}"
        ) from None
    namespace = environ.get("POD_NAMESPACE") or _read_stripped(root / "namespace") or "default"
    return ClientConfig(
        server=f"https://{host}:{port}",
        namespace=namespace,
        ca_pem=ca_pem,
        credentials=TokenFileCredentials(token),
    )


def _read_stripped(path: Path) -> str:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return ""


# ---------------------------------------------------------------------------- TLS


def ssl_context(config: ClientConfig, credentials: Credentials) -> ssl.SSLContext | None:
    """The TLS context for ``config`` presenting ``credentials``' client certificate; None for http.

    The server's certificate is verified against ``config.ca_pem`` (the system's CAs when None)
    unless ``insecure_skip_tls_verify``; TLS 1.2 at least. ``tls_server_name`` is the caller's to
    pass as ``server_hostname``.
    """
    if config.server.startswith("http://"):
        return None
    try:
        context = ssl.create_default_context(cadata=config.ca_pem.decode() if config.ca_pem else None)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"the certificate-authority data is not valid PEM: {exc}") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if config.insecure_skip_tls_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if credentials.client_cert_pem and credentials.client_key_pem:
        _load_client_certificate(context, credentials.client_cert_pem, credentials.client_key_pem)
    return context


def _load_client_certificate(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    # The ssl module loads certificates from files only: write them to a directory only this user
    # can enter (mkdtemp makes it 0700), load them, and remove them at once.
    with tempfile.TemporaryDirectory(prefix="kubeloop-tls-") as private:
        cert_file = Path(private) / "client.crt"
        key_file = Path(private) / "client.key"
        cert_file.write_bytes(cert_pem)
        key_file.touch(mode=0o600)
        key_file.write_bytes(key_pem)
        try:
            # An encrypted key would make OpenSSL prompt on the terminal; refuse it instead.
            context.load_cert_chain(cert_file, key_file, password=_no_password)
        except ssl.SSLError as exc:
            raise ConfigError(f"the client certificate or key is not valid PEM: {exc}") from None


def _no_password() -> NoReturn:
    raise ConfigError("the client key is encrypted; an unencrypted key is needed (as for kubectl)")
