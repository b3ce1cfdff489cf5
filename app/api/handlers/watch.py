"""A watch: the event stream of a collection."""

from __future__ import annotations

from starlette.responses import Response

from app.api import negotiation
from app.api.generic import GenericStore
from app.api.handlers.scope import RequestScope
from app.api.options import ListOptions
from app.storage.errors import RevisionCompacted


async def watch(store: GenericStore, scope: RequestScope, opts: ListOptions) -> Response:
    negotiation.check_watch_acceptable(scope.strategy, scope.accept, opts.include_object)
    try:
        events = await store.watch(scope.strategy, scope.namespace, opts)
    except RevisionCompacted as exc:
        return negotiation.expired_watch_response(exc, scope.accept)
    return negotiation.watch_response(scope.strategy, events, scope.accept, opts.include_object)
