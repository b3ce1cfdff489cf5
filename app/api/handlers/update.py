"""PUT of an object (or of its status): replace it, or create it where the kind allows."""

from __future__ import annotations

from starlette.responses import Response

from app.api import negotiation
from app.api.generic import GenericStore
from app.api.handlers.scope import RequestScope


async def update(store: GenericStore, scope: RequestScope) -> Response:
    wopts = scope.write_options()
    body = await scope.object_body(scope.strategy.kind)
    result = await store.update(scope.strategy, scope.ns, scope.name, body, wopts)
    return negotiation.written_response(scope.strategy, result, scope.accept, 201 if result.created else 200)
