"""Client configuration: kubeconfig merging, contexts, every ConfigError, token files, exec
plugins (a real script acting as the plugin), in-cluster config, and TLS against the real server."""

from __future__ import annotations

import base64
import json
import os
import pathlib
import ssl
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
import yaml

from kubeloop.apiserver import certs
from kubeloop.client.config import (
    ClientConfig,
    ConfigError,
    in_cluster_config,
    load_config,
    load_kubeconfig,
    ssl_context,
)
from kubeloop.client.credentials import CredentialError, Credentials
from kubeloop.client.execplugin import ExecCredentials
from kubeloop.client.rest import Client
from tests.conftest import ServerThread


def write(path: pathlib.Path, document: dict[str, Any]) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def kubeconfig(
    clusters: dict[str, dict[str, Any]],
    users: dict[str, dict[str, Any]],
    contexts: dict[str, dict[str, Any]],
    current: str | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters.items()],
        "users": [{"name": n, "user": u} for n, u in users.items()],
        "contexts": [{"name": n, "context": c} for n, c in contexts.items()],
    }
    if current:
        doc["current-context"] = current
    return doc


async def token_of(config: ClientConfig) -> str | None:
    assert config.credentials is not None
    return (await config.credentials.get()).token


# ---------------------------------------------------------------------------- merging


async def test_kubeconfig_list_merges_first_wins_and_resolves_relative_paths(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a" / "ca.crt").parent.mkdir(parents=True)
    (tmp_path / "a" / "ca.crt").write_bytes(b"CA-OF-A")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "token").write_text("token-from-b-file\n")
    first = write(
        tmp_path / "a" / "config",
        kubeconfig(
            {"prod": {"server": "https://prod.example:6443", "certificate-authority": "ca.crt"}},
            {"alice": {"token": "alice-from-a"}},
            {"prod": {"cluster": "prod", "user": "alice", "namespace": "shop"}},
            current="prod",
        ),
    )
    second = write(
        tmp_path / "b" / "config",
        kubeconfig(
            {"prod": {"server": "https://shadowed.example"}, "dev": {"server": "http://dev.example:8080/"}},
            {"alice": {"token": "shadowed"}, "bob": {"tokenFile": "token"}},
            {"dev": {"cluster": "dev", "user": "bob"}},
            current="dev",
        ),
    )
    missing = tmp_path / "nowhere" / "config"
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(missing), str(first), str(second)]))

    prod = load_kubeconfig()
    assert prod.server == "https://prod.example:6443"  # the first file that names "prod" wins
    assert prod.ca_pem == b"CA-OF-A"  # relative to a/config
    assert prod.namespace == "shop"
    assert await token_of(prod) == "alice-from-a"

    dev = load_config(context="dev")
    assert dev.server == "http://dev.example:8080"
    assert dev.namespace == "default"
    assert await token_of(dev) == "token-from-b-file"  # relative to b/config


