"""PATCH of an object (or of its status): JSON, merge, strategic merge patch or server-side apply."""

from __future__ import annotations

from starlette.responses import Response

from app.api import negotiation
from app.api.generic import GenericStore
from app.api.handlers.scope import RequestScope
from kube import errors


async def patch(store: GenericStore, scope: RequestScope) -> Response:
    wopts = scope.write_options()
    body, patch_type = negotiation.decode_patch(await scope.body(), scope.content_type, scope.strategy.kind)
    if patch_type == "apply" and not scope.params.get("fieldManager"):
        raise errors.bad_request("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch")
    if patch_type != "apply" and scope.params.get("force"):
        raise errors.bad_request("PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch")
    result = await store.patch(scope.strategy, scope.ns, scope.name, body, patch_type, wopts)
    return negotiation.written_response(scope.strategy, result, scope.accept, 201 if result.created else 200)
