"""Exec credential plugins, with a real script acting as the plugin: v1 and v1beta1, token and
client-certificate answers, KUBERNETES_EXEC_INFO, interactive modes, caching until expiry,
re-runs after a 401, shared runs, failures — and the credentials used against the real server."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import pathlib
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubeloop import certs
from kubeloop.client.config import ClientConfig, load_kubeconfig
from kubeloop.client.credentials import CredentialError
from kubeloop.client.execplugin import ExecCredentials
from kubeloop.client.rest import APIClient
from tests.client.kubeconfigs import single, write
from tests.conftest import ServerThread, eventually

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"

PLUGIN = """\
#!{python}
import json, os, sys, pathlib, time
def put(path, text):  # whole or not at all: the tests read these files while it runs
    partial = pathlib.Path(str(path) + ".partial")
    partial.write_text(text)
    os.replace(partial, path)
state = pathlib.Path(sys.argv[1])
runs = int(state.read_text()) + 1 if state.exists() else 1
put(state, str(runs))
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
seen = {{
    "info": info,
    "env": {{k: v for k, v in os.environ.items() if k.startswith("SEEN_")}},
    "stdin_tty": os.isatty(0),
    "pid": os.getpid(),
}}
put(str(state) + ".seen", json.dumps(seen))
print("plugin run", runs, file=sys.stderr)
time.sleep(float(os.environ.get("PLUGIN_SLEEP", "0")))
pathlib.Path(str(state) + ".slept").touch()
mode = os.environ.get("PLUGIN_MODE", "token")
version = os.environ.get("PLUGIN_API_VERSION", info["apiVersion"])
if mode == "fail":
    print("cannot reach the identity provider", file=sys.stderr)
    sys.exit(3)
if mode == "garbage":
    print("not json")
    sys.exit(0)
status = {{}}
if mode == "token":
    status["token"] = os.environ.get("PLUGIN_TOKEN_PREFIX", "tok-") + str(runs)
elif mode == "wrong-then-file":
    status["token"] = "wrong" if runs == 1 else pathlib.Path(os.environ["PLUGIN_TOKEN_FILE"]).read_text()
elif mode == "cert-only":
    status["clientCertificateData"] = "CERT"
elif mode == "cert":
    status["clientCertificateData"] = pathlib.Path(os.environ["PLUGIN_CERT"]).read_text()
    status["clientKeyData"] = pathlib.Path(os.environ["PLUGIN_KEY"]).read_text()
if os.environ.get("PLUGIN_EXPIRES"):
    status["expirationTimestamp"] = os.environ["PLUGIN_EXPIRES"]
answer = {{"apiVersion": version, "kind": "ExecCredential"}}
if mode != "no-status":
    answer["status"] = status
