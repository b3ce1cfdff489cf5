"""Service account tokens without a server: a signature is checked once per token, while expiry
and what the token names are checked on every request."""

from __future__ import annotations

import datetime
import time
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from app.auth import authenticators, jwt
from app.auth.authenticators import AuthenticationFailed, Credentials, ServiceAccountTokens

ACCOUNT: dict[str, Any] = {"metadata": {"namespace": "ns", "name": "robot", "uid": "uid-1"}}
SECRET: dict[str, Any] = {"metadata": {"namespace": "ns", "name": "key", "uid": "uid-2"}}


def tokens(objects: dict[tuple[str, str, str], dict[str, Any]]) -> ServiceAccountTokens:
    key = ec.generate_private_key(ec.SECP256R1())
    return ServiceAccountTokens(
        issuers=["https://issuer"], signing_key=key, public_keys=[key.public_key()], audiences=["https://issuer"],
        lookup=lambda _group, resource, namespace, name: objects.get((resource, namespace, name)),
    )  # fmt: skip


def test_a_verified_token_is_not_verified_again_but_still_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    objects: dict[tuple[str, str, str], dict[str, Any]] = {("serviceaccounts", "ns", "robot"): ACCOUNT, ("secrets", "ns", "key"): {"kind": "Secret", **SECRET}}
    sa_tokens = tokens(objects)
    token, expires = sa_tokens.issue(ACCOUNT, ["https://issuer"], 600, bound={"kind": "Secret", **SECRET})
    verified: list[str] = []
    real_verify = jwt.verify

    def counting_verify(text: str, keys: Any) -> Any:
        verified.append(text)
        return real_verify(text, keys)

    monkeypatch.setattr(jwt, "verify", counting_verify)

    for _ in range(3):
        user = sa_tokens.authenticate(Credentials(token))
        assert user is not None and user.name == "system:serviceaccount:ns:robot"
    assert verified == [token]

    del objects[("secrets", "ns", "key")]
    with pytest.raises(AuthenticationFailed, match="has been invalidated"):
        sa_tokens.authenticate(Credentials(token))
    objects[("secrets", "ns", "key")] = {"kind": "Secret", **SECRET}
    assert sa_tokens.authenticate(Credentials(token)) is not None
    monkeypatch.setattr(authenticators.time, "time", lambda: expires + 1)
    with pytest.raises(AuthenticationFailed, match="expired"):
        sa_tokens.authenticate(Credentials(token))


def test_a_bound_object_deleted_over_a_minute_ago_invalidates_its_tokens() -> None:
    objects = {("serviceaccounts", "ns", "robot"): ACCOUNT, ("secrets", "ns", "key"): SECRET}
    sa_tokens = tokens(objects)
    token, _expires = sa_tokens.issue(ACCOUNT, ["https://issuer"], 600, bound={"kind": "Secret", **SECRET})

    def deleted(seconds_ago: int) -> dict[str, Any]:
        stamp = datetime.datetime.fromtimestamp(time.time() - seconds_ago, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"metadata": {**SECRET["metadata"], "deletionTimestamp": stamp}}

    objects[("secrets", "ns", "key")] = deleted(30)
    assert sa_tokens.authenticate(Credentials(token)) is not None  # still in its grace period
    objects[("secrets", "ns", "key")] = deleted(90)
    with pytest.raises(AuthenticationFailed, match="has been invalidated"):
        sa_tokens.authenticate(Credentials(token))
    objects[("secrets", "ns", "key")] = {"metadata": {**SECRET["metadata"], "uid": "uid-other"}}
    with pytest.raises(AuthenticationFailed, match=r"secret UID \(uid-other\) does not match service account secret ref claim \(uid-2\)"):
        sa_tokens.authenticate(Credentials(token))
