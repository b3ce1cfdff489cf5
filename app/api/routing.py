"""Resource paths to handlers, in one place: which handler serves each method on each path of a
served kind, decided once from what the kinds declare (their verbs and subresources), and the
per-request path parsing.

Paths: ``/api/v1/...`` (core) or ``/apis/GROUP/VERSION/...``, then
``[namespaces/NS/]PLURAL[/NAME[/SUBRESOURCE]]``. An unknown path is a 404, a method the path
does not serve a 405. The application sends resource paths here before FastAPI's router,
whose matching and dependency solving cost more than a whole GET.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from app.api import negotiation
from app.api.generic import GenericStore
from app.api.handlers.action import act
from app.api.handlers.compute import compute
from app.api.handlers.create import create
from app.api.handlers.delete import delete, delete_collection
from app.api.handlers.get import get, list_resource
from app.api.handlers.patch import patch
from app.api.handlers.scale import get_scale, patch_scale, update_scale
from app.api.handlers.scope import Handler, RequestScope
from app.api.handlers.update import update
from app.api.requestinfo import request_verb
from app.api.storagestatus import storage_status
from app.auth import context
from app.registry import served_kinds
from app.registry.base import ActionSubresource, ComputedSubresource, KindStrategy, ScaleSubresource, StatusSubresource, Subresource
from app.storage.errors import RequestTooLarge, StorageFailure, StorageUnavailable
from kube import errors
from kube.errors import ApiError
from kube.query import query_params

# Methods the router takes; anything else goes on to the rest of the application.
METHODS = frozenset(("GET", "POST", "PUT", "PATCH", "DELETE"))
# (verb as discovery lists it, method, handler) on a collection and on one object.
_COLLECTION_VERBS: tuple[tuple[str, str, Handler], ...] = (
    ("list", "GET", list_resource),
    ("create", "POST", create),
    ("deletecollection", "DELETE", delete_collection),
)
_OBJECT_VERBS: tuple[tuple[str, str, Handler], ...] = (
    ("get", "GET", get),
    ("update", "PUT", update),
    ("patch", "PATCH", patch),
    ("delete", "DELETE", delete),
)
_VERB_METHODS = {verb: method for verb, method, _handler in (*_COLLECTION_VERBS, *_OBJECT_VERBS)}


def path_not_found() -> ApiError:
    """The 404 of a path the server does not serve."""
    return ApiError(404, "NotFound", "the server could not find the requested resource")


@dataclass(frozen=True)
class Route:
    """The handlers of one path shape, by method, and the strategy they act with."""

    strategy: KindStrategy
    handlers: dict[str, Handler]
    subresource: Subresource | None = None


class KindRoutes:
    """Every path shape of one kind: its collection (in a namespace, or across all of them), one
    object, and each subresource it declares."""

    def __init__(self, strategy: KindStrategy) -> None:
        self.strategy = strategy
        self.namespaced = strategy.namespaced
        # Every request to the kind in a deprecated version is warned, subresources included.
        self.deprecation_warning = strategy.deprecation_warning
        verbs = set(strategy.verbs)
        collection = {method: handler for verb, method, handler in _COLLECTION_VERBS if verb in verbs}
        self.collection = Route(strategy, collection)
        # Objects are created in a namespace, never across all of them.
        self.all_namespaces = Route(strategy, {m: h for m, h in collection.items() if m != "POST"})
        self.object = Route(strategy, {method: handler for verb, method, handler in _OBJECT_VERBS if verb in verbs})
        self.subresources = {sub.name: _subresource_route(strategy, sub) for sub in strategy.subresources}


def _subresource_route(owner: KindStrategy, sub: Subresource) -> Route:
    if isinstance(sub, StatusSubresource):
        handlers = {method: handler for verb, method, handler in _OBJECT_VERBS if verb in sub.verbs}
        return Route(sub.strategy, handlers, sub)
    if isinstance(sub, ActionSubresource):
        return Route(owner, {_VERB_METHODS[verb]: act for verb in sub.verbs}, sub)
    if isinstance(sub, ComputedSubresource):
        return Route(owner, {"POST": compute}, sub)
    if isinstance(sub, ScaleSubresource):
        return Route(owner, {"GET": get_scale, "PUT": update_scale, "PATCH": patch_scale}, sub)
    raise TypeError(f"{owner.plural}/{sub.name}: no handlers for a {type(sub).__name__}")


@dataclass(slots=True)
class ResourcePath:
    """A resource path, resolved against the served kinds."""

    kind: KindRoutes
    namespace: str | None  # None: cluster-scoped, or all namespaces for a namespaced kind
    name: str  # "" for a collection
    subresource: str


def split_api_path(path: str) -> tuple[str, str, str] | None:
    """(group, version, rest) of ``/api/v1/REST`` or ``/apis/GROUP/VERSION/REST``; None for other paths."""
    parts = path.split("/", 5)
    # ["", "api", "v1", rest...] or ["", "apis", group, version, rest...]
    if len(parts) >= 4 and parts[1] == "api" and parts[2] == "v1" and parts[3]:
        return "", "v1", "/".join(parts[3:])
    if len(parts) >= 5 and parts[1] == "apis" and parts[4]:
        return parts[2], parts[3], "/".join(parts[4:])
    return None


class ResourceRouter:
    """Serves resource paths with the handlers of ``app.api.handlers``."""

    def __init__(self, store: GenericStore, body_limit: int) -> None:
        self.store = store
        self.body_limit = body_limit
        self.kinds = {(k.group, k.version, k.plural): KindRoutes(k) for k in served_kinds()}

    def parse(self, group: str, version: str, rest: str) -> ResourcePath | None:
        """Resolve ``[namespaces/NS/]PLURAL[/NAME[/SUB]]`` against the served kinds."""
        segments = [s for s in rest.split("/") if s]
        if len(segments) >= 3 and segments[0] == "namespaces":
            kind = self.kinds.get((group, version, segments[2]))
            if kind is not None and kind.namespaced:
                if len(segments) > 5:
                    return None
                name = segments[3] if len(segments) >= 4 else ""
                sub = segments[4] if len(segments) == 5 else ""
                return ResourcePath(kind, segments[1], name, sub)
        if not segments or len(segments) > 3:
            return None
        kind = self.kinds.get((group, version, segments[0]))
        if kind is None:
            return None
        name = segments[1] if len(segments) >= 2 else ""
        if kind.namespaced and name:
            return None
        return ResourcePath(kind, None, name, segments[2] if len(segments) == 3 else "")

    def route(self, target: ResourcePath, method: str) -> tuple[Route, Handler]:
        """The route and handler for ``method`` on ``target``: 404 for an undeclared subresource, 405 for a method the path does not serve."""
        kind = target.kind
        if target.subresource:
            route = kind.subresources.get(target.subresource)
            if route is None:
                raise path_not_found()
        elif target.name:
            route = kind.object
        elif target.namespace is None and kind.namespaced:
            route = kind.all_namespaces
        else:
            route = kind.collection
        handler = route.handlers.get(method)
        if handler is None:
            raise errors.method_not_allowed()
        return route, handler

    async def answer(self, scope: Scope, receive: Receive, send: Send, api_path: tuple[str, str, str]) -> None:
        """Answer a resource path already split by :func:`split_api_path` (a path it does not
        split is the application's to serve)."""
        try:
            response = await self._dispatch(scope, receive, *api_path)
        except ApiError as exc:
            response = negotiation.status_response(exc, accept=negotiation.accept_header(scope))
        await response(scope, receive, send)

    async def _dispatch(self, scope: Scope, receive: Receive, group: str, version: str, rest: str) -> Response:
        target = self.parse(group, version, rest)
        if target is None:
            raise path_not_found()
        route, handler = self.route(target, scope["method"])
        if deprecated := target.kind.deprecation_warning:
            requester = context.current()
            if requester is not None:
                requester.warn_first(deprecated)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if scope["method"] == "PATCH":
            negotiation.patch_type(headers.get("content-type"))  # upstream's patch handler refuses this first
        accept = headers.get("accept", "")
        negotiation.negotiate(accept)
        request = RequestScope(
            route.strategy,
            target.namespace,
            target.name,
            route.subresource,
            query_params(scope["query_string"]),
            headers,
            receive,
            self.body_limit,
            target.namespace or "",
            accept,
            scope["query_string"],
        )
        try:
            return await handler(self.store, request)
        except (StorageUnavailable, StorageFailure) as exc:
            raise storage_status(exc, route.strategy, request_verb(scope), target.namespace) from None
        except RequestTooLarge as exc:
            # Not a Status from storage: upstream answers it as any unknown error (500, no reason).
            raise ApiError(500, "", str(exc)) from None
