"""Credential sources: what the client presents to the server, and how it is renewed.

A source hands out ``Credentials`` (a bearer token and/or a client certificate) from ``get()``,
cached, and renews them from ``refresh()`` — the client calls it after a 401. Static tokens and
certificates never change; a token file is re-read (service-account tokens are rotated on disk:
client-go re-reads at most once a minute, and at once after a 401); exec plugins live in
``execplugin``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Credentials:
    token: str | None = None
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = None
    expires_at: datetime | None = None  # aware UTC; None: does not expire


class CredentialSource(Protocol):
    async def get(self) -> Credentials: ...

    async def refresh(self) -> Credentials: ...


class CredentialError(Exception):
    """Credentials could not be obtained (unreadable file, failing plugin)."""


class StaticCredentials:
    """A token and/or client certificate fixed in the configuration."""

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials

    async def get(self) -> Credentials:
        return self._credentials

    async def refresh(self) -> Credentials:
        return self._credentials


class TokenFileCredentials:
    """A token read from a file, re-read when older than ``max_age`` seconds and after a 401.

    A client certificate from the configuration, if any, is presented alongside.
    """

    def __init__(self, path: Path, *, max_age: float = 60.0, certificate: Credentials | None = None) -> None:
        self.path = path
        self.max_age = max_age
        self._certificate = certificate or Credentials()
        self._token: str | None = None
        self._read_at = 0.0

    async def get(self) -> Credentials:
        if self._token is None or time.monotonic() - self._read_at > self.max_age:
            await self._read()
        return self._with_token()

    async def refresh(self) -> Credentials:
        await self._read()
        return self._with_token()

    async def _read(self) -> None:
        try:
            text = await asyncio.to_thread(self.path.read_text)
        except OSError as exc:
            raise CredentialError(f"cannot read the token file {self.path}: {exc}") from None
        token = text.strip()
        if not token:
            raise CredentialError(f"the token file {self.path} is empty")
        self._token = token
        self._read_at = time.monotonic()

    def _with_token(self) -> Credentials:
        return Credentials(
            token=self._token,
            client_cert_pem=self._certificate.client_cert_pem,
            client_key_pem=self._certificate.client_key_pem,
        )