def test_config_errors_name_the_problem(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def error(doc: dict[str, Any], **kwargs: Any) -> str:
        path = write(tmp_path / "config", doc)
        with pytest.raises(ConfigError) as raised:
            load_kubeconfig(path, **kwargs)
        return str(raised.value)

    cluster = {"c": {"server": "https://x"}}
    context = {"ctx": {"cluster": "c", "user": "u"}}
    assert "no current-context" in error(kubeconfig(cluster, {"u": {}}, context))
    assert 'context "other" is not in' in error(
        kubeconfig(cluster, {"u": {}}, context, "ctx"), context="other"
    )
    assert 'refers to cluster "c"' in error(kubeconfig({}, {"u": {}}, context, "ctx"))
    assert 'refers to user "u"' in error(kubeconfig(cluster, {}, context, "ctx"))
    assert "server is required" in error(kubeconfig({"c": {}}, {"u": {}}, context, "ctx"))
    assert "basic authentication" in error(
        kubeconfig(cluster, {"u": {"username": "a", "password": "b"}}, context, "ctx")
    )
    assert 'auth-provider "gcp"' in error(
        kubeconfig(cluster, {"u": {"auth-provider": {"name": "gcp"}}}, context, "ctx")
    )
    assert "must be set together" in error(
        kubeconfig(cluster, {"u": {"client-certificate-data": "QUJD"}}, context, "ctx")
    )
    assert "not valid base64" in error(
        kubeconfig(
            {"c": {"server": "https://x", "certificate-authority-data": "%%"}}, {"u": {}}, context, "ctx"
        )
    )
    assert "cannot read certificate-authority" in error(
        kubeconfig(
            {"c": {"server": "https://x", "certificate-authority": "absent.crt"}}, {"u": {}}, context, "ctx"
        )
    )
    assert "interactiveMode is required" in error(
        kubeconfig(
            cluster,
            {"u": {"exec": {"command": "x", "apiVersion": "client.authentication.k8s.io/v1"}}},
            context,
            "ctx",
        )
    )
    assert "is not supported" in error(
        kubeconfig(
            cluster,
            {"u": {"exec": {"command": "x", "apiVersion": "client.authentication.k8s.io/v1alpha1"}}},
            context,
            "ctx",
        )
    )
    with pytest.raises(ConfigError, match="does not exist"):
        load_kubeconfig(tmp_path / "absent")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent-1") + os.pathsep + str(tmp_path / "absent-2"))
    with pytest.raises(ConfigError, match="none of the files in"):
        load_kubeconfig()


async def test_token_file_is_re_read(tmp_path: pathlib.Path) -> None:
    (tmp_path / "token").write_text("one")
    path = write(
        tmp_path / "config",
        kubeconfig(
            {"c": {"server": "https://x"}},
            {"u": {"tokenFile": "token"}},
            {"ctx": {"cluster": "c", "user": "u"}},
            "ctx",
        ),
    )
    config = load_kubeconfig(path)
    assert config.credentials is not None
    assert (await config.credentials.get()).token == "one"
    (tmp_path / "token").write_text("two")
    assert (await config.credentials.get()).token == "one"  # cached (client-go re-reads once a minute)
    assert (await config.credentials.refresh()).token == "two"  # after a 401: read at once


# ---------------------------------------------------------------------------- exec plugins

PLUGIN = """\
#!{python}
import json, os, sys, pathlib
state = pathlib.Path(sys.argv[1])
runs = int(state.read_text()) + 1 if state.exists() else 1
state.write_text(str(runs))
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
pathlib.Path(str(state) + ".info").write_text(json.dumps(info))
mode = os.environ.get("PLUGIN_MODE", "token")
if mode == "fail":
    print("cannot reach the identity provider", file=sys.stderr)
    sys.exit(3)
status = {{}}
if mode == "token":
    status["token"] = os.environ["PLUGIN_TOKEN_PREFIX"] + str(runs)
elif mode == "wrong-then-file":
    status["token"] = "wrong" if runs == 1 else pathlib.Path(os.environ["PLUGIN_TOKEN_FILE"]).read_text()
else:
    status["clientCertificateData"] = pathlib.Path(os.environ["PLUGIN_CERT"]).read_text()
    status["clientKeyData"] = pathlib.Path(os.environ["PLUGIN_KEY"]).read_text()
if os.environ.get("PLUGIN_EXPIRES"):
    status["expirationTimestamp"] = os.environ["PLUGIN_EXPIRES"]
print(json.dumps({{"apiVersion": info["apiVersion"], "kind": "ExecCredential", "status": status}}))
"""


def plugin_kubeconfig(
    tmp_path: pathlib.Path, api_version: str, env: dict[str, str], **exec_extra: Any
) -> pathlib.Path:
    script = tmp_path / "bin" / "plugin.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(PLUGIN.format(python=sys.executable))
    script.chmod(0o755)
    entry: dict[str, Any] = {
        "apiVersion": api_version,
        "command": "bin/plugin.py",  # relative to the kubeconfig's directory
        "args": [str(tmp_path / "runs")],
        "env": [{"name": k, "value": v} for k, v in env.items()],
        **exec_extra,
    }
    cluster = {
        "server": "https://cluster.example:6443",
        "certificate-authority-data": base64.b64encode(b"CA").decode(),
    }
    return write(
        tmp_path / "config",
        kubeconfig({"c": cluster}, {"u": {"exec": entry}}, {"ctx": {"cluster": "c", "user": "u"}}, "ctx"),
    )


async def test_exec_plugin_v1_token_cached_until_expiry_and_rerun_on_refresh(tmp_path: pathlib.Path) -> None:
    past = (datetime.now(UTC) - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    config = load_kubeconfig(
        plugin_kubeconfig(
            tmp_path,
            "client.authentication.k8s.io/v1",
            {"PLUGIN_TOKEN_PREFIX": "tok-"},
            interactiveMode="Never",
            provideClusterInfo=True,
        )
    )
    source = config.credentials
    assert isinstance(source, ExecCredentials)
    assert (await source.get()).token == "tok-1"
    assert (await source.get()).token == "tok-1"  # no expiry: cached
    assert (await source.refresh()).token == "tok-2"  # a 401 re-runs it
    info = json.loads((tmp_path / "runs.info").read_text())
    assert info["apiVersion"] == "client.authentication.k8s.io/v1" and info["kind"] == "ExecCredential"
    assert info["spec"]["interactive"] is False
    assert info["spec"]["cluster"]["server"] == "https://cluster.example:6443"
    assert info["spec"]["cluster"]["certificate-authority-data"] == base64.b64encode(b"CA").decode()

    expired = load_kubeconfig(
        plugin_kubeconfig(
            tmp_path,
            "client.authentication.k8s.io/v1beta1",
            {"PLUGIN_TOKEN_PREFIX": "exp-", "PLUGIN_EXPIRES": past},
        )
    )
    assert expired.credentials is not None
    first = await expired.credentials.get()
    second = await expired.credentials.get()
    assert first.token != second.token  # already expired: every get runs it again
    assert "cluster" not in json.loads((tmp_path / "runs.info").read_text())["spec"]


async def test_exec_plugin_failures(tmp_path: pathlib.Path) -> None:
    failing = load_kubeconfig(
        plugin_kubeconfig(
            tmp_path,
            "client.authentication.k8s.io/v1",
            {"PLUGIN_MODE": "fail"},
            interactiveMode="IfAvailable",
        )
    )
    assert failing.credentials is not None
    with pytest.raises(CredentialError, match="exit code 3: cannot reach the identity provider"):
        await failing.credentials.get()

    always = load_kubeconfig(
        plugin_kubeconfig(tmp_path, "client.authentication.k8s.io/v1", {}, interactiveMode="Always")
    )
    assert always.credentials is not None
    with pytest.raises(CredentialError, match="standard input is not a terminal"):
        await always.credentials.get()

    missing = write(
        tmp_path / "missing",
        kubeconfig(
            {"c": {"server": "https://x"}},
            {
                "u": {
                    "exec": {
                        "command": "no-such-plugin-xyz",
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "installHint": "install it from example.com",
                    }
                }
            },
            {"ctx": {"cluster": "c", "user": "u"}},
            "ctx",
        ),
    )
    source = load_kubeconfig(missing).credentials
    assert source is not None
    with pytest.raises(CredentialError, match=r"install it from example\.com"):
        await source.get()


async def test_exec_plugin_credentials_against_the_server(
    tmp_path: pathlib.Path, shared_server: ServerThread
) -> None:
    """A token and a client certificate from a plugin authenticate to the embedded server."""
    server_config = load_kubeconfig(shared_server.kubeconfig)
    assert shared_server.server.credentials is not None
    cert_pem, key_pem = certs.issue_client_certificate(
        shared_server.server.credentials, "plugin-user", ["devs"]
    )
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    (tmp_path / "key.pem").write_bytes(key_pem)

    def config_for(env: dict[str, str]) -> ClientConfig:
        plugin = load_kubeconfig(
            plugin_kubeconfig(tmp_path, "client.authentication.k8s.io/v1", env, interactiveMode="Never")
        )
        return ClientConfig(
            server=server_config.server, ca_pem=server_config.ca_pem, credentials=plugin.credentials
        )

    async with Client(
        config_for(
            {
                "PLUGIN_MODE": "cert",
                "PLUGIN_CERT": str(tmp_path / "cert.pem"),
                "PLUGIN_KEY": str(tmp_path / "key.pem"),
            }
        )
    ) as client:
        assert (await client.request("GET", "/api/v1/namespaces/default"))[0] == 200

    # The plugin's first token is wrong: the 401 makes the client re-run it, and the second is right.
    (tmp_path / "runs").unlink(missing_ok=True)
    (tmp_path / "token").write_text(shared_server.token)
    config = config_for({"PLUGIN_MODE": "wrong-then-file", "PLUGIN_TOKEN_FILE": str(tmp_path / "token")})
    async with Client(config) as client:
        assert (await client.request("GET", "/api/v1/namespaces/default"))[0] == 200
    assert isinstance(config.credentials, ExecCredentials)
    assert config.credentials.runs == 2


# ---------------------------------------------------------------------------- in-cluster


async def test_in_cluster_config_from_a_service_account_directory(tmp_path: pathlib.Path) -> None:
    (tmp_path / "token").write_text("sa-token-1")
    (tmp_path / "ca.crt").write_bytes(b"SA-CA")
    (tmp_path / "namespace").write_text("payments\n")
    config = in_cluster_config(
        root=tmp_path, environ={"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    )
    assert config.server == "https://[fd00::1]:443"
    assert config.namespace == "payments" and config.ca_pem == b"SA-CA"
    assert await token_of(config) == "sa-token-1"
    (tmp_path / "token").write_text("sa-token-2")  # the kubelet rotated it
    assert config.credentials is not None
    assert (await config.credentials.refresh()).token == "sa-token-2"
    with pytest.raises(ConfigError, match="KUBERNETES_SERVICE_HOST"):
        in_cluster_config(root=tmp_path, environ={})
    with pytest.raises(ConfigError, match="token"):
        in_cluster_config(
            root=tmp_path / "empty", environ={"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"}
        )


# ---------------------------------------------------------------------------- TLS


async def test_ssl_context_against_the_real_server(
    shared_server: ServerThread, tmp_path: pathlib.Path
) -> None:
    token_config = load_kubeconfig(shared_server.kubeconfig)
    cert_config = load_kubeconfig(shared_server.kubeconfig, context="kubeloop-cert")
    url = f"{token_config.server}/api/v1/namespaces/default"

    async def status(config: ClientConfig, token: bool) -> int:
        assert config.credentials is not None
        credentials = await config.credentials.get()
        headers = {"Authorization": f"Bearer {credentials.token}"} if token and credentials.token else {}
        connector = aiohttp.TCPConnector(ssl=ssl_context(config, credentials))
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.get(url, headers=headers) as response,
        ):
            return response.status

    assert await status(token_config, token=True) == 200
    assert await status(cert_config, token=False) == 200  # the client certificate alone authenticates
    no_cert = ClientConfig(server=token_config.server, ca_pem=token_config.ca_pem)
    assert await status_plain(no_cert, url) == 401

    other_ca = certs.load_or_create_credentials(tmp_path / "other-pki", ["localhost"]).ca_cert_pem
    wrong_ca = ClientConfig(server=token_config.server, ca_pem=other_ca)
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await status_plain(wrong_ca, url)

    insecure = ClientConfig(server=token_config.server, insecure_skip_tls_verify=True)
    assert await status_plain(insecure, url) == 401  # connected without verifying, then unauthenticated

    with pytest.raises(ConfigError, match="not valid PEM"):
        ssl_context(token_config, Credentials(client_cert_pem=b"junk", client_key_pem=b"junk"))


async def status_plain(config: ClientConfig, url: str) -> int:
    context = ssl_context(config, Credentials())
    assert isinstance(context, ssl.SSLContext)
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
        session.get(url) as response,
    ):
        return response.status
