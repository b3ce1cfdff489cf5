"""What a handler knows about its request: the resource it addresses, and the request itself."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response
from starlette.types import Receive

from app.api import bodies, negotiation
from app.api.generic import GenericStore
from app.api.options import WriteOptions
from app.registry.base import KindStrategy, Subresource


@dataclass(slots=True)
class RequestScope:
    """One request on a resource path, parsed once by the router."""

    # The kind's strategy; a write through /status gets the kind's status strategy.
    strategy: KindStrategy
    # None: a cluster-scoped kind, or every namespace of a namespaced kind.
    namespace: str | None
    # "" for a collection.
    name: str
    subresource: Subresource | None
    # Plain dicts: Starlette's multi-dict and header lookups cost more than the rest of a GET.
    params: dict[str, str]
    headers: dict[str, str]
    receive: Receive
    body_limit: int
    # Read by nearly every handler, so set once rather than looked up on each use.
    ns: str = ""  # the namespace, or "" (as single-object operations take it)
    accept: str = ""  # the Accept header

    @property
    def content_type(self) -> str | None:
        return self.headers.get("content-type")

    async def body(self) -> bytes:
        return await bodies.read_body(self.receive, self.headers.get("content-length"), self.body_limit)

    async def object_body(self, kind: str) -> Any:
        """The request body decoded as an object of ``kind`` (the name decode errors give)."""
        return negotiation.decode_object(await self.body(), self.content_type, kind)

    def write_options(self) -> WriteOptions:
        return WriteOptions.parse(self.params, self.headers.get("user-agent", ""))


Handler = Callable[[GenericStore, RequestScope], Awaitable[Response]]
