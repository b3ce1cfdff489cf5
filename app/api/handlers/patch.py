"""PATCH of an object (or of its status): JSON, merge, strategic merge patch or server-side apply."""

from __future__ import annotations

from starlette.responses import Response

from app.api import negotiation
from app.api.generic import GenericStore
from app.api.handlers.scope import RequestScope
from app.api.options import PATCH_OPTIONS


async def patch(store: GenericStore, scope: RequestScope) -> Response:
    # The router has refused a Content-Type that is not a patch type (upstream's first check).
    patch_type = negotiation.patch_type(scope.content_type)
    raw = await scope.body()
    wopts = scope.write_options(PATCH_OPTIONS, patch_type)
    body = negotiation.decode_patch(raw, scope.strategy.kind, patch_type)
    result = await store.patch(scope.strategy, scope.ns, scope.name, body, patch_type, wopts)
    return negotiation.written_response(scope.strategy, result, scope.accept, 201 if result.created else 200)
