"""Authenticators: who a request comes from, from its client certificate or bearer token.

Each answers a user, no opinion (None: the request carries no credential it knows), or fails
(``AuthenticationFailed``: a credential it knows but refuses). They are tried in upstream's
order, client certificates first, then bearer tokens (the static token file, then service
account tokens); a failure answers 401, and only a request without any credential is anonymous.
"""

from __future__ import annotations

import csv
import datetime
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from app.auth import jwt
from app.auth.user import (
    ALL_AUTHENTICATED,
    ALL_UNAUTHENTICATED,
    ANONYMOUS,
    ANONYMOUS_USER,
    EXTRA_CREDENTIAL_ID,
    EXTRA_NODE_NAME,
    EXTRA_NODE_UID,
    EXTRA_POD_NAME,
    EXTRA_POD_UID,
    UserInfo,
    service_account_groups,
    service_account_username,
)
from kube.pki import subject_user

log = logging.getLogger("app.auth")


class AuthenticationFailed(Exception):
    """A credential an authenticator knows but refuses (the reason goes to the log only)."""


@dataclass(slots=True)
class Credentials:
    """What a request presents: a bearer token and the TLS client certificate (DER), either may be absent."""

    token: str | None = None
    client_certificate: bytes | None = None


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer`` header (None without one); an empty token fails."""
    if not authorization:
        return None
    parts = authorization.split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer":
        return None
    if not parts[1]:
        raise AuthenticationFailed("invalid bearer token")
    return parts[1]


class Authenticator(Protocol):
    def authenticate(self, credentials: Credentials) -> UserInfo | None: ...


# ---- client certificates --------------------------------------------------------------


class ClientCertificates:
    """``--client-ca-file``: a certificate signed by one of the CAs names the user (CN) and groups (O).

    Verified certificates are remembered until they expire: a client sends the same one on every
    request of a connection, and a signature check costs more than the rest of authentication."""

    MAX_REMEMBERED = 4096

    def __init__(self, ca_file: str | Path, clock: Callable[[], float] = time.time) -> None:
        data = Path(ca_file).read_bytes()
        self.authorities = x509.load_pem_x509_certificates(data)
        # Seconds since the epoch: what a certificate's validity window is checked against.
        self.clock = clock
        # DER -> (its user, the last second it is valid): only certificates that passed every check.
        self._verified: dict[bytes, tuple[UserInfo, float]] = {}

    def authenticate(self, credentials: Credentials) -> UserInfo | None:
        der = credentials.client_certificate
        if der is None:
            return None
        now = self.clock()
        known = self._verified.get(der)
        if known is not None:
            if now <= known[1]:
                return known[0]
            del self._verified[der]  # expired since: checked anew below, and refused
        try:
            cert = x509.load_der_x509_certificate(der)
        except ValueError as exc:
            raise AuthenticationFailed(f"x509: malformed certificate: {exc}") from None
        self._verify(cert, now)
        name, groups = subject_user(cert)
        if not name:
            raise AuthenticationFailed("x509: certificate has no common name")
        user = UserInfo(name, groups=tuple(groups))
        if len(self._verified) >= self.MAX_REMEMBERED:
            self._verified.clear()
        self._verified[der] = (user, cert.not_valid_after_utc.timestamp())
        return user

    def _verify(self, cert: x509.Certificate, now: float) -> None:
        # Valid from NotBefore through NotAfter, both included, as Go's x509 verification has it.
        if not cert.not_valid_before_utc.timestamp() <= now <= cert.not_valid_after_utc.timestamp():
            raise AuthenticationFailed("x509: certificate has expired or is not yet valid")
        try:
            usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        except x509.ExtensionNotFound:
            usages = None
        if usages is not None and ExtendedKeyUsageOID.CLIENT_AUTH not in usages and ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE not in usages:
            raise AuthenticationFailed("x509: certificate specifies an incompatible key usage")
        for authority in self.authorities:
            if authority.subject != cert.issuer:
                continue
            try:
                cert.verify_directly_issued_by(authority)
            except (ValueError, TypeError, Exception):
                continue
            return
        raise AuthenticationFailed("x509: certificate signed by unknown authority")


# ---- static tokens ----------------------------------------------------------------------


class TokenFile:
    """``--token-auth-file``: CSV lines ``token,user,uid[,"group1,group2"]``."""

    def __init__(self, path: str | Path) -> None:
        self.tokens: dict[str, UserInfo] = {}
        with open(path, newline="") as handle:
            for number, record in enumerate(csv.reader(handle), start=1):
                if not record:
                    continue
                if len(record) < 3:
                    raise ValueError(f"token file '{path}' must have at least 3 columns (token, user name, user uid), found {len(record)}")
                if not record[0]:
                    log.warning("empty token in token file", extra={"path": str(path), "record": number})
                    continue
                groups = tuple(record[3].split(",")) if len(record) >= 4 else ()
                self.tokens[record[0]] = UserInfo(record[1], record[2], groups)

    def authenticate(self, credentials: Credentials) -> UserInfo | None:
        if credentials.token is None:
            return None
        return self.tokens.get(credentials.token)


# ---- service account tokens ---------------------------------------------------------------

# (group, resource, namespace, name) -> the stored object, or None.
Lookup = Callable[[str, str, str, str], dict[str, Any] | None]


class ServiceAccountTokens:
    """Issues and checks signed service account tokens (JWTs): the issuer and audience must be
    ours, the token unexpired, and the service account (and a bound pod, secret or node) must
    still be the one it was issued for."""

    MAX_REMEMBERED = 4096

    def __init__(
        self,
        *,
        issuers: Sequence[str],
        signing_key: jwt.PrivateKey | None,
        public_keys: Sequence[jwt.PublicKey],
        audiences: Sequence[str],
        lookup: Lookup,
        max_expiration: int = 0,
    ) -> None:
        self.issuers = tuple(issuers)
        self.signing_key = signing_key
        self.public_keys = list(public_keys)
        self.audiences = tuple(audiences) or self.issuers[:1]
        self.lookup = lookup
        self.max_expiration = max_expiration
        # token -> (its claims, expiry) once its signature, times and audience passed: checking
        # a signature costs as much as serving a GET. What the claims name is looked up every time.
        self._verified: dict[str, tuple[dict[str, Any], float]] = {}

    def issue(
        self,
        account: dict[str, Any],
        audiences: Sequence[str],
        expiration_seconds: int,
        bound: dict[str, Any] | None = None,
        node: dict[str, Any] | None = None,
    ) -> tuple[str, int]:
        """A signed token for ``account`` and its expiry (epoch seconds); ``bound`` is the Pod or
        Node the token is bound to, ``node`` the node a bound pod runs on."""
        assert self.signing_key is not None
        meta = account["metadata"]
        now = int(time.time())
        expires = now + expiration_seconds
        private: dict[str, Any] = {
            "namespace": meta["namespace"],
            "serviceaccount": {"name": meta["name"], "uid": meta["uid"]},
        }
        if bound is not None:
            bound_meta = bound["metadata"]
            private[str(bound.get("kind")).lower()] = {"name": bound_meta["name"], "uid": bound_meta["uid"]}
        if node is not None:
            private["node"] = {"name": node["metadata"]["name"], "uid": node["metadata"]["uid"]}
        claims = {
            "aud": list(audiences),
            "exp": expires,
            "iat": now,
            "iss": self.issuers[0],
            "jti": str(uuid.uuid4()),
            "kubernetes.io": private,
            "nbf": now,
            "sub": service_account_username(meta["namespace"], meta["name"]),
        }
        return jwt.sign(claims, self.signing_key), expires

    def authenticate(self, credentials: Credentials) -> UserInfo | None:
        token = credentials.token
        if token is None:
            return None
        known = self._verified.get(token)
        if known is not None and time.time() <= known[1]:
            return self._user(known[0])
        if not jwt.looks_like_jwt(token):
            return None
        try:
            unverified = _unverified_claims(token)
        except jwt.TokenError:
            return None  # not a JWT: another authenticator's business
        if unverified.get("iss") not in self.issuers:
            return None
        try:
            claims = jwt.verify(token, self.public_keys)
        except jwt.TokenError as exc:
            raise AuthenticationFailed(f"token could not be verified: {exc}") from None
        now = time.time()
        exp, nbf = claims.get("exp"), claims.get("nbf")
        if not isinstance(exp, int | float) or now > exp:
            raise AuthenticationFailed("service account token has expired")
        if isinstance(nbf, int | float) and now < nbf - LEEWAY_SECONDS:
            raise AuthenticationFailed("service account token is not valid yet")
        token_audiences = claims.get("aud")
        if isinstance(token_audiences, str):
            token_audiences = [token_audiences]
        if not isinstance(token_audiences, list) or not set(token_audiences) & set(self.audiences):
            raise AuthenticationFailed(f"token audiences {token_audiences!r} is invalid for the target audiences {list(self.audiences)!r}")
        user = self._user(claims)
        if len(self._verified) >= self.MAX_REMEMBERED:
            self._verified.clear()
        self._verified[token] = (claims, float(exp))
        return user

    def _user(self, claims: dict[str, Any]) -> UserInfo:
        private = claims.get("kubernetes.io")
        if not isinstance(private, dict):
            raise AuthenticationFailed("service account token has no kubernetes.io claims")
        namespace = private.get("namespace")
        account = private.get("serviceaccount") or {}
        if not isinstance(namespace, str) or not isinstance(account, dict) or not isinstance(account.get("name"), str):
            raise AuthenticationFailed("service account token claims are malformed")
        stored = self.lookup("", "serviceaccounts", namespace, account["name"])
        if stored is None:
            raise AuthenticationFailed(f'serviceaccounts "{account["name"]}" not found')
        if _deleted_a_while_ago(stored):
            raise AuthenticationFailed(f"service account {namespace}/{account['name']} has been deleted")
        uid = stored["metadata"].get("uid")
        if uid != account.get("uid"):
            raise AuthenticationFailed(f"service account UID ({uid}) does not match claim ({account.get('uid')})")
        extra: dict[str, tuple[str, ...]] = {}
        if isinstance(claims.get("jti"), str):
            extra[EXTRA_CREDENTIAL_ID] = (f"JTI={claims['jti']}",)
        for kind, resource, keys in _BOUND_KINDS:
            ref = private.get(kind)
            if not isinstance(ref, dict):
                continue
            # A token bound to a pod names the pod's node too, which need not outlive the pod.
            if kind != "node" or "pod" not in private:
                self._check_bound(kind, resource, namespace if kind != "node" else "", ref)
            if keys is not None:
                extra[keys[0]] = (str(ref.get("name") or ""),)
                extra[keys[1]] = (str(ref.get("uid") or ""),)
        return UserInfo(service_account_username(namespace, account["name"]), str(uid), service_account_groups(namespace), extra)

    def _check_bound(self, kind: str, resource: str, namespace: str, ref: dict[str, Any]) -> None:
        """The object a token is bound to must still exist, be the same (uid), and not have been
        deleted more than a minute ago (a deletion still in its grace period keeps tokens working)."""
        bound = self.lookup("", resource, namespace, str(ref.get("name") or ""))
        if bound is None or _deleted_a_while_ago(bound):
            raise AuthenticationFailed("service account token has been invalidated")
        if bound["metadata"].get("uid") != ref.get("uid"):
            raise AuthenticationFailed(f"{kind} UID ({bound['metadata'].get('uid')}) does not match service account {kind} ref claim ({ref.get('uid')})")


# (claim, resource, user extras naming it) of the objects a token may be bound to, in the order checked.
_BOUND_KINDS: tuple[tuple[str, str, tuple[str, str] | None], ...] = (
    ("secret", "secrets", None),
    ("pod", "pods", (EXTRA_POD_NAME, EXTRA_POD_UID)),
    ("node", "nodes", (EXTRA_NODE_NAME, EXTRA_NODE_UID)),
)
# Upstream's leeway on token times, which also lets a just-deleted bound object's tokens work on.
LEEWAY_SECONDS = 60


def _deleted_a_while_ago(obj: dict[str, Any]) -> bool:
    stamp = obj["metadata"].get("deletionTimestamp")
    if not stamp:
        return False
    try:
        deleted = datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return True
    return deleted < time.time() - LEEWAY_SECONDS


def _unverified_claims(token: str) -> dict[str, Any]:
    import orjson

    try:
        payload = token.split(".")[1]
        claims = orjson.loads(jwt._unb64url(payload))
    except (IndexError, orjson.JSONDecodeError) as exc:
        raise jwt.TokenError("malformed token") from exc
    if not isinstance(claims, dict):
        raise jwt.TokenError("malformed token")
    return claims


# ---- the chain --------------------------------------------------------------------------


class RequestAuthenticator:
    """The authenticators in upstream's order; ``system:authenticated`` for whoever they accept,
    and the anonymous user for a request that presents nothing any of them knows."""

    def __init__(self, authenticators: Sequence[Authenticator], anonymous: bool) -> None:
        self.authenticators = tuple(authenticators)
        self.anonymous = anonymous
        # id(user) -> (user, user with system:authenticated): the static token and certificate
        # authenticators hand out the same user object for the same credential.
        self._authenticated: dict[int, tuple[UserInfo, UserInfo]] = {}

    def _with_authenticated(self, user: UserInfo) -> UserInfo:
        known = self._authenticated.get(id(user))
        if known is not None and known[0] is user:
            return known[1]
        result = user.with_groups(ALL_AUTHENTICATED)
        if len(self._authenticated) >= 8192:
            self._authenticated.clear()
        self._authenticated[id(user)] = (user, result)
        return result

    def authenticate(self, credentials: Credentials) -> UserInfo | None:
        """The user, or None for a request to refuse with 401."""
        failed = False
        for authenticator in self.authenticators:
            try:
                user = authenticator.authenticate(credentials)
            except AuthenticationFailed as exc:
                log.info("authentication failed", extra={"authenticator": type(authenticator).__name__, "error": str(exc)})
                failed = True
                continue
            if user is not None:
                if user.name == ANONYMOUS or ALL_UNAUTHENTICATED in user.groups:
                    return user
                return self._with_authenticated(user)
        # A bearer token nobody accepts is refused, never taken for no credential at all.
        if failed or credentials.token is not None or not self.anonymous:
            return None
        return ANONYMOUS_USER
