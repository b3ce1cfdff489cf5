"""Authorizers and their union: each answers allow, deny or no opinion, with a reason; the
first that does not answer no opinion decides (``--authorization-mode`` lists them in order).
A request nobody allows is forbidden, with upstream's message."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Protocol

from app.auth.attributes import Attributes
from kube.errors import ApiError, go_quote


class Decision(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"
    NO_OPINION = "no-opinion"


# The members as plain names: looking a member up on the enum class is slow enough to show on
# the request path.
ALLOW, DENY, NO_OPINION = Decision.ALLOW, Decision.DENY, Decision.NO_OPINION


class Authorizer(Protocol):
    def authorize(self, attrs: Attributes) -> tuple[Decision, str]:
        """The decision on ``attrs`` and why (an empty reason says nothing)."""


class AlwaysAllow:
    """``--authorization-mode=AlwaysAllow``: everything is allowed."""

    def authorize(self, attrs: Attributes) -> tuple[Decision, str]:
        return Decision.ALLOW, ""


class PrivilegedGroups:
    """Members of these groups may do anything. Upstream puts this authorizer before every
    configured mode, so ``system:masters`` never waits for RBAC."""

    def __init__(self, *groups: str) -> None:
        self.groups = frozenset(groups)

    def authorize(self, attrs: Attributes) -> tuple[Decision, str]:
        if not self.groups.isdisjoint(attrs.user.groups):
            return ALLOW, ""
        return NO_OPINION, ""


class AlwaysDeny:
    def authorize(self, attrs: Attributes) -> tuple[Decision, str]:
        return Decision.NO_OPINION, "Everything is forbidden."


class UnionAuthorizer:
    """Asks each authorizer in turn; the first allow or deny wins. When none decides, the
    reasons they gave are joined, as upstream does."""

    def __init__(self, authorizers: Sequence[Authorizer]) -> None:
        self.authorizers = tuple(authorizers)
        self._decide = tuple(a.authorize for a in self.authorizers)

    def authorize(self, attrs: Attributes) -> tuple[Decision, str]:
        reasons: list[str] | None = None
        for decide in self._decide:
            answer = decide(attrs)
            if answer[0] is not NO_OPINION:
                return answer
            if answer[1]:
                if reasons is None:
                    reasons = []
                reasons.append(answer[1])
        return NO_OPINION, ", ".join(reasons) if reasons else ""


def forbidden_message(attrs: Attributes, reason: str = "") -> str:
    """``User "u" cannot VERB resource "r/sub" in API group "g" in the namespace "ns"``."""
    user = go_quote(attrs.user.name)
    if not attrs.resource_request:
        message = f"User {user} cannot {attrs.verb} path {go_quote(attrs.path)}"
    else:
        resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
        message = f"User {user} cannot {attrs.verb} resource {go_quote(resource)} in API group {go_quote(attrs.api_group)}"
        message += f" in the namespace {go_quote(attrs.namespace)}" if attrs.namespace else " at the cluster scope"
    return f"{message}: {reason}" if reason else message


def forbidden(attrs: Attributes, reason: str = "") -> ApiError:
    """The 403 Status of a request the authorizers did not allow."""
    detail = forbidden_message(attrs, reason)
    qualified = attrs.resource + (f".{attrs.api_group}" if attrs.api_group else "")
    if not attrs.resource_request or not qualified:
        message = f"forbidden: {detail}"
    elif attrs.name:
        message = f"{qualified} {go_quote(attrs.name)} is forbidden: {detail}"
    else:
        message = f"{qualified} is forbidden: {detail}"
    details: dict[str, object] = {}
    if attrs.name:
        details["name"] = attrs.name
    if attrs.api_group:
        details["group"] = attrs.api_group
    if attrs.resource:
        details["kind"] = attrs.resource
    return ApiError(403, "Forbidden", message, details)


def unauthorized() -> ApiError:
    """The 401 Status of a request whose credentials no authenticator accepted."""
    return ApiError(401, "Unauthorized", "Unauthorized")


AUTHORIZATION_MODES = ("AlwaysAllow", "AlwaysDeny", "Node", "RBAC")