print(json.dumps(answer))
"""


def plugin_kubeconfig(
    tmp_path: pathlib.Path,
    api_version: str,
    env: dict[str, str] | None = None,
    *,
    cluster: dict[str, Any] | None = None,
    **exec_extra: Any,
) -> pathlib.Path:
    """A kubeconfig whose user runs the test plugin (``bin/plugin.py``, relative to the file)."""
    script = tmp_path / "bin" / "plugin.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(PLUGIN.format(python=sys.executable))
    script.chmod(0o755)
    entry: dict[str, Any] = {
        "apiVersion": api_version,
        "command": "bin/plugin.py",  # contains a separator: relative to the kubeconfig's directory
        "args": [str(tmp_path / "runs")],
        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
        **exec_extra,
    }
    cluster = cluster or {
        "server": "https://cluster.example:6443",
        "certificate-authority-data": base64.b64encode(b"CA").decode(),
    }
    return write(tmp_path / "config", single(cluster, {"exec": entry}))


def plugin_source(
    tmp_path: pathlib.Path, api_version: str, env: dict[str, str] | None = None, **extra: Any
) -> ExecCredentials:
    source = load_kubeconfig(plugin_kubeconfig(tmp_path, api_version, env, **extra)).credentials
    assert isinstance(source, ExecCredentials)
    return source


def seen(tmp_path: pathlib.Path) -> dict[str, Any]:
    """What the plugin saw on its last run."""
    result: dict[str, Any] = json.loads((tmp_path / "runs.seen").read_text())
    return result


def runs(tmp_path: pathlib.Path) -> int:
    return int((tmp_path / "runs").read_text())


def rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_v1_token_cached_rerun_on_refresh_and_exec_info(tmp_path: pathlib.Path) -> None:
    source = plugin_source(tmp_path, V1, interactiveMode="Never", provideClusterInfo=True)
    first = await source.get()
    assert first.token == "tok-1" and first.expires_at is None
    assert (await source.get()).token == "tok-1"  # no expiry: cached
    assert runs(tmp_path) == 1
    assert (await source.refresh()).token == "tok-2"  # a 401 re-runs it
    assert (await source.get()).token == "tok-2"
    assert runs(tmp_path) == 2 == source.runs

    info = seen(tmp_path)["info"]
    assert info == {
        "apiVersion": V1,
        "kind": "ExecCredential",
        "spec": {
            "interactive": False,
            "cluster": {
                "server": "https://cluster.example:6443",
                "certificate-authority-data": base64.b64encode(b"CA").decode(),
            },
        },
    }
    assert seen(tmp_path)["stdin_tty"] is False


async def test_v1beta1_cluster_info_only_when_asked_and_extension_passed(tmp_path: pathlib.Path) -> None:
    source = plugin_source(tmp_path, V1BETA1)  # v1beta1: interactiveMode defaults to IfAvailable
    await source.get()
    assert seen(tmp_path)["info"] == {
        "apiVersion": V1BETA1,
        "kind": "ExecCredential",
        "spec": {"interactive": False},
    }

    cluster = {
        "server": "https://10.0.0.1:6443",
        "insecure-skip-tls-verify": True,
        "tls-server-name": "api.internal",
        "proxy-url": "http://proxy.example:3128",
        "extensions": [
            {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "kube", "region": "eu"}},
            {"name": "something-else", "extension": {"x": 1}},
        ],
    }
    source = plugin_source(tmp_path, V1BETA1, cluster=cluster, provideClusterInfo=True)
    await source.get()
    assert seen(tmp_path)["info"]["spec"]["cluster"] == {
        "server": "https://10.0.0.1:6443",
        "insecure-skip-tls-verify": True,
        "tls-server-name": "api.internal",
        "proxy-url": "http://proxy.example:3128",
        "config": {"audience": "kube", "region": "eu"},
    }


async def test_env_is_laid_over_the_process_environment(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEEN_FROM_PROCESS", "process")
    monkeypatch.setenv("SEEN_OVERRIDDEN", "process")
    source = plugin_source(
        tmp_path,
        V1,
        {"SEEN_OVERRIDDEN": "kubeconfig", "SEEN_ONLY_CONFIG": "kubeconfig"},
        interactiveMode="Never",
    )
    monkeypatch.setenv("SEEN_SET_LATER", "later")  # the environment as it is when the plugin runs
    await source.get()
    assert seen(tmp_path)["env"] == {
        "SEEN_FROM_PROCESS": "process",
        "SEEN_OVERRIDDEN": "kubeconfig",
        "SEEN_ONLY_CONFIG": "kubeconfig",
        "SEEN_SET_LATER": "later",
    }


async def test_expiry_causes_a_rerun(tmp_path: pathlib.Path) -> None:
    past = rfc3339(datetime.now(UTC) - timedelta(minutes=1))
    expired = plugin_source(tmp_path, V1BETA1, {"PLUGIN_EXPIRES": past})
    first = await expired.get()
    assert first.expires_at == datetime.fromisoformat(past)
    assert first.expires_at is not None and first.expires_at.tzinfo is not None
    second = await expired.get()
    assert (first.token, second.token) == ("tok-1", "tok-2")  # expired: get runs it again

    (tmp_path / "runs").unlink()
    future = rfc3339(datetime.now(UTC) + timedelta(hours=1))
    valid = plugin_source(tmp_path, V1BETA1, {"PLUGIN_EXPIRES": future})
    assert (await valid.get()).token == (await valid.get()).token == "tok-1"  # valid: cached
    assert runs(tmp_path) == 1


async def test_concurrent_callers_share_one_run(tmp_path: pathlib.Path) -> None:
    past = rfc3339(datetime.now(UTC) - timedelta(minutes=1))  # always expired: every get wants a run
    source = plugin_source(tmp_path, V1BETA1, {"PLUGIN_SLEEP": "0.3", "PLUGIN_EXPIRES": past})
    answers = await asyncio.gather(*(source.get() for _ in range(5)), source.refresh())
    assert {a.token for a in answers} == {"tok-1"}
    assert runs(tmp_path) == 1

    # A caller that gives up does not stop the run the others wait for.
    impatient = asyncio.create_task(source.get())
    patient = asyncio.create_task(source.get())
    await eventually(lambda: runs(tmp_path) == 2)  # the shared run has started (and sleeps 0.3 s)
    impatient.cancel()
    assert (await patient).token == "tok-2"
    assert impatient.cancelled()
    assert runs(tmp_path) == 2


def test_a_cancelled_run_kills_the_plugin(tmp_path: pathlib.Path) -> None:
    """When the run itself is cancelled (here: its event loop shuts down), the plugin is killed."""
    source = plugin_source(tmp_path, V1BETA1, {"PLUGIN_SLEEP": "30"})

    async def start_and_leave() -> None:
        asyncio.create_task(source.get())  # noqa: RUF006 — left running on purpose
        await eventually((tmp_path / "runs.seen").exists)

    asyncio.run(start_and_leave())  # cancels the pending run on the way out
    pid = seen(tmp_path)["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone, and it never finished its sleep: killed, not waited for
    assert not (tmp_path / "runs.slept").exists()


async def test_client_certificate_answer(tmp_path: pathlib.Path) -> None:
    (tmp_path / "cert.pem").write_text("CERT-PEM")
    (tmp_path / "key.pem").write_text("KEY-PEM")
    env = {
        "PLUGIN_MODE": "cert",
        "PLUGIN_CERT": str(tmp_path / "cert.pem"),
        "PLUGIN_KEY": str(tmp_path / "key.pem"),
    }
    credentials = await plugin_source(tmp_path, V1, env, interactiveMode="IfAvailable").get()
    assert credentials.token is None
    assert (credentials.client_cert_pem, credentials.client_key_pem) == (b"CERT-PEM", b"KEY-PEM")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PLUGIN_MODE": "no-status"}, "didn't return a status field"),
        ({"PLUGIN_MODE": "empty"}, "didn't return a token or cert/key pair"),
        ({"PLUGIN_MODE": "cert-only"}, "returned only certificate or key, not both"),
        ({"PLUGIN_MODE": "garbage"}, "printed no ExecCredential"),
        (
            {"PLUGIN_API_VERSION": V1BETA1},
            f"configured to use API version {V1}, plugin returned version '{V1BETA1}'",
        ),
        ({"PLUGIN_EXPIRES": "tomorrow"}, "bad status.expirationTimestamp 'tomorrow'"),
    ],
)
async def test_output_is_parsed_strictly(tmp_path: pathlib.Path, env: dict[str, str], message: str) -> None:
    source = plugin_source(tmp_path, V1, env, interactiveMode="Never")
    with pytest.raises(CredentialError, match=message.replace("(", r"\(").replace(")", r"\)")):
        await source.get()


async def test_failures_surface_stderr_and_install_hint(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    hint = "Install it with: brew install plugin\x1b[31m"  # escape sequences are neutralised
    failing = plugin_source(
        tmp_path, V1, {"PLUGIN_MODE": "fail"}, interactiveMode="IfAvailable", installHint=hint
    )
    with pytest.raises(CredentialError) as raised:
        await failing.get()
    message = str(raised.value)
    assert "exit code 3" in message and "cannot reach the identity provider" in message
    assert "Install it with: brew install pluginU+001B[31m" in message and "\x1b" not in message
    with pytest.raises(CredentialError):  # a failed run is not cached
        await failing.get()
    assert runs(tmp_path) == 2

    caplog.set_level(logging.INFO, logger="kubeloop.client.exec")
    await plugin_source(tmp_path, V1, interactiveMode="Never").get()
    assert any("plugin run 3" in record.getMessage() for record in caplog.records)  # stderr logged

    missing = write(
        tmp_path / "missing",
        single(
            {"server": "https://x"},
            {
                "exec": {
                    "command": "no-such-plugin-xyz",
                    "apiVersion": V1BETA1,
                    "installHint": "see example.com",
                }
            },
        ),
    )
    source = load_kubeconfig(missing).credentials
    assert source is not None
    with pytest.raises(
        CredentialError, match=r"executable no-such-plugin-xyz not found(.|\n)*see example\.com"
    ):
        await source.get()

    not_executable = plugin_source(tmp_path, V1, interactiveMode="Never")
    (tmp_path / "bin" / "plugin.py").chmod(0o644)
    with pytest.raises(CredentialError, match=r"exec: cannot run .*plugin\.py"):
        await not_executable.get()


async def test_interactive_modes(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No terminal on standard input (pytest's stdin is none).
    always = plugin_source(tmp_path, V1, interactiveMode="Always")
    with pytest.raises(
        CredentialError, match="cannot support interactive mode: standard input is not a terminal"
    ):
        await always.get()
    assert not (tmp_path / "runs").exists()  # it never ran
    await plugin_source(tmp_path, V1, interactiveMode="IfAvailable").get()
    assert seen(tmp_path)["info"]["spec"]["interactive"] is False

    # A terminal: the plugin gets it as standard input, unless the mode is Never.
    controller, terminal = os.openpty()
    with os.fdopen(terminal, "r") as tty, os.fdopen(controller, "w"):
        monkeypatch.setattr(sys, "stdin", tty)
        for mode, interactive in (("Always", True), ("IfAvailable", True), ("Never", False)):
            await plugin_source(tmp_path, V1, interactiveMode=mode).get()
            assert seen(tmp_path)["info"]["spec"]["interactive"] is interactive, mode
            assert seen(tmp_path)["stdin_tty"] is interactive, mode


async def test_plugin_credentials_against_the_server(
    tmp_path: pathlib.Path, shared_server: ServerThread
) -> None:
    """A token and a client certificate from a plugin authenticate to the embedded server; a
    401 makes the client re-run the plugin."""
    server_config = load_kubeconfig(shared_server.kubeconfig)
    assert shared_server.server.credentials is not None
    cert_pem, key_pem = certs.issue_client_certificate(
        shared_server.server.credentials, "plugin-user", ["system:masters"]
    )
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    (tmp_path / "key.pem").write_bytes(key_pem)

    def config_for(env: dict[str, str]) -> ClientConfig:
        plugin = load_kubeconfig(plugin_kubeconfig(tmp_path, V1, env, interactiveMode="Never"))
        return ClientConfig(
            server=server_config.server, ca_pem=server_config.ca_pem, credentials=plugin.credentials
        )

    cert_env = {
        "PLUGIN_MODE": "cert",
        "PLUGIN_CERT": str(tmp_path / "cert.pem"),
        "PLUGIN_KEY": str(tmp_path / "key.pem"),
    }
    async with APIClient(config_for(cert_env)) as client:
        assert (await client.request("GET", "/api/v1/namespaces/default"))[0] == 200

    # The plugin's first token is wrong: the 401 makes the client re-run it, and the second is right.
    (tmp_path / "runs").unlink(missing_ok=True)
    (tmp_path / "token").write_text(shared_server.token)
    config = config_for({"PLUGIN_MODE": "wrong-then-file", "PLUGIN_TOKEN_FILE": str(tmp_path / "token")})
    async with APIClient(config) as client:
        assert (await client.request("GET", "/api/v1/namespaces/default"))[0] == 200
    assert isinstance(config.credentials, ExecCredentials)
    assert config.credentials.runs == 2


async def test_the_plugin_runs_off_the_event_loop(tmp_path: pathlib.Path) -> None:
    """While a slow plugin runs, the event loop keeps ticking."""
    source = plugin_source(tmp_path, V1BETA1, {"PLUGIN_SLEEP": "0.5"})
    task = asyncio.create_task(source.get())
    ticks = 0
    while not task.done():
        ticks += 1
        await asyncio.sleep(0.01)
    await task
    assert ticks > 20
