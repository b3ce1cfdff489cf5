"""DELETE of an object, and of a collection (deletecollection)."""

from __future__ import annotations

from starlette.responses import Response

from app.api import negotiation
from app.api.generic import GenericStore
from app.api.handlers.scope import RequestScope
from app.api.options import DeleteOptions, ListOptions


async def _delete_options(scope: RequestScope) -> DeleteOptions:
    raw = await scope.body()
    return DeleteOptions.parse(scope.params, negotiation.decode_delete_options(raw, scope.content_type), scope.dry_run())


async def delete(store: GenericStore, scope: RequestScope) -> Response:
    dopts = await _delete_options(scope)
    outcome = await store.delete(scope.strategy, scope.ns, scope.name, dopts)
    if outcome.deleted_now and not scope.strategy.return_deleted_object:
        return negotiation.success_response(details=outcome.details, accept=scope.accept)
    # Upstream answers 202 only for a pending deletion that asked for cascading with the
    # deprecated orphanDependents=false (always doing so would break old clients).
    accepted = not outcome.deleted_now and dopts.orphan_dependents is False
    return negotiation.deleted_response(scope.strategy, outcome.obj, scope.accept, 202 if accepted else 200)


async def delete_collection(store: GenericStore, scope: RequestScope) -> Response:
    dopts = await _delete_options(scope)
    opts = ListOptions.parse(scope.params)
    deleted, meta = await store.delete_collection(scope.strategy, scope.namespace, opts, dopts)
    return negotiation.list_response(scope.strategy, deleted, meta, scope.accept, opts.include_object)
