"""Client configuration: kubeconfig merging, contexts, every ConfigError, the choice of credential
source, load_config's order, in-cluster config, and TLS against the real server."""

from __future__ import annotations

import base64
import contextlib
import os
import pathlib
import ssl
from typing import Any

import aiohttp
import pytest
from cryptography.hazmat.primitives import serialization

from kubeloop import certs
from kubeloop.client.config import (
    ClientConfig,
    ConfigError,
    in_cluster_config,
    load_config,
    load_kubeconfig,
)
from kubeloop.client.config import ssl_context as make_ssl_context
from kubeloop.client.credentials import Credentials, StaticCredentials, TokenFileCredentials
from kubeloop.client.execplugin import ExecCredentials
from tests.client.kubeconfigs import kubeconfig, single, token_of, write
from tests.conftest import ServerThread

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
HTTPS = {"server": "https://x.example"}

# ---------------------------------------------------------------------------- merging


async def test_kubeconfig_list_merges_first_wins_and_resolves_relative_paths(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "ca.crt").write_bytes(b"CA-OF-A")
    (tmp_path / "a" / "pki").mkdir()
    (tmp_path / "a" / "pki" / "carol.crt").write_bytes(b"CAROL-CERT")
    (tmp_path / "a" / "pki" / "carol.key").write_bytes(b"CAROL-KEY")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "token").write_text("token-from-b-file\n")
    (tmp_path / "b" / "ca.crt").write_bytes(b"CA-OF-B")
    first = write(
        tmp_path / "a" / "config",
        kubeconfig(
            {"prod": {"server": "https://prod.example:6443", "certificate-authority": "ca.crt"}},
            {
                "alice": {"token": "alice-from-a"},
                "carol": {"client-certificate": "pki/carol.crt", "client-key": "pki/carol.key"},
            },
            {
                "prod": {"cluster": "prod", "user": "alice", "namespace": "shop"},
                "carol": {"cluster": "dev", "user": "carol"},  # cluster "dev" comes from b/config
            },
            current="prod",
        ),
    )
    second = write(
        tmp_path / "b" / "config",
        kubeconfig(
            {
                "prod": {"server": "https://shadowed.example"},
                "dev": {"server": "https://dev.example:8443/", "certificate-authority": "ca.crt"},
            },
            {"alice": {"token": "shadowed"}, "bob": {"tokenFile": "token"}},
            {"dev": {"cluster": "dev", "user": "bob"}, "prod": {"cluster": "prod", "user": "bob"}},
            current="dev",
        ),
    )
    # Relative entries in $KUBECONFIG, a missing file and a duplicate: the missing one is skipped.
    monkeypatch.chdir(tmp_path)
    listed = ["nowhere/config", "a/config", "b/config", str(first)]
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(listed))

    prod = load_kubeconfig()  # current-context from the first file that sets one: a's "prod"
    assert prod.server == "https://prod.example:6443"  # the first file that names "prod" wins
    assert prod.ca_pem == b"CA-OF-A"  # relative to a/config
    assert prod.namespace == "shop"
    assert await token_of(prod) == "alice-from-a"  # a's "alice" and a's "prod" context

    dev = load_config(context="dev")
    carol = load_kubeconfig(context="carol")  # entries of one context from different files
    monkeypatch.chdir("/")  # paths were made absolute at load: a later chdir does not matter
    assert dev.server == "https://dev.example:8443"  # trailing slash dropped
    assert dev.namespace == "default"
    assert dev.ca_pem == b"CA-OF-B"  # relative to b/config, where cluster "dev" is
    assert await token_of(dev) == "token-from-b-file"  # relative to b/config
    assert isinstance(dev.credentials, TokenFileCredentials)
    assert dev.credentials.path == tmp_path / "b" / "token"

    assert carol.ca_pem == b"CA-OF-B"
    assert carol.credentials is not None
    presented = await carol.credentials.get()
    assert (presented.client_cert_pem, presented.client_key_pem) == (b"CAROL-CERT", b"CAROL-KEY")

    # The explicit path beats $KUBECONFIG.
    assert load_config(second).server == "https://dev.example:8443"
    assert load_kubeconfig(second, context="prod").server == "https://shadowed.example"


