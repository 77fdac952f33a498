"""Exec credential plugins (``users[].user.exec``, client.authentication.k8s.io v1 and v1beta1).

The plugin is a program that prints an ``ExecCredential`` with a token and/or a client
certificate — ``kubelogin``, ``aws eks get-token``, ``gke-gcloud-auth-plugin``. It runs as a
subprocess (never blocking the event loop) with its ``env`` over the process environment and
``KUBERNETES_EXEC_INFO`` describing the request (``spec.interactive``, and ``spec.cluster`` when
``provideClusterInfo`` is set). Its answer is cached until its ``expirationTimestamp``; the plugin
runs again after that, or when the server answers 401 (``refresh``). Callers that ask while it
runs share that one run.

``interactiveMode`` (required by v1; v1beta1 defaults to ``IfAvailable``): ``Never`` gives the
plugin no standard input; ``IfAvailable`` and ``Always`` give it the terminal when standard input
is one, and then its standard error goes to the terminal too (it may prompt there); ``Always``
without a terminal fails. Otherwise the plugin's standard error goes to the
``kubeloop.client.exec`` logger and, when it fails, into the error.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import sys
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from kubeloop.client.credentials import CredentialError, Credentials

log = logging.getLogger("kubeloop.client.exec")

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
EXEC_INFO_ENV = "KUBERNETES_EXEC_INFO"
CLUSTER_EXTENSION = "client.authentication.k8s.io/exec"
"""The name of the cluster extension passed to the plugin as ``spec.cluster.config``."""

_NOT_INSTALLED = (
    "It looks like you are trying to use a client-go credential plugin that is not installed.\n\n"
    "To learn more about this feature, consult the documentation available at:\n"
    "      https://kubernetes.io/docs/reference/access-authn-authz/authentication/"
    "#client-go-credential-plugins"
)


@dataclass(frozen=True)
class ClusterInfo:
    """What ``provideClusterInfo`` passes to the plugin: the kubeconfig's cluster entry."""

    server: str
    ca_pem: bytes | None = None
    tls_server_name: str | None = None
    insecure_skip_tls_verify: bool = False
    proxy_url: str | None = None
    extension: Any = None
    """The cluster's ``client.authentication.k8s.io/exec`` extension, passed as ``config``."""


@dataclass(frozen=True)
class ExecConfig:
    """A kubeconfig user's ``exec`` entry (client-go ``api.ExecConfig``)."""

    command: str
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    install_hint: str = ""
    interactive_mode: str = "IfAvailable"
    provide_cluster_info: bool = False
    cluster: ClusterInfo | None = None
    environ: Mapping[str, str] | None = None
    """The environment ``env`` is laid over; None: the process's, as it is at each run."""

    @classmethod
    def from_kubeconfig(cls, entry: Mapping[str, Any], cluster: ClusterInfo | None, where: str) -> ExecConfig:
        """An ``exec`` entry of a kubeconfig user; ``where`` names it in errors."""
        command = entry.get("command")
        if not isinstance(command, str) or not command:
            raise CredentialError(f"{where}: exec.command is required")
        api_version = entry.get("apiVersion")
        if not api_version:
            raise CredentialError(f"{where}: exec.apiVersion is required")
        if api_version not in API_VERSIONS:
            raise CredentialError(
                f"{where}: exec.apiVersion {api_version!r} is not supported "
                f"(use one of {', '.join(API_VERSIONS)})"
            )
        mode = entry.get("interactiveMode")
        if not mode:
            if api_version.endswith("/v1"):
                raise CredentialError(f"{where}: exec.interactiveMode is required for {api_version}")
            mode = "IfAvailable"
        if mode not in INTERACTIVE_MODES:
            raise CredentialError(
                f"{where}: exec.interactiveMode {mode!r} must be one of {', '.join(INTERACTIVE_MODES)}"
            )
        env: list[tuple[str, str]] = []
        for item in entry.get("env") or ():
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item["name"]:
                raise CredentialError(f"{where}: every exec.env entry needs a name")
            env.append((item["name"], str(item.get("value") or "")))
        args = entry.get("args") or ()
        if not isinstance(args, (list, tuple)) or not all(isinstance(a, str) for a in args):
            raise CredentialError(f"{where}: exec.args must be a list of strings")
        return cls(
            command=command,
            api_version=str(api_version),
            args=tuple(args),
            env=tuple(env),
            install_hint=_printable(str(entry.get("installHint") or "")),
            interactive_mode=str(mode),
            provide_cluster_info=bool(entry.get("provideClusterInfo")),
            cluster=cluster,
        )


