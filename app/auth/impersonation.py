"""Impersonation: ``Impersonate-User``, ``-Uid``, ``-Group`` and ``-Extra-<key>`` headers make a
request act as another user. With the gate ConstrainedImpersonation off, the requester must be
allowed to ``impersonate`` each of those (``impersonate``); with it on (upstream's default),
upstream's constrained modes are tried first (``ConstrainedImpersonation``)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from urllib.parse import unquote

from app.auth.attributes import Attributes
from app.auth.authorizers import Authorizer, Decision, forbidden
from app.auth.user import (
    ALL_AUTHENTICATED,
    ALL_UNAUTHENTICATED,
    ANONYMOUS,
    EXTRA_NODE_NAME,
    NODE_USER_PREFIX,
    NODES_GROUP,
    SYSTEM_PRIVILEGED_GROUP,
    UserInfo,
    service_account_groups,
    split_service_account_username,
)
from app.registry.objectmeta import dns1123_subdomain_problems, validate_domain_prefixed_path
from kube.errors import ApiError, go_quote

USER_HEADER = "impersonate-user"
UID_HEADER = "impersonate-uid"
GROUP_HEADER = "impersonate-group"
EXTRA_HEADER_PREFIX = "impersonate-extra-"


def requested_user(headers: Sequence[tuple[bytes, bytes]]) -> UserInfo:
    """What the impersonation headers ask for, as they are: the first ``Impersonate-User`` and
    ``-Uid``, every ``-Group`` and ``-Extra-<key>`` (the key lower-case and %-decoded)."""
    name: str | None = None
    uid: str | None = None
    groups: list[str] = []
    extra: dict[str, list[str]] = {}
    for raw_name, raw_value in headers:
        header = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        if header == USER_HEADER:
            name = value if name is None else name
        elif header == UID_HEADER:
            uid = value if uid is None else uid
        elif header == GROUP_HEADER:
            groups.append(value)
        elif header.startswith(EXTRA_HEADER_PREFIX):
            extra.setdefault(unquote(header[len(EXTRA_HEADER_PREFIX) :]), []).append(value)
    return UserInfo(name or "", uid or "", tuple(groups), {k: tuple(v) for k, v in extra.items()})


def with_membership(name: str, groups: list[str]) -> tuple[str, ...]:
    """An impersonated user's groups: ``system:authenticated`` added, or for ``system:anonymous``
    ``system:unauthenticated``, unless there already."""
    if name == ANONYMOUS:
        return (*groups, ALL_UNAUTHENTICATED) if ALL_UNAUTHENTICATED not in groups else tuple(groups)
    if ALL_AUTHENTICATED in groups or ALL_UNAUTHENTICATED in groups:
        return tuple(groups)
    return (*groups, ALL_AUTHENTICATED)


def impersonate(user: UserInfo, headers: Sequence[tuple[bytes, bytes]], authorizer: Authorizer) -> UserInfo:
    """The user the request acts as (the gate off); 403 when ``user`` may not impersonate a part of it."""
    wanted = requested_user(headers)
    name, uid, groups = wanted.name, wanted.uid, list(wanted.groups)
    if not name:
        raise ApiError(
            500, "InternalError", "Internal error occurred: requested impersonation of groups, uid or extras without impersonating a user"
        )
    checks: list[Attributes] = []
    account = split_service_account_username(name)
    if account is not None:
        checks.append(
            Attributes(user, "impersonate", True, api_group="", resource="serviceaccounts", namespace=account[0], name=account[1])
        )
        if not groups:
            groups.extend(service_account_groups(account[0]))
    else:
        checks.append(Attributes(user, "impersonate", True, api_group="", resource="users", name=name))
    checks.extend(Attributes(user, "impersonate", True, api_group="", resource="groups", name=g) for g in groups)
    for key, values in wanted.extra.items():
        checks.extend(
            Attributes(user, "impersonate", True, api_group="authentication.k8s.io", resource="userextras", subresource=key, name=v)
            for v in values
        )
    if uid:
        checks.append(Attributes(user, "impersonate", True, api_group="authentication.k8s.io", resource="uids", name=uid))
    for attrs in checks:
        decision, reason = authorizer.authorize(attrs)
        if decision is not Decision.ALLOW:
            raise forbidden(attrs, reason)
    return UserInfo(name, uid, with_membership(name, groups), dict(wanted.extra))


# ---- constrained impersonation (gate ConstrainedImpersonation) -------------------------------

AUTHENTICATION_GROUP = "authentication.k8s.io"
# The modes, in the order they are tried; the requester's last successful mode goes first.
ASSOCIATED_NODE, ARBITRARY_NODE, SERVICE_ACCOUNT, USER_INFO, LEGACY = "associated-node", "arbitrary-node", "serviceaccount", "user-info", ""
MODES = (ASSOCIATED_NODE, ARBITRARY_NODE, SERVICE_ACCOUNT, USER_INFO, LEGACY)
# What an associated-node check sees of the requester's extras: their keys, under this key.
ASSOCIATED_NODE_KEYS = "authentication.kubernetes.io/associated-node-keys"
# From this many groups or extra values on, one check of "*" is tried before checking each.
MANY_CHECKS = 4
# How many requesters' last successful modes are remembered.
REMEMBERED_REQUESTERS = 1024


@dataclass(frozen=True)
class Impersonation:
    """The user a request acts as, and the verb of the constrained mode that allowed it ("" for
    the legacy ``impersonate``), which the audit log records."""

    user: UserInfo
    constraint: str = ""


def wanted_user(headers: Sequence[tuple[bytes, bytes]]) -> UserInfo | None:
    """The user the impersonation headers ask for (nothing added); None without any; 400 with
    others but no ``Impersonate-User``."""
    wanted = requested_user(headers)
    if not wanted.name:
        if wanted.uid or wanted.groups or wanted.extra:
            raise ApiError(400, "BadRequest", f"requested {_go_syntax(wanted)} without impersonating a user name")
        return None
    return wanted


def _go_syntax(user: UserInfo) -> str:
    """The user as Go's ``%#v`` prints a ``*user.DefaultInfo``."""
    groups = "[]string{" + ", ".join(go_quote(g) for g in user.groups) + "}" if user.groups else "[]string(nil)"
    if user.extra:
        entries = (f"{go_quote(k)}:[]string{{{', '.join(go_quote(v) for v in user.extra[k])}}}" for k in sorted(user.extra))
        extra = "map[string][]string{" + ", ".join(entries) + "}"
    else:
        extra = "map[string][]string(nil)"
    return f"&user.DefaultInfo{{Name:{go_quote(user.name)}, UID:{go_quote(user.uid)}, Groups:{groups}, Extra:{extra}}}"


