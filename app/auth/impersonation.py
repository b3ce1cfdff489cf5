"""Impersonation: ``Impersonate-User``, ``-Uid``, ``-Group`` and ``-Extra-<key>`` headers make a
request act as another user, when the requester may ``impersonate`` each of those."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import unquote

from app.auth.attributes import Attributes
from app.auth.authorizers import Authorizer, Decision, forbidden
from app.auth.user import (
    ALL_AUTHENTICATED,
    ALL_UNAUTHENTICATED,
    ANONYMOUS,
    UserInfo,
    service_account_groups,
    split_service_account_username,
)
from kube.errors import ApiError

USER_HEADER = "impersonate-user"
UID_HEADER = "impersonate-uid"
GROUP_HEADER = "impersonate-group"
EXTRA_HEADER_PREFIX = "impersonate-extra-"


def impersonate(user: UserInfo, headers: Sequence[tuple[bytes, bytes]], authorizer: Authorizer) -> UserInfo:
    """The user the request acts as; 403 when ``user`` may not impersonate a part of it."""
    name = ""
    uid = ""
    groups: list[str] = []
    extra: dict[str, list[str]] = {}
    for raw_name, raw_value in headers:
        header = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        if header == USER_HEADER:
            name = value
        elif header == UID_HEADER:
            uid = value
        elif header == GROUP_HEADER:
            groups.append(value)
        elif header.startswith(EXTRA_HEADER_PREFIX):
            extra.setdefault(unquote(header[len(EXTRA_HEADER_PREFIX) :]), []).append(value)
    if not name:
        raise ApiError(500, "InternalError", "Internal error occurred: requested impersonation of groups, uid or extras without impersonating a user")
    checks: list[Attributes] = []
    account = split_service_account_username(name)
    if account is not None:
        checks.append(Attributes(user, "impersonate", True, api_group="", resource="serviceaccounts", namespace=account[0], name=account[1]))
        if not groups:
            groups.extend(service_account_groups(account[0]))
    else:
        checks.append(Attributes(user, "impersonate", True, api_group="", resource="users", name=name))
    checks.extend(Attributes(user, "impersonate", True, api_group="", resource="groups", name=g) for g in groups)
    for key, values in extra.items():
        checks.extend(Attributes(user, "impersonate", True, api_group="authentication.k8s.io", resource="userextras", subresource=key, name=v) for v in values)
    if uid:
        checks.append(Attributes(user, "impersonate", True, api_group="authentication.k8s.io", resource="uids", name=uid))
    for attrs in checks:
        decision, reason = authorizer.authorize(attrs)
        if decision is not Decision.ALLOW:
            raise forbidden(attrs, reason)
    if name != ANONYMOUS:
        if ALL_AUTHENTICATED not in groups and ALL_UNAUTHENTICATED not in groups:
            groups.append(ALL_AUTHENTICATED)
    elif ALL_UNAUTHENTICATED not in groups:
        groups.append(ALL_UNAUTHENTICATED)
    return UserInfo(name, uid, tuple(groups), {k: tuple(v) for k, v in extra.items()})
