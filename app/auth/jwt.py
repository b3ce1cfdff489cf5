"""Compact JWS tokens signed with RS256 or ES256 (what service account tokens use), with
``cryptography`` doing the signing and the checking."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey


class TokenError(Exception):
    """A token that is not a well-formed, correctly signed JWT."""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64url(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise TokenError("malformed token") from exc


def key_id(public_key: PublicKey) -> str:
    """A key's id in token headers: the SHA-256 of its DER public key (as upstream derives it)."""
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return b64url(hashlib.sha256(der).digest())


def _algorithm(key: PrivateKey | PublicKey) -> str:
    if isinstance(key, rsa.RSAPrivateKey | rsa.RSAPublicKey):
        return "RS256"
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1":
        return "ES256"
    raise TokenError("unsupported key: use an RSA or P-256 EC key")


def sign(claims: dict[str, Any], key: PrivateKey) -> str:
    algorithm = _algorithm(key)
    header = {"alg": algorithm, "kid": key_id(key.public_key())}
    signing_input = f"{b64url(orjson.dumps(header))}.{b64url(orjson.dumps(claims))}".encode("ascii")
    if isinstance(key, rsa.RSAPrivateKey):
        signature = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    else:
        r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return f"{signing_input.decode('ascii')}.{b64url(signature)}"


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2


def verify(token: str, keys: list[PublicKey]) -> dict[str, Any]:
    """The claims of ``token`` when one of ``keys`` signed it; TokenError otherwise."""
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenError("malformed token")
    try:
        header = orjson.loads(_unb64url(parts[0]))
        claims = orjson.loads(_unb64url(parts[1]))
    except orjson.JSONDecodeError as exc:
        raise TokenError("malformed token") from exc
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise TokenError("malformed token")
    signature = _unb64url(parts[2])
    signing_input = f"{parts[0]}.{parts[1]}".encode("ascii")
    algorithm = header.get("alg")
    for key in keys:
        if _algorithm(key) != algorithm:
            continue
        try:
            if isinstance(key, rsa.RSAPublicKey):
                key.verify(signature, signing_input, padding.PKCS1v15(), hashes.SHA256())
            else:
                if len(signature) != 64:
                    continue
                der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
                key.verify(der, signing_input, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            continue
        return claims
    raise TokenError("invalid signature")


def load_private_key(path: str | Path) -> PrivateKey:
    key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise ValueError(f"{path}: not an RSA or EC private key")
    return key


def load_public_keys(path: str | Path) -> list[PublicKey]:
    """Every public key in a PEM file: public keys, certificates' keys, and private keys' public halves."""
    from cryptography import x509

    data = Path(path).read_bytes()
    keys: list[PublicKey] = []
    for block in data.split(b"-----END ")[:-1]:
        start = block.rfind(b"-----BEGIN ")
        if start < 0:
            continue
        label = block[start + len(b"-----BEGIN ") :].split(b"-----", 1)[0]
        pem = block[start:] + b"-----END " + label + b"-----\n"
        loaded: Any
        if label == b"CERTIFICATE":
            loaded = x509.load_pem_x509_certificate(pem).public_key()
        elif b"PRIVATE KEY" in label:
            loaded = serialization.load_pem_private_key(pem, password=None).public_key()
        else:
            loaded = serialization.load_pem_public_key(pem)
        if isinstance(loaded, rsa.RSAPublicKey | ec.EllipticCurvePublicKey):
            keys.append(loaded)
    if not keys:
        raise ValueError(f"{path}: no public keys found")
    return keys
