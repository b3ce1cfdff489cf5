"""GET of one object, and of a collection (a list, or a watch when ``watch`` is set)."""

from __future__ import annotations

from starlette.responses import Response

from app.api import negotiation
from app.api.generic import GenericStore
from app.api.handlers.scope import RequestScope
from app.api.handlers.watch import watch
from app.api.options import ListOptions
from app.storage.errors import RevisionCompacted
from kube import errors


async def get(store: GenericStore, scope: RequestScope) -> Response:
    stored = await store.get(scope.strategy, scope.ns, scope.name, scope.params.get("resourceVersion", ""))
    # Converted after the read, as upstream: a missing object is a 404 before any 406.
    return negotiation.stored_response(scope.strategy, stored, scope.accept, scope.params.get("includeObject", ""))


async def list_resource(store: GenericStore, scope: RequestScope) -> Response:
    opts = ListOptions.parse(scope.params)
    try:
        if opts.watch:
            return await watch(store, scope, opts)
        items, meta = await store.list_objects(scope.strategy, scope.namespace, opts)
    except RevisionCompacted as exc:
        # A watch says so in an ERROR event on its stream; a list answers 410.
        return negotiation.status_response(errors.gone(str(exc)), accept=scope.accept)
    return negotiation.list_response(scope.strategy, items, meta, scope.accept, opts.include_object)
