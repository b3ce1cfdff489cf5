"""Client certificate authentication remembers what it verified, never past what a certificate allows."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import Encoding

from app.auth.authenticators import AuthenticationFailed, ClientCertificates, Credentials
from app.auth.user import UserInfo
from kube.pki import Authority, cert_pem


class Clock:
    """Seconds since the epoch, set by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def authority(tmp_path: Path) -> Authority:
    return Authority.create("test-ca")


def authenticator(tmp_path: Path, authority: Authority, clock: Clock) -> ClientCertificates:
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(cert_pem(authority.cert))
    return ClientCertificates(ca_file, clock=clock)


def test_a_remembered_certificate_is_refused_once_it_expires(tmp_path: Path, authority: Authority) -> None:
    cert, _key = authority.client("alice", ("dev",))
    credentials = Credentials(client_certificate=cert.public_bytes(Encoding.DER))
    not_after = cert.not_valid_after_utc.timestamp()
    clock = Clock(not_after - 10)
    certificates = authenticator(tmp_path, authority, clock)
    assert certificates.authenticate(credentials) == UserInfo("alice", groups=("dev",))
    clock.now = not_after  # its last valid second (Go's x509: NotAfter included)
    assert certificates.authenticate(credentials) == UserInfo("alice", groups=("dev",))
    clock.now = not_after + 1
    with pytest.raises(AuthenticationFailed, match="expired"):
        certificates.authenticate(credentials)
    with pytest.raises(AuthenticationFailed, match="expired"):
        certificates.authenticate(credentials)  # and again: nothing of it is remembered


def test_a_certificate_not_yet_valid_is_refused(tmp_path: Path, authority: Authority) -> None:
    cert, _key = authority.client("alice")
    certificates = authenticator(tmp_path, authority, Clock(cert.not_valid_before_utc.timestamp() - 1))
    with pytest.raises(AuthenticationFailed, match="not yet valid"):
        certificates.authenticate(Credentials(client_certificate=cert.public_bytes(Encoding.DER)))


def test_a_certificate_of_another_authority_is_refused_every_time(tmp_path: Path, authority: Authority) -> None:
    foreign, _key = Authority.create("other-ca").client("alice")
    certificates = authenticator(tmp_path, authority, Clock(foreign.not_valid_before_utc.timestamp() + 10))
    for _ in range(2):
        with pytest.raises(AuthenticationFailed, match="unknown authority"):
            certificates.authenticate(Credentials(client_certificate=foreign.public_bytes(Encoding.DER)))