async def test_load_config_order_home_then_in_cluster(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigError, match=r"no configuration: no kubeconfig at .*\.kube/config"):
        load_config()
    # In a cluster (no kubeconfig anywhere): the service account, whose files are absent here.
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(ConfigError, match="serviceaccount/token"):
        load_config()
    # ~/.kube/config beats in-cluster.
    write(tmp_path / ".kube" / "config", single({"server": "https://home.example"}, None))
    assert load_config().server == "https://home.example"
    # An empty $KUBECONFIG is unset.
    monkeypatch.setenv("KUBECONFIG", "")
    assert load_config().server == "https://home.example"


async def test_context_selection_and_namespace(tmp_path: pathlib.Path) -> None:
    path = write(
        tmp_path / "config",
        kubeconfig(
            {"c": HTTPS},
            {"u": {"token": "t"}},
            {"ctx": {"cluster": "c", "user": "u", "namespace": "team-a"}, "other": {"cluster": "c"}},
            "ctx",
        ),
    )
    assert load_kubeconfig(path).namespace == "team-a"
    anonymous = load_kubeconfig(path, context="other")
    assert anonymous.namespace == "default" and anonymous.credentials is None
    with pytest.raises(ConfigError, match=f'context "missing" is not in {path}'):
        load_kubeconfig(path, context="missing")


async def test_cluster_settings(tmp_path: pathlib.Path) -> None:
    def load(cluster: dict[str, Any]) -> ClientConfig:
        return load_kubeconfig(write(tmp_path / "config", single(cluster, {"token": "t"})))

    config = load(
        {
            "server": "https://10.0.0.1:6443/k8s/clusters/c-1/?ignored=1",
            "insecure-skip-tls-verify": True,
            "tls-server-name": "api.internal",
            "proxy-url": "http://proxy.example:3128",
        }
    )
    assert config.server == "https://10.0.0.1:6443/k8s/clusters/c-1"  # the path prefix is kept
    assert config.insecure_skip_tls_verify and config.ca_pem is None
    assert config.tls_server_name == "api.internal"
    assert config.proxy_url == "http://proxy.example:3128"
    ca = base64.b64encode(b"CA").decode()
    # A server without a scheme: https when TLS settings are present, else http (client-go).
    assert load({"server": "api.example:6443", "certificate-authority-data": ca}).server == (
        "https://api.example:6443"
    )
    assert load({"server": "localhost:8080"}).server == "http://localhost:8080"


async def test_credentials_only_over_https(tmp_path: pathlib.Path) -> None:
    """client-go presents no user credentials to a plain-http server (kubectl proxy, say)."""
    path = write(tmp_path / "config", single({"server": "http://127.0.0.1:8001"}, {"token": "secret"}))
    assert load_kubeconfig(path).credentials is None


async def test_which_credential_source(tmp_path: pathlib.Path) -> None:
    (tmp_path / "token").write_text("from-file")
    cert = base64.b64encode(b"CERT").decode()
    key = base64.b64encode(b"KEY").decode()
    plugin = {"command": "no-such-plugin", "apiVersion": V1BETA1}

    def load(user: dict[str, Any]) -> ClientConfig:
        return load_kubeconfig(write(tmp_path / "config", single(HTTPS, user)))

    static = load({"token": "abc", "exec": plugin})  # a token beats an exec plugin (client-go)
    assert isinstance(static.credentials, StaticCredentials)
    assert await token_of(static) == "abc"

    certificate = load({"client-certificate-data": cert, "client-key-data": key, "exec": plugin})
    assert isinstance(certificate.credentials, StaticCredentials)
    assert await certificate.credentials.get() == Credentials(client_cert_pem=b"CERT", client_key_pem=b"KEY")

    # client-certificate-data wins over client-certificate, as in client-go.
    both = load({"client-certificate-data": cert, "client-certificate": "absent.crt", "client-key-data": key})
    assert both.credentials is not None
    assert (await both.credentials.get()).client_cert_pem == b"CERT"

    # tokenFile and a client certificate: both presented; tokenFile beats token.
    file_and_cert = load(
        {"tokenFile": "token", "token": "static", "client-certificate-data": cert, "client-key-data": key}
    )
    assert file_and_cert.credentials is not None
    presented = await file_and_cert.credentials.get()
    assert (presented.token, presented.client_cert_pem) == ("from-file", b"CERT")

    # A token beside a tokenFile that cannot be read stands in for it (no error at load).
    fallback = load({"tokenFile": "absent-token", "token": "static"})
    assert await token_of(fallback) == "static"

    assert isinstance(load({"exec": plugin}).credentials, ExecCredentials)
    assert load({}).credentials is None

    # with_token: the same cluster settings, a bearer token instead of whatever was there.
    as_account = certificate.with_token("service-account-token")
    assert await as_account.credentials.get() == Credentials(token="service-account-token")  # type: ignore[union-attr]
    assert (as_account.server, as_account.ca_pem, as_account.namespace) == (
        certificate.server,
        certificate.ca_pem,
        certificate.namespace,
    )


