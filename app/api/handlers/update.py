"""PUT of an object (or of its status): replace it, or create it where the kind allows."""

from __future__ import annotations

from starlette.responses import Response

from app.api import negotiation
from app.api.generic import GenericStore
from app.api.handlers.scope import RequestScope
from app.api.options import UPDATE_OPTIONS


async def update(store: GenericStore, scope: RequestScope) -> Response:
    body, wopts = await scope.object_and_options(scope.strategy.kind, UPDATE_OPTIONS)
    result = await store.update(scope.strategy, scope.ns, scope.name, body, wopts)
    return negotiation.written_response(scope.strategy, result, scope.accept, 201 if result.created else 200)
