"""Credential sources: what the client presents to the server, and how it is renewed.

A source hands out ``Credentials`` (a bearer token and/or a client certificate) from ``get()``,
cached, and renews them from ``refresh()`` — the client calls it after a 401. Static tokens and
certificates never change. A token file is re-read, as client-go's cached file token source
does: service-account tokens are rotated on disk by the kubelet, so the file is read again once
the token read from it is a minute old (``get``), and at once after a 401 (``refresh``); when a
re-read fails, the last good token is kept. Exec plugins live in ``execplugin``.

Where it sits: ``config`` builds a source from a kubeconfig user or the service account; the REST
client asks it for credentials before requests and after a 401.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

log = logging.getLogger("kubeloop.client.credentials")

TOKEN_FILE_MAX_AGE = 60.0
"""Seconds a token read from a file is used before the file is read again (client-go: a minute)."""


@dataclass(frozen=True)
class Credentials:
    """What a request presents: a bearer token, a client certificate (PEM), or both."""

    token: str | None = None
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = None
    expires_at: datetime | None = None
    """Aware UTC; after it, ``get()`` returns new credentials. None: they never expire."""


class CredentialSource(Protocol):
    """Where a client's credentials come from (a kubeconfig's token or certificates, a token file,
    an exec plugin): asked before each request, and again after a 401."""

    async def get(self) -> Credentials:
        """The current credentials: cached, renewed by the source once they expire."""
        ...

    async def refresh(self) -> Credentials:
        """New credentials now — the server rejected the current ones (401)."""
        ...


class CredentialError(Exception):
    """Credentials could not be obtained (unreadable token file, failing exec plugin)."""


class StaticCredentials:
    """A token and/or client certificate fixed in the configuration."""

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials

    async def get(self) -> Credentials:
        """The configured credentials."""
        return self._credentials

    async def refresh(self) -> Credentials:
        """The configured credentials again (they cannot change)."""
        return self._credentials


def read_token_file(path: Path) -> str:
    """The token in ``path`` without surrounding whitespace; ``CredentialError`` if unreadable or empty."""
    try:
        token = path.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise CredentialError(f"cannot read the token file {path}: {exc}") from None
    if not token:
        raise CredentialError(f"the token file {path} is empty")
    return token


class TokenFileCredentials:
    """A bearer token read from a file, re-read when ``max_age`` seconds old and after a 401.

    ``fallback`` (a kubeconfig's ``token`` beside its ``tokenFile``) is used while the file cannot
    be read and nothing was read from it yet; after a good read, a failing re-read keeps the last
    good token (logged). A client certificate from the configuration, if any, is presented too.
    The credentials' ``expires_at`` is when the file is due to be read again, so that a client
    that caches credentials asks for them again by then.
    """

    def __init__(
        self,
        path: Path,
        *,
        max_age: float = TOKEN_FILE_MAX_AGE,
        certificate: Credentials | None = None,
        fallback: str | None = None,
    ) -> None:
        self.path = path
        self.max_age = max_age
        self._certificate = certificate or Credentials()
        self._fallback = fallback
        self._credentials: Credentials | None = None
        self._read_at = 0.0

    async def get(self) -> Credentials:
        """The token read from the file, read again once ``max_age`` has passed."""
        if self._credentials is None or time.monotonic() - self._read_at >= self.max_age:
            return await self.refresh()
        return self._credentials

    async def refresh(self) -> Credentials:
        """The token read from the file now (a projected token the kubelet rotated); the last one
        read (or the fallback) while the file cannot be read."""
        try:
            token = await asyncio.to_thread(read_token_file, self.path)
        except CredentialError as exc:
            last = self._credentials.token if self._credentials is not None else self._fallback
            if last is None:
                raise
            log.warning("%s; using the previous token", exc)  # tried again on the next get()
            return self._with_token(last, expires_at=datetime.now(UTC))
        self._read_at = time.monotonic()
        self._credentials = self._with_token(
            token, expires_at=datetime.now(UTC) + timedelta(seconds=self.max_age)
        )
        return self._credentials

    def _with_token(self, token: str, *, expires_at: datetime) -> Credentials:
        return Credentials(
            token=token,
            client_cert_pem=self._certificate.client_cert_pem,
            client_key_pem=self._certificate.client_key_pem,
            expires_at=expires_at,
        )
