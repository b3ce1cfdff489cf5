"""The authenticated user (name, uid, groups, extra) and the well-known names of the system."""

from __future__ import annotations

from dataclasses import dataclass, field

# Groups every request falls into, one or the other.
ALL_AUTHENTICATED = "system:authenticated"
ALL_UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
# Members may do anything, and RBAC escalation checks never stop them.
SYSTEM_PRIVILEGED_GROUP = "system:masters"
NODES_GROUP = "system:nodes"
NODE_USER_PREFIX = "system:node:"
SERVICE_ACCOUNT_USER_PREFIX = "system:serviceaccount:"
SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"
SERVICE_ACCOUNT_GROUP_PREFIX = "system:serviceaccounts:"
# The user extras a bound service account token carries about the pod and node it was issued for.
EXTRA_NODE_NAME = "authentication.kubernetes.io/node-name"
EXTRA_NODE_UID = "authentication.kubernetes.io/node-uid"
EXTRA_POD_NAME = "authentication.kubernetes.io/pod-name"
EXTRA_POD_UID = "authentication.kubernetes.io/pod-uid"
EXTRA_CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"


@dataclass(frozen=True)
class UserInfo:
    """Who made a request, as the authenticators established it."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def with_groups(self, *groups: str) -> UserInfo:
        """The same user with ``groups`` added where missing."""
        missing = tuple(g for g in groups if g not in self.groups)
        if not missing:
            return self
        return UserInfo(self.name, self.uid, self.groups + missing, self.extra)

    def to_api(self) -> dict[str, object]:
        """authentication.k8s.io/v1 UserInfo (empty fields left out, as upstream serialises them)."""
        out: dict[str, object] = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


ANONYMOUS_USER = UserInfo(ANONYMOUS, groups=(ALL_UNAUTHENTICATED,))


def service_account_username(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_USER_PREFIX}{namespace}:{name}"


def split_service_account_username(username: str) -> tuple[str, str] | None:
    """(namespace, name) of ``system:serviceaccount:NS:NAME``; None for other users."""
    if not username.startswith(SERVICE_ACCOUNT_USER_PREFIX):
        return None
    parts = username[len(SERVICE_ACCOUNT_USER_PREFIX) :].split(":")
    if len(parts) != 2 or not parts[0] or not parts[1]:
        return None
    return parts[0], parts[1]


def service_account_groups(namespace: str) -> tuple[str, ...]:
    return (SERVICE_ACCOUNTS_GROUP, SERVICE_ACCOUNT_GROUP_PREFIX + namespace)


def node_identity(user: UserInfo) -> tuple[str, bool]:
    """(node name, is a node): a node is named ``system:node:NAME`` and is in ``system:nodes``
    (the name may be empty: a node the authorizer cannot tell apart)."""
    if not user.name.startswith(NODE_USER_PREFIX) or NODES_GROUP not in user.groups:
        return "", False
    return user.name[len(NODE_USER_PREFIX) :], True
