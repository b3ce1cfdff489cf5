"""GET, PUT and PATCH of ``NAME/scale``: the object's replicas as an autoscaling/v1 Scale."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from app.api import negotiation, schemas
from app.api import patch as patches
from app.api.generic import GenericStore
from app.api.handlers.scope import RequestScope
from app.api.options import PATCH_OPTIONS, UPDATE_OPTIONS
from app.registry.base import Obj, ScaleSubresource
from kube import errors

# The patch types a Scale takes (server-side apply of a Scale is not served).
SCALE_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json")


def _subresource(scope: RequestScope) -> ScaleSubresource:
    subresource = scope.subresource
    assert isinstance(subresource, ScaleSubresource)  # the router sends nothing else here
    return subresource


async def get_scale(store: GenericStore, scope: RequestScope) -> Response:
    scale = await store.get_scale(scope.strategy, _subresource(scope), scope.ns, scope.name)
    return negotiation.object_response(scale, scope.accept)


async def update_scale(store: GenericStore, scope: RequestScope) -> Response:
    subresource = _subresource(scope)
    api_version, kind = subresource.api_version_and_kind(scope.strategy)
    body, wopts = await scope.object_and_options(kind, UPDATE_OPTIONS, api_version)
    sent = orjson.dumps(body)
    scale, warnings = await store.update_scale(scope.strategy, subresource, scope.ns, scope.name, lambda _current: orjson.loads(sent), wopts)
    return negotiation.object_response(scale, scope.accept, 200, negotiation.warning_headers(warnings))


async def patch_scale(store: GenericStore, scope: RequestScope) -> Response:
    subresource = _subresource(scope)
    patch_type = negotiation.patch_type(scope.content_type)
    if patch_type == "apply":
        raise errors.unsupported_media_type(SCALE_PATCH_TYPES)
    _api_version, kind = subresource.api_version_and_kind(scope.strategy)
    raw = await scope.body()
    wopts = scope.write_options(PATCH_OPTIONS, patch_type)
    body = negotiation.decode_patch(raw, kind, patch_type)
    group, version, _ = subresource.group_version_kind(scope.strategy)

    def patched(current: Obj) -> Any:
        if patch_type == "json":
            return patches.apply_json_patch(current, body)
        if patch_type == "merge":
            return patches.apply_merge_patch(current, body)
        return patches.apply_strategic_merge_patch(current, body, schemas.schema_for_kind(f"{group}/{version}", kind))

    scale, warnings = await store.update_scale(scope.strategy, subresource, scope.ns, scope.name, patched, wopts)
    return negotiation.object_response(scale, scope.accept, 200, negotiation.warning_headers(warnings))
