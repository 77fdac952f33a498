"""Where the API server is and how to reach it: kubeconfig files (merged the kubectl way),
in-cluster service-account configuration, and the TLS context for a connection.

``load_config()`` picks like kubectl and client-go: an explicit path, else ``$KUBECONFIG`` (a
list of files merged: the first file that defines a cluster, user or context name wins, and the
first that sets current-context), else ``~/.kube/config``, else the in-cluster service account.
Relative paths in a file are relative to that file. Bad or missing configuration raises
``ConfigError`` naming the file and field.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubeloop import __version__
from kubeloop.client.credentials import (
    CredentialError,
    Credentials,
    CredentialSource,
    StaticCredentials,
    TokenFileCredentials,
)
from kubeloop.client.execplugin import ClusterInfo, ExecConfig, ExecCredentials

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


@dataclass(frozen=True)
class ClientConfig:
    server: str  # "https://host:port", no trailing slash
    namespace: str = "default"
    ca_pem: bytes | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    proxy_url: str | None = None
    credentials: CredentialSource | None = None
    user_agent: str = USER_AGENT
    qps: float | None = None  # client-side rate limiting off by default
    burst: int = 10


# ---------------------------------------------------------------------------- kubeconfig


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


def load_config(path: str | os.PathLike[str] | None = None, *, context: str | None = None) -> ClientConfig:
    """An explicit kubeconfig, else $KUBECONFIG, else ~/.kube/config, else in-cluster."""
    if path is not None or os.environ.get("KUBECONFIG") or _default_kubeconfig().exists():
        return load_kubeconfig(path, context=context)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster_config()
    raise ConfigError(
        f"no configuration: no kubeconfig at {_default_kubeconfig()}, $KUBECONFIG unset, and not in a cluster"
    )


def load_kubeconfig(
    path: str | os.PathLike[str] | None = None, *, context: str | None = None
) -> ClientConfig:
    """The client configuration of ``context`` (default: current-context) of the kubeconfig(s)."""
    if path is not None:
        files = [Path(path)]
        if not files[0].exists():
            raise ConfigError(f"the kubeconfig {files[0]} does not exist")
    elif os.environ.get("KUBECONFIG"):
        listed = [Path(p) for p in os.environ["KUBECONFIG"].split(os.pathsep) if p]
        files = [p for p in listed if p.exists()]
        if not files:
            raise ConfigError(f"none of the files in $KUBECONFIG exists: {os.environ['KUBECONFIG']}")
    else:
        files = [_default_kubeconfig()]
        if not files[0].exists():
            raise ConfigError(f"the kubeconfig {files[0]} does not exist")
    merged = _merge(files)
    name = context or merged.current_context
    if not name:
        raise ConfigError(f"no current-context in {_names(merged.files)} and no context given")
    context_entry = merged.contexts.get(name)
    if context_entry is None:
        raise ConfigError(f'context "{name}" is not in {_names(merged.files)}')
    ctx = context_entry.body
    cluster_name = str(ctx.get("cluster") or "")
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


def _default_kubeconfig() -> Path:
    return Path.home() / ".kube" / "config"


def _names(files: list[Path]) -> str:
    return ", ".join(str(f) for f in files)


def _merge(files: list[Path]) -> _Merged:
    merged = _Merged({}, {}, {}, "", files)
    for file in files:
        try:
            document = yaml.safe_load(file.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read the kubeconfig {file}: {exc}") from None
        if not isinstance(document, Mapping):
            raise ConfigError(f"the kubeconfig {file} is not a mapping")
        for section, target, inner in (
            ("clusters", merged.clusters, "cluster"),
            ("users", merged.users, "user"),
            ("contexts", merged.contexts, "context"),
        ):
            for item in document.get(section) or ():
                if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                    raise ConfigError(f"{file}: every entry of {section} needs a name")
                body = item.get(inner) or {}
                if not isinstance(body, Mapping):
                    raise ConfigError(f'{file}: {section} entry "{item["name"]}" has no {inner} mapping')
                target.setdefault(item["name"], _Entry(body, file))  # the first file wins
        if not merged.current_context and document.get("current-context"):
            merged.current_context = str(document["current-context"])
    return merged


def _client_config(
    context_name: str, ctx: Mapping[str, Any], cluster: _Entry, user: _Entry | None
) -> ClientConfig:
    c = cluster.body
    where = f'{cluster.source}: cluster for context "{context_name}"'
    server = c.get("server")
    if not isinstance(server, str) or not server:
        raise ConfigError(f"{where}: server is required")
    ca_pem = _data_or_file(c, "certificate-authority-data", "certificate-authority", cluster.source, where)
    insecure = bool(c.get("insecure-skip-tls-verify"))
    if insecure and ca_pem:
        raise ConfigError(f"{where}: certificate-authority and insecure-skip-tls-verify cannot both be set")
    tls_server_name = c.get("tls-server-name") or None
    proxy_url = c.get("proxy-url") or None
    credentials: CredentialSource | None = None
    if user is not None:
        cluster_info = ClusterInfo(
            server=server.rstrip("/"),
            ca_pem=ca_pem,
            tls_server_name=tls_server_name,
            insecure_skip_tls_verify=insecure,
            proxy_url=proxy_url,
            extension=_exec_extension(c),
        )
        credentials = _credentials(user, cluster_info, f'{user.source}: user for context "{context_name}"')
    return ClientConfig(
        server=server.rstrip("/"),
        namespace=str(ctx.get("namespace") or "default"),
        ca_pem=ca_pem,
        insecure_skip_tls_verify=insecure,
        tls_server_name=str(tls_server_name) if tls_server_name else None,
        proxy_url=str(proxy_url) if proxy_url else None,
        credentials=credentials,
    )


def _exec_extension(cluster: Mapping[str, Any]) -> Any:
    for extension in cluster.get("extensions") or ():
        if isinstance(extension, Mapping) and extension.get("name") == "client.authentication.k8s.io/exec":
            return extension.get("extension")
    return None


def _credentials(user: _Entry, cluster: ClusterInfo, where: str) -> CredentialSource | None:
    u = user.body
    if u.get("username") or u.get("password"):
        raise ConfigError(f"{where}: basic authentication (username/password) is not supported")
    if u.get("auth-provider"):
        name = (
            u["auth-provider"].get("name") if isinstance(u["auth-provider"], Mapping) else u["auth-provider"]
        )
        raise ConfigError(f'{where}: the legacy auth-provider "{name}" is not supported; use an exec plugin')
    if u.get("as") or u.get("as-groups") or u.get("as-uid"):
        raise ConfigError(f"{where}: impersonation (as, as-groups, as-uid) is not supported")
    cert = _data_or_file(u, "client-certificate-data", "client-certificate", user.source, where)
    key = _data_or_file(u, "client-key-data", "client-key", user.source, where)
    if (cert is None) != (key is None):
        raise ConfigError(f"{where}: client-certificate and client-key must be set together")
    certificate = Credentials(client_cert_pem=cert, client_key_pem=key)
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
    token_file = u.get("tokenFile")
    if token_file:
        return TokenFileCredentials(_resolve(str(token_file), user.source), certificate=certificate)
    token = u.get("token")
    if token or cert:
        return StaticCredentials(
            Credentials(token=str(token) if token else None, client_cert_pem=cert, client_key_pem=key)
        )
    return None


def _data_or_file(
    entry: Mapping[str, Any], data_key: str, file_key: str, source: Path, where: str
) -> bytes | None:
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
            raise ConfigError(f"{where}: cannot read {file_key} {resolved}: {exc}") from None
    return None


def _resolve(path: str, source: Path) -> Path:
    candidate = Path(os.path.expanduser(path))
    return candidate if candidate.is_absolute() else source.parent / candidate


# ---------------------------------------------------------------------------- in-cluster


def in_cluster_config(
    *, root: Path = SERVICE_ACCOUNT_DIR, environ: Mapping[str, str] = os.environ
) -> ClientConfig:
    """The pod's service account: KUBERNETES_SERVICE_HOST/PORT, its token (re-read), CA and namespace."""
    host = environ.get("KUBERNETES_SERVICE_HOST")
    port = environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError(
            "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set"
        )
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    token = root / "token"
    if not token.exists():
        raise ConfigError(f"the service-account token {token} does not exist")
    try:
        ca_pem = (root / "ca.crt").read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the service-account CA {root / 'ca.crt'}: {exc}") from None
    namespace_file = root / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.exists() else "default"
    return ClientConfig(
        server=f"https://{host}:{port}",
        namespace=namespace or "default",
        ca_pem=ca_pem,
        credentials=TokenFileCredentials(token),
    )


# ---------------------------------------------------------------------------- TLS


def ssl_context(config: ClientConfig, credentials: Credentials) -> ssl.SSLContext | None:
    """The TLS context for ``config`` presenting ``credentials``' client certificate; None for http."""
    if config.server.startswith("http://"):
        return None
    context = ssl.create_default_context(cadata=config.ca_pem.decode() if config.ca_pem else None)
    if config.insecure_skip_tls_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if credentials.client_cert_pem and credentials.client_key_pem:
        # The ssl module loads certificates from files only: write them where no one else can
        # read, load them, and remove them at once.
        with tempfile.TemporaryDirectory(prefix="kubeloop-tls-") as private:
            cert_file = Path(private) / "client.crt"
            key_file = Path(private) / "client.key"
            cert_file.write_bytes(credentials.client_cert_pem)
            key_file.touch(mode=0o600)
            key_file.write_bytes(credentials.client_key_pem)
            try:
                context.load_cert_chain(cert_file, key_file)
            except ssl.SSLError as exc:
                raise ConfigError(f"the client certificate or key is not valid PEM: {exc}") from None
    return context
