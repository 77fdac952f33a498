"""ServiceAccount tokens that authenticated are taken again without verifying them, for at most
ten seconds and never past their expiry, until an account or bound object is deleted."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kubeloop.apiserver.auth import tokens as tokens_module
from kubeloop.apiserver.auth.tokens import AUDIENCE, SUCCESS_CACHE_SECONDS, ServiceAccountTokens


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    clock = _Clock()
    monkeypatch.setattr(tokens_module.time, "monotonic", clock.monotonic)
    return clock


def _issuer() -> tuple[ServiceAccountTokens, list[tuple[str, str]]]:
    """Tokens of one account, ``robot`` in ``team`` (uid ``u1``), and the account lookups made:
    each verification of a token makes one."""
    key = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    lookups: list[tuple[str, str]] = []

    def account_uid(namespace: str, name: str) -> str | None:
        lookups.append((namespace, name))
        return "u1" if (namespace, name) == ("team", "robot") else None

    return ServiceAccountTokens(key, account_uid), lookups


def test_a_success_is_reused_for_ten_seconds_and_a_failure_never(clock: _Clock) -> None:
    tokens, lookups = _issuer()
    token, _ = tokens.issue("team", "robot", "u1", [AUDIENCE], 3600)
    user = tokens.authenticate(token)
    assert user is not None and user.name == "system:serviceaccount:team:robot"
    assert tokens.authenticate(token) == user
    clock.now += SUCCESS_CACHE_SECONDS - 0.001
    assert tokens.authenticate(token) == user
    assert len(lookups) == 1  # verified once
    clock.now += 0.002
    assert tokens.authenticate(token) == user
    assert len(lookups) == 2  # verified again once ten seconds had passed
    stranger, _ = tokens.issue("team", "other", "u2", [AUDIENCE], 3600)
    assert tokens.authenticate(stranger) is None
    assert tokens.authenticate(stranger) is None
    assert len(lookups) == 4  # a failure is verified every time


def test_a_token_is_not_reused_past_its_expiry(clock: _Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    tokens, lookups = _issuer()
    token, expires = tokens.issue("team", "robot", "u1", [AUDIENCE], 3600)
    monkeypatch.setattr(tokens_module.time, "time", lambda: expires - 4)  # four seconds left
    assert tokens.authenticate(token) is not None
    clock.now += 3.9
    assert tokens.authenticate(token) is not None
    assert len(lookups) == 1
    clock.now += 0.2  # past its expiry, though within ten seconds of the first verification
    monkeypatch.setattr(tokens_module.time, "time", lambda: expires + 0.1)
    assert tokens.authenticate(token) is None


def test_a_deletion_of_an_account_or_bound_object_ends_every_reuse(clock: _Clock) -> None:
    tokens, lookups = _issuer()
    token, _ = tokens.issue("team", "robot", "u1", [AUDIENCE], 3600)
    assert tokens.authenticate(token) is not None
    tokens.forget_authenticated({"metadata": {"name": "robot"}}, {"metadata": {"name": "robot"}})  # an update
    assert tokens.authenticate(token) is not None
    assert len(lookups) == 1
    tokens.forget_authenticated(None, {"metadata": {"name": "pod-1"}})  # a deletion
    assert tokens.authenticate(token) is not None
    assert len(lookups) == 2


def test_a_token_for_another_audience_is_not_taken(clock: _Clock) -> None:
    """Only a token for the API server authenticates a request, reused or not."""
    tokens, _ = _issuer()
    token, _ = tokens.issue("team", "robot", "u1", ["vault"], 3600)
    assert tokens.authenticate(token) is None
    assert tokens.authenticate(token) is None
    assert tokens.verify(token) is not None  # a TokenReview for "vault" still sees it
