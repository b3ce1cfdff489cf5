"""POST to a collection: create an object."""

from __future__ import annotations

from starlette.responses import Response

from app.api import negotiation
from app.api.generic import GenericStore
from app.api.handlers.scope import RequestScope


async def create(store: GenericStore, scope: RequestScope) -> Response:
    wopts = scope.write_options()
    body = await scope.object_body(scope.strategy.kind)
    result = await store.create(scope.strategy, scope.ns, body, wopts)
    return negotiation.written_response(scope.strategy, result, scope.accept, 201)
