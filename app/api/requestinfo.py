"""The verb of a request, decided from its method, path and query before it is served, the way
upstream's request info decides it for its limits: resource paths get Kubernetes verbs (``get``,
``list``, ``watch``, ``create``...), anything else the lower-cased HTTP method."""

from __future__ import annotations

from starlette.types import Scope

from app.api.options import query_bool
from kube.query import query_params

# Upstream counts every other verb against the mutating in-flight limit.
READ_ONLY_VERBS = frozenset(("get", "list", "watch"))
_WRITE_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def request_verb(scope: Scope) -> str:
    method: str = scope["method"]
    segments = _resource_segments(scope["path"])
    if segments is None:
        return method.lower()
    named = len(segments) >= 2
    if method in ("GET", "HEAD"):
        if named:
            return "get"
        query: bytes = scope["query_string"]
        watching = b"watch" in query and query_bool(query_params(query), "watch")
        return "watch" if watching else "list"
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    return _WRITE_VERBS.get(method, method.lower())


def _resource_segments(path: str) -> list[str] | None:
    """``[resource, name, subresource]`` (as many as the path has) of a resource path, else None."""
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) >= 3:
        rest = parts[2:]
    elif parts[0] == "apis" and len(parts) >= 4:
        rest = parts[3:]
    else:
        return None
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]  # namespaces/NS/RESOURCE...; namespaces/NS alone names a namespace
    return rest