def test_config_errors_name_the_problem(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "config"

    def error(doc: dict[str, Any], **kwargs: Any) -> str:
        write(path, doc)
        with pytest.raises(ConfigError) as raised:
            load_kubeconfig(path, **kwargs)
        return str(raised.value)

    def user_error(user: dict[str, Any]) -> str:
        return error(single(HTTPS, user))

    def cluster_error(cluster: dict[str, Any]) -> str:
        return error(single(cluster, {"token": "t"}))

    def exec_error(**entry: Any) -> str:
        return user_error({"exec": {"command": "plugin", **entry}})

    cluster = {"c": HTTPS}
    context = {"ctx": {"cluster": "c", "user": "u"}}
    assert "no current-context" in error(kubeconfig(cluster, {"u": {}}, context))
    assert f'context "other" is not in {path}' in error(
        kubeconfig(cluster, {}, context, "ctx"), context="other"
    )
    assert f'{path}: context "ctx" names no cluster' in error(kubeconfig(cluster, {}, {"ctx": {}}, "ctx"))
    assert 'refers to cluster "c"' in error(kubeconfig({}, {"u": {}}, context, "ctx"))
    assert 'refers to user "u"' in error(kubeconfig(cluster, {}, context, "ctx"))

    # Clusters.
    assert f'{path}: cluster for context "ctx": server is required' in cluster_error({})
    assert "is not an http(s) URL" in cluster_error({"server": "ftp://x.example"})
    assert "certificate-authority-data is not valid base64" in cluster_error(
        {"server": "https://x", "certificate-authority-data": "%%"}
    )
    message = cluster_error({"server": "https://x", "certificate-authority": "absent.crt"})
    assert f"cannot read certificate-authority {tmp_path / 'absent.crt'}" in message
    assert "insecure-skip-tls-verify cannot both be set" in cluster_error(
        {"server": "https://x", "certificate-authority-data": "Q0E=", "insecure-skip-tls-verify": True}
    )
    assert "socks5 proxies are not supported" in cluster_error(
        {"server": "https://x", "proxy-url": "socks5://localhost:1080"}
    )
    assert "proxy-url 'localhost:3128' is not an http(s) URL" in cluster_error(
        {"server": "https://x", "proxy-url": "localhost:3128"}
    )

    # Users.
    assert f'{path}: user for context "ctx": basic authentication' in user_error(
        {"username": "a", "password": "b"}
    )
    assert 'legacy auth-provider "gcp" is not supported' in user_error({"auth-provider": {"name": "gcp"}})
    assert 'auth-provider "oidc"' in user_error({"auth-provider": {"name": "oidc"}, "exec": {"command": "x"}})
    assert "impersonation" in user_error({"token": "t", "as": "admin"})
    assert "client-certificate and client-key must be set together" in user_error(
        {"client-certificate-data": "QUJD"}
    )
    assert "cannot read client-key" in user_error(
        {"client-certificate-data": "QUJD", "client-key": "absent.key"}
    )
    message = user_error({"tokenFile": "absent-token"})
    assert "tokenFile: cannot read the token file" in message and "absent-token" in message
    (tmp_path / "empty-token").write_text("\n")
    assert "tokenFile: the token file" in user_error({"tokenFile": "empty-token"})

    # Exec plugins.
    assert "exec.command is required" in user_error({"exec": {"apiVersion": V1}})
    assert "exec.apiVersion is required" in exec_error()
    assert "exec.apiVersion 'client.authentication.k8s.io/v1alpha1' is not supported" in exec_error(
        apiVersion="client.authentication.k8s.io/v1alpha1"
    )
    assert "exec.interactiveMode is required for client.authentication.k8s.io/v1" in exec_error(apiVersion=V1)
    assert "exec.interactiveMode 'Sometimes' must be one of" in exec_error(
        apiVersion=V1BETA1, interactiveMode="Sometimes"
    )
    assert "every exec.env entry needs a name" in exec_error(apiVersion=V1BETA1, env=[{"value": "x"}])
    assert "exec.args must be a list of strings" in exec_error(apiVersion=V1BETA1, args="--flag")

    # Files.
    path.write_text("clusters: [unclosed")
    with pytest.raises(ConfigError, match=f"the kubeconfig {path} is not YAML: .* at line 1, column 20"):
        load_kubeconfig(path)
    path.write_text("- a list")
    with pytest.raises(ConfigError, match="is not a mapping"):
        load_kubeconfig(path)
    path.write_text("clusters: [{cluster: {server: https://x}}]")
    with pytest.raises(ConfigError, match="every entry of clusters needs a name"):
        load_kubeconfig(path)
    with pytest.raises(ConfigError, match=f"the kubeconfig {tmp_path / 'absent'} does not exist"):
        load_kubeconfig(tmp_path / "absent")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent-1") + os.pathsep + str(tmp_path / "absent-2"))
    with pytest.raises(ConfigError, match="none of the files in"):
        load_kubeconfig()
    # A broken file in the list is an error even when another file is good (client-go).
    write(tmp_path / "good", single(HTTPS, None))
    path.write_text("clusters: [unclosed")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "good") + os.pathsep + str(path))
    with pytest.raises(ConfigError, match=f"the kubeconfig {path} is not YAML"):
        load_kubeconfig()