def node_username(name: str) -> str | None:
    """The node of ``system:node:NAME`` when NAME is a valid node name, else None."""
    if not name.startswith(NODE_USER_PREFIX):
        return None
    node = name[len(NODE_USER_PREFIX) :]
    return None if dns1123_subdomain_problems(node) else node


def _only_name(user: UserInfo) -> bool:
    return not user.uid and not user.groups and not user.extra


def _extra_problem(extra: dict[str, tuple[str, ...]]) -> str:
    """Why constrained impersonation refuses these extras ("" when it does not)."""
    for key in sorted(extra):
        values = extra[key]
        if not key:
            return "impersonating the empty string key in extra is not allowed"
        errors = [str(e) for e in validate_domain_prefixed_path(key, "extra.key")]
        if errors:
            joined = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
            return f"impersonating an invalid key in extra is not allowed: {joined}"
        if key != key.lower():
            return f"impersonating a non-lowercase key in extra is not allowed: {go_quote(key)}"
        if not values:
            return "impersonating empty values in extra is not allowed"
        if "" in values:
            return "impersonating the empty string value in extra is not allowed"
    return ""


class ConstrainedImpersonation:
    """Impersonation with upstream's constrained modes (KEP-5284) tried before the legacy one.

    Each constrained mode takes two permissions: ``impersonate-on:<mode>:<verb>`` on what the
    request does, and ``impersonate:<mode>`` on who it acts as (in API group
    authentication.k8s.io): ``associated-node`` lets a service account whose token is bound to a
    node act as that node (``nodes`` named ``*``), ``arbitrary-node`` act as any node (``nodes``
    by name), ``serviceaccount`` act as a service account, ``user-info`` as any other user, with
    its uid, groups (never ``system:masters``) and extras. A mode applies only to the users it is
    for; the node and service account modes only to a bare user name. When no mode allows the
    request, the error of the first mode that applied is the answer."""

    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer
        self._last_mode: OrderedDict[str, int] = OrderedDict()

    def impersonate(self, requester: UserInfo, wanted: UserInfo, request: Attributes) -> Impersonation:
        """Whom a request by ``requester`` acts as; the 403 of the first mode that refused otherwise."""
        last = self._last_mode.get(requester.name)
        order = range(len(MODES)) if last is None else (last, *(i for i in range(len(MODES)) if i != last))
        first_error: ApiError | None = None
        for index in order:
            try:
                found = self._mode(MODES[index], requester, wanted, request)
            except ApiError as exc:
                first_error = first_error or exc
                continue
            if found is not None:
                self._remember(requester.name, index)
                return found
        raise first_error or ApiError(500, "InternalError", "Internal error occurred: all impersonation modes failed")

    def _remember(self, requester: str, index: int) -> None:
        self._last_mode[requester] = index
        self._last_mode.move_to_end(requester)
        while len(self._last_mode) > REMEMBERED_REQUESTERS:
            self._last_mode.popitem(last=False)

    def _mode(self, mode: str, requester: UserInfo, wanted: UserInfo, request: Attributes) -> Impersonation | None:
        if mode == LEGACY:
            return Impersonation(self._user(requester, wanted, "impersonate", constrained=False))
        node = node_username(wanted.name)
        account = split_service_account_username(wanted.name)
        as_seen = requester
        if mode == ASSOCIATED_NODE:
            if not _only_name(wanted) or node is None or split_service_account_username(requester.name) is None:
                return None
            if requester.extra.get(EXTRA_NODE_NAME, ()) != (node,):
                return None
            # What the authorizer is asked about: the requester's extras' keys, never their values.
            as_seen = UserInfo(requester.name, requester.uid, requester.groups, {ASSOCIATED_NODE_KEYS: tuple(sorted(requester.extra))})
        elif mode == ARBITRARY_NODE:
            if not _only_name(wanted) or node is None:
                return None
        elif mode == SERVICE_ACCOUNT:
            if not _only_name(wanted) or account is None:
                return None
        elif node is not None or account is not None:  # user-info: everyone else
            return None
        self._check(replace(request, user=as_seen, verb=f"impersonate-on:{mode}:{request.verb}"))
        verb = f"impersonate:{mode}"
        return Impersonation(self._user(as_seen, wanted, verb, constrained=True, any_node=mode == ASSOCIATED_NODE), verb)

    def _check(self, attrs: Attributes, refusal: str = "") -> None:
        if refusal:
            raise forbidden(attrs, refusal)
        decision, reason = self.authorizer.authorize(attrs)
        if decision is not Decision.ALLOW:
            raise forbidden(attrs, reason)

    def _user(self, requester: UserInfo, wanted: UserInfo, verb: str, *, constrained: bool, any_node: bool = False) -> UserInfo:
        """The impersonated user, once ``requester`` may ``verb`` its name, uid, groups and extras."""
        group = AUTHENTICATION_GROUP if constrained else ""
        groups = list(wanted.groups)
        name = Attributes(requester, verb, True, api_group=group, api_version="v1", resource="users", name=wanted.name)
        node = node_username(wanted.name) if constrained else None
        account = split_service_account_username(wanted.name)
        refusal = ""
        if node is not None:
            name = replace(name, resource="nodes", name="*" if any_node else node)
            if groups:
                refusal = f"when impersonating a node, cannot impersonate groups {_go_list(groups)}"
            groups = [NODES_GROUP]
        if account is not None:
            name = replace(name, resource="serviceaccounts", namespace=account[0], name=account[1])
            if constrained and wanted.groups:
                refusal = f"when impersonating a service account, cannot impersonate groups {_go_list(list(wanted.groups))}"
            if not wanted.groups:
                groups = list(service_account_groups(account[0]))
        self._check(name, refusal)
        if wanted.uid:
            self._check(
                Attributes(requester, verb, True, api_group=AUTHENTICATION_GROUP, api_version="v1", resource="uids", name=wanted.uid)
            )
        self._check_groups(requester, wanted.groups, verb, group, constrained)
        self._check_extra(requester, wanted.extra, verb, constrained)
        return UserInfo(wanted.name, wanted.uid, with_membership(wanted.name, groups), dict(wanted.extra))

    def _check_groups(self, requester: UserInfo, groups: tuple[str, ...], verb: str, api_group: str, constrained: bool) -> None:
        if not groups:
            return
        attrs = Attributes(requester, verb, True, api_group=api_group, api_version="v1", resource="groups")
        if constrained:
            if "" in groups:
                self._check(attrs, "impersonating the empty string group is not allowed")
            if SYSTEM_PRIVILEGED_GROUP in groups:
                self._check(replace(attrs, name=SYSTEM_PRIVILEGED_GROUP), "impersonating the system:masters group is not allowed")
            if len(groups) >= MANY_CHECKS and self._allows(replace(attrs, name="*")):
                return
        for group in groups:
            self._check(replace(attrs, name=group))

    def _check_extra(self, requester: UserInfo, extra: dict[str, tuple[str, ...]], verb: str, constrained: bool) -> None:
        if not extra:
            return
        attrs = Attributes(requester, verb, True, api_group=AUTHENTICATION_GROUP, api_version="v1", resource="userextras")
        if constrained:
            problem = _extra_problem(extra)
            if problem:
                self._check(attrs, problem)
            many = len(extra) >= MANY_CHECKS or sum(len(v) for v in extra.values()) >= MANY_CHECKS
            if many and self._allows(replace(attrs, subresource="*", name="*")):
                return
        for key in sorted(extra):
            for value in extra[key]:
                self._check(replace(attrs, subresource=key, name=value))

    def _allows(self, attrs: Attributes) -> bool:
        return self.authorizer.authorize(attrs)[0] is Decision.ALLOW


def _go_list(values: list[str]) -> str:
    """Go's ``%q`` of a []string: ``["a" "b"]``."""
    return "[" + " ".join(go_quote(v) for v in values) + "]"