class ExecCredentials:
    """A ``CredentialSource`` backed by an exec plugin."""

    def __init__(self, config: ExecConfig) -> None:
        self.config = config
        self.runs = 0
        """How many times the plugin was started."""
        self._cached: Credentials | None = None
        self._running: asyncio.Task[Credentials] | None = None

    async def get(self) -> Credentials:
        """The plugin's last credentials until they expire; then it is run again (one run at a
        time, shared by every caller)."""
        cached = self._cached
        if cached is not None and not _expired(cached):
            return cached
        return await self._shared_run()

    async def refresh(self) -> Credentials:
        """Run the plugin for new credentials (the server refused the last ones)."""
        # A run already under way gives new credentials too: join it rather than start another.
        return await self._shared_run()

    async def _shared_run(self) -> Credentials:
        loop = asyncio.get_running_loop()
        task = self._running
        if task is None or task.get_loop() is not loop:
            task = loop.create_task(self._run_and_cache(), name=f"exec plugin {self.config.command}")
            task.add_done_callback(self._finished)
            self._running = task
        # One caller giving up (cancelled) does not stop the run the others wait for.
        return await asyncio.shield(task)

    def _finished(self, task: asyncio.Task[Credentials]) -> None:
        if self._running is task:
            self._running = None
        if not task.cancelled():
            task.exception()  # mark it retrieved: the callers waiting for it have seen it (or left)

    async def _run_and_cache(self) -> Credentials:
        credentials = await self._run()
        self._cached = credentials
        return credentials

    async def _run(self) -> Credentials:
        config = self.config
        interactive = self._interactive()
        env = dict(os.environ if config.environ is None else config.environ)
        env.update(config.env)
        env[EXEC_INFO_ENV] = orjson.dumps(self._exec_info(interactive)).decode()
        try:
            process = await asyncio.create_subprocess_exec(
                config.command,
                *config.args,
                env=env,
                stdin=sys.stdin if interactive else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=None if interactive else asyncio.subprocess.PIPE,
            )
        except FileNotFoundError:
            hint = f"\n\n{config.install_hint}" if config.install_hint else ""
            raise CredentialError(
                f"exec: executable {config.command} not found\n\n{_NOT_INSTALLED}{hint}"
            ) from None
        except OSError as exc:
            raise CredentialError(f"exec: cannot run {config.command}: {exc}") from None
        self.runs += 1
        try:
            stdout, stderr = await process.communicate()
        except BaseException:  # cancelled: the plugin must not outlive the run
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with contextlib.suppress(BaseException):
                await process.wait()
            raise
        message = (stderr or b"").decode(errors="replace").strip()
        if process.returncode != 0:
            hint = f"\n\n{config.install_hint}" if config.install_hint else ""
            details = f": {message}" if message else ""
            raise CredentialError(
                f"exec: executable {config.command} failed with exit code {process.returncode}{details}{hint}"
            )
        if message:
            log.info("exec plugin %s: %s", config.command, message)
        return self._parse(stdout)

    def _interactive(self) -> bool:
        mode = self.config.interactive_mode
        if mode == "Never":
            return False
        terminal = _stdin_is_terminal()
        if mode == "Always" and not terminal:
            raise CredentialError(
                f"exec plugin {self.config.command} cannot support interactive mode: "
                "standard input is not a terminal (interactiveMode is Always)"
            )
        return terminal

    def _exec_info(self, interactive: bool) -> dict[str, Any]:
        spec: dict[str, Any] = {"interactive": interactive}
        cluster = self.config.cluster
        if self.config.provide_cluster_info and cluster is not None:
            info: dict[str, Any] = {"server": cluster.server}
            if cluster.tls_server_name:
                info["tls-server-name"] = cluster.tls_server_name
            if cluster.insecure_skip_tls_verify:
                info["insecure-skip-tls-verify"] = True
            if cluster.ca_pem:
                info["certificate-authority-data"] = base64.b64encode(cluster.ca_pem).decode()
            if cluster.proxy_url:
                info["proxy-url"] = cluster.proxy_url
            if cluster.extension is not None:
                info["config"] = cluster.extension
            spec["cluster"] = info
        return {"apiVersion": self.config.api_version, "kind": "ExecCredential", "spec": spec}

    def _parse(self, stdout: bytes) -> Credentials:
        command = self.config.command
        try:
            answer = orjson.loads(stdout)
        except orjson.JSONDecodeError as exc:
            raise CredentialError(f"exec plugin {command} printed no ExecCredential: {exc}") from None
        if not isinstance(answer, dict) or answer.get("kind") != "ExecCredential":
            raise CredentialError(f"exec plugin {command} printed no ExecCredential")
        if answer.get("apiVersion") != self.config.api_version:
            raise CredentialError(
                f"exec plugin {command} is configured to use API version {self.config.api_version}, "
                f"plugin returned version {answer.get('apiVersion')!r}"
            )
        status = answer.get("status")
        if not isinstance(status, dict):
            raise CredentialError(f"exec plugin {command} didn't return a status field")
        token = _string(status, "token", command)
        cert = _string(status, "clientCertificateData", command)
        key = _string(status, "clientKeyData", command)
        if token is None and cert is None and key is None:
            raise CredentialError(f"exec plugin {command} didn't return a token or cert/key pair")
        if (cert is None) != (key is None):
            raise CredentialError(f"exec plugin {command} returned only certificate or key, not both")
        return Credentials(
            token=token,
            client_cert_pem=cert.encode() if cert else None,
            client_key_pem=key.encode() if key else None,
            expires_at=_expiration(status.get("expirationTimestamp"), command),
        )


def _string(status: Mapping[str, Any], name: str, command: str) -> str | None:
    value = status.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise CredentialError(f"exec plugin {command} returned a non-string status.{name}")
    return value


def _expiration(stamp: Any, command: str) -> datetime | None:
    if stamp is None or stamp == "":
        return None
    try:
        expires_at = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        raise CredentialError(
            f"exec plugin {command} returned a bad status.expirationTimestamp {stamp!r}"
        ) from None
    if expires_at.tzinfo is None:
        return expires_at.replace(tzinfo=UTC)
    return expires_at.astimezone(UTC)


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and not sys.stdin.closed and sys.stdin.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def _expired(credentials: Credentials) -> bool:
    return credentials.expires_at is not None and credentials.expires_at <= datetime.now(UTC)


def _printable(text: str) -> str:
    """``text`` with control characters (terminal escape sequences) shown as ``U+XXXX``, as
    client-go shows an installHint: a kubeconfig must not drive the user's terminal."""
    return "".join(
        ch if unicodedata.category(ch)[0] in "LMNPSZ" or "\t" <= ch <= "\r" else f"U+{ord(ch):04X}"
        for ch in text
    )
