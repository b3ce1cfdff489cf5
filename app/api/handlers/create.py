"""POST to a collection: create an object."""

from __future__ import annotations

from starlette.responses import Response

from app.api import negotiation
from app.api.generic import GenericStore
from app.api.handlers.scope import RequestScope
from app.api.options import CREATE_OPTIONS


async def create(store: GenericStore, scope: RequestScope) -> Response:
    body, wopts = await scope.object_and_options(scope.strategy.kind, CREATE_OPTIONS)
    result = await store.create(scope.strategy, scope.ns, body, wopts)
    return negotiation.written_response(scope.strategy, result, scope.accept, 201)
