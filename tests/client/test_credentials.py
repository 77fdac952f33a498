"""Token files: re-read once they are a minute old and at once after a 401, the last good token
kept when a re-read fails — and a rotated token picked up by the REST client against the server."""

from __future__ import annotations

import asyncio
import pathlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from kubeloop.client.config import load_kubeconfig
from kubeloop.client.credentials import (
    TOKEN_FILE_MAX_AGE,
    CredentialError,
    Credentials,
    StaticCredentials,
    TokenFileCredentials,
)
from kubeloop.client.rest import APIClient
from kubeloop.errors import Unauthorized
from tests.client.kubeconfigs import single, write
from tests.conftest import ServerThread


async def test_token_file_from_a_kubeconfig_is_cached_and_refreshed(tmp_path: pathlib.Path) -> None:
    (tmp_path / "token").write_text("one\n")
    path = write(tmp_path / "config", single({"server": "https://x"}, {"tokenFile": "token"}))
    source = load_kubeconfig(path).credentials
    assert isinstance(source, TokenFileCredentials) and source.max_age == TOKEN_FILE_MAX_AGE == 60
    first = await source.get()
    assert first.token == "one"  # whitespace around it stripped
    # expires_at tells a caching client when to ask again: when the file is due to be re-read.
    assert first.expires_at is not None
    assert timedelta(seconds=55) < first.expires_at - datetime.now(UTC) <= timedelta(seconds=60)
    (tmp_path / "token").write_text("two")
    assert (await source.get()).token == "one"  # cached for a minute, as client-go does
    assert (await source.refresh()).token == "two"  # after a 401: read at once
    assert (await source.get()).token == "two"


async def test_token_file_is_re_read_when_old(tmp_path: pathlib.Path) -> None:
    (tmp_path / "token").write_text("one")
    source = TokenFileCredentials(tmp_path / "token", max_age=0.2)
    assert (await source.get()).token == "one"
    (tmp_path / "token").write_text("two")
    assert (await source.get()).token == "one"
    await asyncio.sleep(0.25)
    assert (await source.get()).token == "two"


async def test_a_failing_re_read_keeps_the_last_token(tmp_path: pathlib.Path) -> None:
    token = tmp_path / "token"
    token.write_text("good")
    certificate = Credentials(client_cert_pem=b"CERT", client_key_pem=b"KEY")
    source = TokenFileCredentials(token, max_age=0, certificate=certificate)
    assert (await source.get()).token == "good"
    token.write_text("  \n")  # mid-rotation: empty
    kept = await source.refresh()
    assert (kept.token, kept.client_cert_pem, kept.client_key_pem) == ("good", b"CERT", b"KEY")
    token.unlink()
    assert (await source.get()).token == "good"
    token.write_text("rotated")
    assert (await source.get()).token == "rotated"  # tried again on the next get

    # Nothing read yet: the fallback (a kubeconfig's token beside its tokenFile), else an error.
    absent = tmp_path / "absent"
    assert (await TokenFileCredentials(absent, fallback="static").get()).token == "static"
    with pytest.raises(CredentialError, match="cannot read the token file"):
        await TokenFileCredentials(absent).get()


async def test_static_credentials_never_change() -> None:
    credentials = Credentials(token="t")
    source = StaticCredentials(credentials)
    assert await source.get() is credentials
    assert await source.refresh() is credentials


async def test_rotated_token_file_against_the_server(
    tmp_path: pathlib.Path, shared_server: ServerThread
) -> None:
    """The client presents the token file's content; once the file holds a good token, a 401
    makes the client read it again and the request succeeds."""
    token = tmp_path / "token"
    token.write_text("not-the-token")
    config = replace(load_kubeconfig(shared_server.kubeconfig), credentials=TokenFileCredentials(token))
    async with APIClient(config) as client:
        with pytest.raises(Unauthorized):
            await client.request("GET", "/api/v1/namespaces/default")
        token.write_text(shared_server.token)  # rotated
        assert (await client.request("GET", "/api/v1/namespaces/default"))[0] == 200
