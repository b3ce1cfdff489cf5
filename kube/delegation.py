"""Who is calling a worker's own HTTP endpoint, and may they: asked of the API server, as upstream's
components do for their secure ports (delegated authentication and authorization).

* A client certificate is checked by the TLS layer against the cluster's CA; its subject names
  the user (common name) and groups (organizations).
* A bearer token is handed to the API server in a SelfSubjectReview made *with that token*: the
  server authenticates it as for any request and answers who that is (no token is judged here).
* Without either the caller is anonymous.

The user's permission is a SubjectAccessReview, which this worker creates as itself. Answers are
remembered (tokens for ``token_ttl`` seconds, allowed and denied decisions for ``allowed_ttl`` and
``denied_ttl``: upstream's ``--authentication-token-webhook-cache-ttl`` and
``--authorization-webhook-cache-{authorized,unauthorized}-ttl``), so a burst of requests costs one review. A request the API server
must judge as the user's own (a dry run create) is sent impersonating the user
(:meth:`DelegatedAuth.create_as`), which the worker must be allowed (constrained impersonation:
``user-info`` for users, ``serviceaccount`` for service accounts).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509

from kube.client import KubeClient
from kube.errors import ApiError
from kube.kubeconfig import Connection
from kube.pki import subject_user

ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"
# Service accounts and nodes: their groups follow from their name, and constrained impersonation
# acts as them by name only.
NAME_ONLY_PREFIXES = ("system:serviceaccount:", "system:node:")
SELF_SUBJECT_REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


class Unauthenticated(Exception):
    """The credentials presented are not valid (401)."""


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def from_api(cls, info: dict[str, Any]) -> User:
        extra = tuple(sorted((k, tuple(v)) for k, v in (info.get("extra") or {}).items()))
        return cls(info.get("username", ""), tuple(info.get("groups") or ()), info.get("uid", ""), extra)


ANONYMOUS_USER = User(ANONYMOUS, (UNAUTHENTICATED,))


@dataclass
class DelegatedAuth:
    """Authentication and authorization of a worker's HTTP callers by the API server.

    ``client`` is the worker's own (it creates the SubjectAccessReviews); ``connection`` the
    same server without the worker's credentials, for the callers' tokens.
    """

    client: KubeClient
    connection: Connection
    token_ttl: float = 10.0
    allowed_ttl: float = 10.0
    denied_ttl: float = 10.0
    _users: dict[str, tuple[float, User]] = field(default_factory=dict)
    _decisions: dict[tuple[Any, ...], tuple[float, tuple[bool, str]]] = field(default_factory=dict)

    async def authenticate(self, authorization: str | None, certificate: bytes | None) -> User:
        """The caller; raises :class:`Unauthenticated` for a token the server refuses."""
        if certificate:
            name, groups = subject_user(x509.load_der_x509_certificate(certificate))
            return User(name, (*groups, AUTHENTICATED))
        if not authorization:
            return ANONYMOUS_USER
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("only bearer tokens are accepted in the Authorization header")
        key = hashlib.sha256(token.strip().encode()).hexdigest()
        cached = self._users.get(key)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        caller = KubeClient.from_connection(self.connection.with_token(token.strip()), user_agent=self.client.user_agent)
        try:
            review = await caller.create(SELF_SUBJECT_REVIEWS, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        except ApiError as exc:
            if exc.code == 401:
                raise Unauthenticated("the API server does not accept this token") from None
            raise
        finally:
            await caller.close()
        user = User.from_api((review.get("status") or {}).get("userInfo") or {})
        self._remember(self._users, key, user, self.token_ttl)
        return user

    async def allowed(self, user: User, **attributes: str) -> tuple[bool, str]:
        """Whether ``user`` may do what ``attributes`` (SubjectAccessReview resourceAttributes) say, and why not."""
        key = (user, tuple(sorted(attributes.items())))
        cached = self._decisions.get(key)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups), "resourceAttributes": attributes}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        review = await self.client.create(SUBJECT_ACCESS_REVIEWS, {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
        status = review.get("status") or {}
        decision = (bool(status.get("allowed")), str(status.get("reason") or ""))
        self._remember(self._decisions, key, decision, self.allowed_ttl if decision[0] else self.denied_ttl)
        return decision

    async def create_as(self, user: User, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        """POST ``obj`` to ``path`` as ``user`` (impersonated by this worker's client): the API
        server authorizes, admits and validates it as that user's request. The groups every user
        of the kind has (``system:authenticated``) are left to the server to add."""
        if user.name.startswith(NAME_ONLY_PREFIXES):  # upstream impersonates these by name alone
            caller = self.client.impersonating(user.name)
        else:
            groups = tuple(g for g in user.groups if g not in (AUTHENTICATED, UNAUTHENTICATED))
            caller = self.client.impersonating(user.name, uid=user.uid, groups=groups, extra=user.extra)
        try:
            return await caller.create(path, obj)
        finally:
            await caller.close()

    @staticmethod
    def _remember(cache: dict[Any, Any], key: Any, value: Any, ttl: float) -> None:
        if ttl <= 0:
            return
        if len(cache) > 4096:
            cache.clear()
        cache[key] = (time.monotonic() + ttl, value)


def forbidden_message(user: User, verb: str, resource: str, *, namespace: str = "", name: str = "", group: str = "", reason: str = "") -> str:
    """The API server's wording for a refused request."""
    qualified = f"{resource}.{group}" if group else resource
    what = f'{qualified} "{name}"' if name else qualified
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    message = f'{what} is forbidden: User "{user.name}" cannot {verb} resource "{resource}" in API group "{group}" {where}'
    return f"{message}: {reason}" if reason else message
