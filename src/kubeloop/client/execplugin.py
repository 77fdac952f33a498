"""Exec credential plugins (``users[].user.exec``, client.authentication.k8s.io v1 and v1beta1).

The plugin is a program that prints an ``ExecCredential`` with a token or a client certificate.
It runs as a subprocess (never blocking the event loop) with ``KUBERNETES_EXEC_INFO`` describing
the request; its answer is cached until its ``expirationTimestamp`` and the plugin runs again
after that, or when the server answers 401 (``refresh``). Concurrent callers share one run.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from kubeloop.client.credentials import CredentialError, Credentials

log = logging.getLogger("kubeloop.client.exec")

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")


@dataclass(frozen=True)
class ClusterInfo:
    """What ``provideClusterInfo`` passes to the plugin (the kubeconfig's cluster entry)."""

    server: str
    ca_pem: bytes | None = None
    tls_server_name: str | None = None
    insecure_skip_tls_verify: bool = False
    proxy_url: str | None = None
    extension: Any = None


@dataclass(frozen=True)
class ExecConfig:
    command: str
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    install_hint: str = ""
    interactive_mode: str = "IfAvailable"
    provide_cluster_info: bool = False
    cluster: ClusterInfo | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    @classmethod
    def from_kubeconfig(cls, entry: Mapping[str, Any], cluster: ClusterInfo, where: str) -> ExecConfig:
        """An ``exec`` entry of a kubeconfig user; ``where`` names it in errors."""
        command = entry.get("command")
        if not isinstance(command, str) or not command:
            raise CredentialError(f"{where}: exec.command is required")
        api_version = entry.get("apiVersion")
        if api_version not in API_VERSIONS:
            raise CredentialError(
                f"{where}: exec.apiVersion {api_version!r} is not supported (use one of {', '.join(API_VERSIONS)})"
            )
        mode = entry.get("interactiveMode")
        if mode is None:
            if api_version.endswith("/v1"):
                raise CredentialError(f"{where}: exec.interactiveMode is required for {api_version}")
            mode = "IfAvailable"
        if mode not in INTERACTIVE_MODES:
            raise CredentialError(
                f"{where}: exec.interactiveMode {mode!r} must be one of {', '.join(INTERACTIVE_MODES)}"
            )
        env: list[tuple[str, str]] = []
        for item in entry.get("env") or ():
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                raise CredentialError(f"{where}: exec.env entries need a name and a value")
            env.append((item["name"], str(item.get("value", ""))))
        args = entry.get("args") or ()
        if not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args):
            raise CredentialError(f"{where}: exec.args must be a list of strings")
        return cls(
            command=command,
            api_version=api_version,
            args=tuple(args),
            env=tuple(env),
            install_hint=str(entry.get("installHint") or ""),
            interactive_mode=mode,
            provide_cluster_info=bool(entry.get("provideClusterInfo")),
            cluster=cluster,
        )


class ExecCredentials:
    """A ``CredentialSource`` backed by an exec plugin."""

    def __init__(self, config: ExecConfig) -> None:
        self.config = config
        self.runs = 0
        self._cached: Credentials | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> Credentials:
        async with self._lock:
            if self._cached is None or _expired(self._cached):
                self._cached = await self._run()
            return self._cached

    async def refresh(self) -> Credentials:
        stale = self._cached
        async with self._lock:
            if self._cached is stale:  # nobody re-ran it while this caller waited
                self._cached = await self._run()
            assert self._cached is not None
            return self._cached

    async def _run(self) -> Credentials:
        config = self.config
        interactive = config.interactive_mode != "Never" and sys.stdin is not None and sys.stdin.isatty()
        if config.interactive_mode == "Always" and not interactive:
            raise CredentialError(
                f"exec plugin {config.command} is configured to always be interactive, "
                "but standard input is not a terminal"
            )
        env = dict(config.environ)
        env.update(config.env)
        env["KUBERNETES_EXEC_INFO"] = orjson.dumps(self._exec_info(interactive)).decode()
        try:
            process = await asyncio.create_subprocess_exec(
                config.command,
                *config.args,
                env=env,
                stdin=None if interactive else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except FileNotFoundError:
            hint = f"\n\n{config.install_hint}" if config.install_hint else ""
            raise CredentialError(f"exec: executable {config.command} not found{hint}") from None
        stdout, stderr = await process.communicate()
        self.runs += 1
        if stderr:
            log.info("exec plugin %s: %s", config.command, stderr.decode(errors="replace").strip())
        if process.returncode != 0:
            raise CredentialError(
                f"exec: executable {config.command} failed with exit code {process.returncode}: "
                f"{stderr.decode(errors='replace').strip()}"
            )
        return self._parse(stdout)

    def _exec_info(self, interactive: bool) -> dict[str, Any]:
        spec: dict[str, Any] = {"interactive": interactive}
        cluster = self.config.cluster
        if self.config.provide_cluster_info and cluster is not None:
            info: dict[str, Any] = {"server": cluster.server}
            if cluster.ca_pem:
                info["certificate-authority-data"] = base64.b64encode(cluster.ca_pem).decode()
            if cluster.tls_server_name:
                info["tls-server-name"] = cluster.tls_server_name
            if cluster.insecure_skip_tls_verify:
                info["insecure-skip-tls-verify"] = True
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
                f"exec plugin {command} answered with apiVersion {answer.get('apiVersion')!r}, "
                f"expected {self.config.api_version!r}"
            )
        status = answer.get("status")
        if not isinstance(status, dict):
            raise CredentialError(f"exec plugin {command} didn't return a status field")
        token = status.get("token") or None
        cert = status.get("clientCertificateData") or None
        key = status.get("clientKeyData") or None
        if (cert is None) != (key is None):
            raise CredentialError(
                f"exec plugin {command} returned only one of clientCertificateData and clientKeyData"
            )
        if token is None and cert is None:
            raise CredentialError(f"exec plugin {command} didn't return a token or cert/key pair")
        expires_at = None
        stamp = status.get("expirationTimestamp")
        if stamp:
            try:
                expires_at = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
            except ValueError:
                raise CredentialError(
                    f"exec plugin {command} returned a bad expirationTimestamp {stamp!r}"
                ) from None
            if expires_at.tzinfo is None:
                expires_at = expires_at.replace(tzinfo=UTC)
        return Credentials(
            token=str(token) if token else None,
            client_cert_pem=str(cert).encode() if cert else None,
            client_key_pem=str(key).encode() if key else None,
            expires_at=expires_at,
        )


def _expired(credentials: Credentials) -> bool:
    return credentials.expires_at is not None and credentials.expires_at <= datetime.now(UTC)