# ---------------------------------------------------------------------------- in-cluster


async def test_in_cluster_config_from_a_service_account_directory(tmp_path: pathlib.Path) -> None:
    (tmp_path / "token").write_text("sa-token-1\n")
    (tmp_path / "ca.crt").write_bytes(b"SA-CA")
    (tmp_path / "namespace").write_text("payments\n")
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    config = in_cluster_config(root=tmp_path, environ=env)
    assert config.server == "https://[fd00::1]:443"
    assert config.namespace == "payments" and config.ca_pem == b"SA-CA"
    assert await token_of(config) == "sa-token-1"
    (tmp_path / "token").write_text("sa-token-2")  # the kubelet rotated it
    assert config.credentials is not None
    assert await token_of(config) == "sa-token-1"  # re-read once a minute ...
    assert (await config.credentials.refresh()).token == "sa-token-2"  # ... and at once after a 401

    ipv4 = in_cluster_config(
        root=tmp_path, environ={"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "6443"}
    )
    assert ipv4.server == "https://10.96.0.1:6443"
    assert (
        in_cluster_config(root=tmp_path, environ={**env, "POD_NAMESPACE": "from-env"}).namespace == "from-env"
    )
    (tmp_path / "namespace").unlink()
    assert in_cluster_config(root=tmp_path, environ=env).namespace == "default"

    with pytest.raises(ConfigError, match="KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT"):
        in_cluster_config(root=tmp_path, environ={})
    with pytest.raises(ConfigError, match="KUBERNETES_SERVICE_PORT"):
        in_cluster_config(root=tmp_path, environ={"KUBERNETES_SERVICE_HOST": "h"})
    (tmp_path / "ca.crt").unlink()
    with pytest.raises(ConfigError, match="service-account CA"):
        in_cluster_config(root=tmp_path, environ=env)
    (tmp_path / "token").write_text("")
    with pytest.raises(ConfigError, match=r"token file .* is empty"):
        in_cluster_config(root=tmp_path, environ=env)
    with pytest.raises(ConfigError, match="cannot read the token file"):
        in_cluster_config(root=tmp_path / "empty", environ=env)


# ---------------------------------------------------------------------------- TLS


async def test_ssl_context_against_the_real_server(
    shared_server: ServerThread, tmp_path: pathlib.Path
) -> None:
    token_config = load_kubeconfig(shared_server.kubeconfig)
    cert_config = load_kubeconfig(shared_server.kubeconfig, context="kubeloop-cert")
    url = f"{token_config.server}/api/v1/namespaces/default"

    assert await status_of(token_config, url) == 200
    assert await status_of(cert_config, url) == 200  # the client certificate alone authenticates
    no_credentials = ClientConfig(server=token_config.server, ca_pem=token_config.ca_pem)
    assert await status_of(no_credentials, url) == 401

    # A certificate the server's CA issued for a user of our own, presented from PEM bytes.
    assert shared_server.server.credentials is not None
    cert_pem, key_pem = certs.issue_client_certificate(shared_server.server.credentials, "carol", ["devs"])
    carol = ClientConfig(
        server=token_config.server,
        ca_pem=token_config.ca_pem,
        credentials=StaticCredentials(Credentials(client_cert_pem=cert_pem, client_key_pem=key_pem)),
    )
    # Authenticated as carol (unauthenticated would be 401), who has no role: RBAC refuses.
    assert await status_of(carol, url) == 403

    # A certificate from another CA: the server does not accept it.
    other = certs.load_or_create_credentials(tmp_path / "other-pki", ["localhost"])
    stranger_cert, stranger_key = certs.issue_client_certificate(other, "mallory", [])
    stranger = ClientConfig(
        server=token_config.server,
        ca_pem=token_config.ca_pem,
        credentials=StaticCredentials(
            Credentials(client_cert_pem=stranger_cert, client_key_pem=stranger_key)
        ),
    )
    with contextlib.suppress(aiohttp.ClientError):  # or the TLS layer rejects it outright
        assert await status_of(stranger, url) == 401

    wrong_ca = ClientConfig(server=token_config.server, ca_pem=other.ca_cert_pem)
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await status_of(wrong_ca, url)
    system_cas = ClientConfig(server=token_config.server)  # the server's CA is no system CA
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await status_of(system_cas, url)
    insecure = ClientConfig(server=token_config.server, insecure_skip_tls_verify=True)
    assert await status_of(insecure, url) == 401  # connected without verifying, then unauthenticated


def test_ssl_context_errors(shared_server: ServerThread) -> None:
    config = load_kubeconfig(shared_server.kubeconfig)
    assert make_ssl_context(ClientConfig(server="http://127.0.0.1:8001"), Credentials()) is None
    context = make_ssl_context(config, Credentials())
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2
    with pytest.raises(ConfigError, match="certificate-authority data is not valid PEM"):
        make_ssl_context(ClientConfig(server=config.server, ca_pem=b"junk"), Credentials())
    with pytest.raises(ConfigError, match="not valid PEM"):
        make_ssl_context(config, Credentials(client_cert_pem=b"junk", client_key_pem=b"junk"))

    assert shared_server.server.credentials is not None
    cert_pem, key_pem = certs.issue_client_certificate(shared_server.server.credentials, "dave", [])
    key = serialization.load_pem_private_key(key_pem, password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )
    # An encrypted key is refused rather than prompted for on the terminal.
    with pytest.raises(ConfigError, match="the client key is encrypted"):
        make_ssl_context(config, Credentials(client_cert_pem=cert_pem, client_key_pem=encrypted))


async def status_of(config: ClientConfig, url: str) -> int:
    """GET ``url`` with aiohttp, ``config``'s TLS context and its token (if any)."""
    credentials = await config.credentials.get() if config.credentials is not None else Credentials()
    headers = {"Authorization": f"Bearer {credentials.token}"} if credentials.token else {}
    context = make_ssl_context(config, credentials)
    assert isinstance(context, ssl.SSLContext)
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
        session.get(url, headers=headers) as response,
    ):
        return response.status
