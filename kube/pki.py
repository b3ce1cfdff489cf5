"""Certificates and keys for a cluster: a CA, serving certificates, client certificates (CN =
user, O = groups) and service account signing keys, written with private keys at mode 0600."""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PrivateKey = ec.EllipticCurvePrivateKey
CA_VALIDITY = datetime.timedelta(days=3650)
LEAF_VALIDITY = datetime.timedelta(days=365)


def new_key() -> PrivateKey:
    """A P-256 key: fast to make and to verify, which every TLS handshake does."""
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def write_private(path: Path, data: bytes) -> None:
    """Write a secret readable by its owner only (created 0600, never briefly wider)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(path, 0o600)


def _builder(subject: x509.Name, issuer: x509.Name, key: PrivateKey, validity: datetime.timedelta) -> x509.CertificateBuilder:
    """A certificate of ``key``'s public half, valid from a few minutes ago (clocks differ) for ``validity``."""
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + validity)
    )


@dataclass(frozen=True)
class Authority:
    """A certificate authority that signs serving and client certificates."""

    cert: x509.Certificate
    key: PrivateKey

    @classmethod
    def create(cls, common_name: str = "dra-ca") -> Authority:
        key = new_key()
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        cert = (
            _builder(name, name, key, CA_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    @classmethod
    def load(cls, cert_path: Path, key_path: Path) -> Authority:
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return cls(x509.load_pem_x509_certificate(cert_path.read_bytes()), key)

    def save(self, cert_path: Path, key_path: Path) -> None:
        cert_path.parent.mkdir(parents=True, exist_ok=True)
        cert_path.write_bytes(cert_pem(self.cert))
        write_private(key_path, key_pem(self.key))

    def _issue(self, subject: x509.Name, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName] | None = None) -> tuple[x509.Certificate, PrivateKey]:
        key = new_key()
        builder = (
            _builder(subject, self.cert.subject, key, LEAF_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(self.key, hashes.SHA256()), key

    def serving(self, hosts: list[str]) -> tuple[x509.Certificate, PrivateKey]:
        """A serving certificate for DNS names and IP addresses."""
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else "dra-apiserver")])
        return self._issue(subject, ExtendedKeyUsageOID.SERVER_AUTH, sans)

    def client(self, user: str, groups: list[str] | tuple[str, ...] = ()) -> tuple[x509.Certificate, PrivateKey]:
        """A client certificate: the common name is the user, each organization a group."""
        attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
        return self._issue(x509.Name(attributes), ExtendedKeyUsageOID.CLIENT_AUTH)


def subject_user(cert: x509.Certificate) -> tuple[str, list[str]]:
    """(common name, organizations) of a certificate's subject."""
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return (str(cn[0].value) if cn else ""), [str(o.value) for o in orgs]
