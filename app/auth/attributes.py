"""What a request asks to do, as the authorizers see it: the verb (get, list, watch, create,
update, patch, delete, deletecollection, or the lower-case method of a non-resource path), the
API group, resource, subresource, namespace and name, read off the method, path and query the
way kube-apiserver's request-info resolver does."""

from __future__ import annotations

from dataclasses import dataclass, replace
from urllib.parse import unquote

from app.auth.user import UserInfo
from kube.errors import ApiError
from kube.fields import FieldSelector, parse_field_selector
from kube.query import query_params

_METHOD_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
# Path segments that name a verb rather than a resource (``/api/v1/watch/pods``).
_SPECIAL_VERBS = frozenset(("proxy", "watch"))
# Subresources of a namespace, which must not be read as a namespaced resource's plural.
_NAMESPACE_SUBRESOURCES = frozenset(("status", "finalize"))
_COLLECTION_VERBS = frozenset(("list", "watch", "deletecollection"))


@dataclass(slots=True)
class Attributes:
    """One question to the authorizers: may ``user`` do ``verb`` on this resource or path?
    (Not frozen, though never changed: a frozen dataclass costs microseconds per request to build.)"""

    user: UserInfo
    verb: str
    resource_request: bool
    path: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    # A list, watch or deletecollection's field selector, when it has one that parses.
    field_selector: FieldSelector | None = None

    def with_user(self, user: UserInfo) -> Attributes:
        return replace(self, user=user)

    def field_equals(self, field: str, value: str) -> bool:
        """Whether the field selector requires ``field=value``."""
        return self.field_selector is not None and self.field_selector.exact_value(field) == value


def _unescaped(segment: str) -> str:
    """A path segment percent-decoded; without a ``%`` (nearly every request) as it is, for
    urllib's unquote costs more than the rest of reading the path."""
    return unquote(segment) if "%" in segment else segment


def request_attributes(user: UserInfo, method: str, path: str, query: str) -> Attributes:
    """The attributes of an HTTP request (``query`` undecoded, as in the ASGI scope)."""
    verb = method.lower()
    parts = [p for p in path.split("/") if p]
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return Attributes(user, verb, False, path)
    rest = parts[1:]
    group = ""
    if parts[0] == "apis":
        if len(rest) < 3:
            return Attributes(user, verb, False, path)
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    if rest[0] in _SPECIAL_VERBS:
        if len(rest) < 2:
            return Attributes(user, _METHOD_VERBS.get(method, ""), True, path, group, version)
        verb, rest = rest[0], rest[1:]
    else:
        verb = _METHOD_VERBS.get(method, "")
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = _unescaped(rest[1])
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = _unescaped(rest[1]) if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) >= 3 and verb != "proxy" else ""
    field_selector: FieldSelector | None = None
    params = query_params(query.encode("latin-1")) if query else {}
    if not name and verb == "get":
        watch = params.get("watch")
        verb = "watch" if watch is not None and watch.lower() not in ("false", "0") else "list"
    if not name and verb == "delete":
        verb = "deletecollection"
    if verb in _COLLECTION_VERBS and params:
        selector = params.get("fieldSelector", "")
        if selector:
            try:
                field_selector = parse_field_selector(selector)
            except ApiError:
                field_selector = None
        if field_selector is not None and verb != "deletecollection":
            # A list or watch of one object by name is authorized as a request for that object.
            named = field_selector.exact_value("metadata.name")
            if named and "/" not in named and named not in (".", ".."):
                name = named
    return Attributes(user, verb, True, path, group, version, resource, subresource, namespace, name, field_selector)
