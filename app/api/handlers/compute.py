"""The one create of a computed subresource (``POST serviceaccounts/NAME/token``): an answer about
the stored object, which stays as it is."""

from __future__ import annotations

from starlette.responses import Response

from app.api import negotiation
from app.api.generic import GenericStore
from app.api.handlers.scope import RequestScope
from app.api.options import CREATE_OPTIONS
from app.registry.base import ComputedSubresource


async def compute(store: GenericStore, scope: RequestScope) -> Response:
    subresource = scope.subresource
    assert isinstance(subresource, ComputedSubresource)  # the router sends nothing else here
    api_version, kind = subresource.api_version_and_kind(scope.strategy)
    body, _options = await scope.object_and_options(kind, CREATE_OPTIONS, api_version)
    answer = await store.compute_subresource(scope.strategy, subresource, scope.ns, scope.name, body)
    return negotiation.object_response(answer, scope.accept, 201)
