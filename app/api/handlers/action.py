"""The one write of an action subresource (``POST pods/NAME/binding``, ``PUT namespaces/NAME/finalize``)."""

from __future__ import annotations

from starlette.responses import Response

from app.api import negotiation
from app.api.generic import GenericStore
from app.api.handlers.scope import RequestScope
from app.api.options import CREATE_OPTIONS, UPDATE_OPTIONS
from app.registry.base import ActionSubresource


async def act(store: GenericStore, scope: RequestScope) -> Response:
    subresource = scope.subresource
    assert isinstance(subresource, ActionSubresource)  # the router sends nothing else here
    strategy = scope.strategy
    code = 201 if "create" in subresource.verbs else 200
    options = CREATE_OPTIONS if "create" in subresource.verbs else UPDATE_OPTIONS
    api_version, kind = subresource.api_version_and_kind(strategy)
    body, wopts = await scope.object_and_options(kind, options, api_version)
    result = await store.write_subresource(strategy, subresource, scope.ns, scope.name, body, wopts)
    if subresource.answers_status:
        return negotiation.success_response(code, accept=scope.accept)
    return negotiation.written_response(strategy, result, scope.accept, code)
