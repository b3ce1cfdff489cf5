"""What a handler knows about its request: the resource it addresses, and the request itself."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response
from starlette.types import Receive

from app.api import bodies, negotiation
from app.api.generic import GenericStore
from app.api.options import CREATE_OPTIONS, WriteOptions, dry_run_values
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
    # The raw query, for the few options that take every value of a repeated parameter.
    query_string: bytes = b""

    @property
    def content_type(self) -> str | None:
        return self.headers.get("content-type")

    async def body(self) -> bytes:
        return await bodies.read_body(self.receive, self.headers.get("content-length"), self.body_limit)

    def dry_run(self) -> list[str]:
        """Every dryRun value of the query."""
        return dry_run_values(self.params, self.query_string)

    def write_options(self, kind: str = CREATE_OPTIONS, patch_type: str | None = None) -> WriteOptions:
        """Create, Update or PatchOptions (``kind``) from the query, refused as upstream refuses them."""
        return WriteOptions.parse(self.params, self.headers.get("user-agent", ""), kind, patch_type, self.dry_run())

    async def object_and_options(self, kind: str, options_kind: str, api_version: str = "") -> tuple[Any, WriteOptions]:
        """The body decoded as an object of ``kind`` (the name decode errors give; with
        ``api_version``, default the strategy's, what a protobuf envelope without its type is
        read as) and the write options, refused in upstream's order: a create checks the
        Content-Type (415) before it reads the body (413) and its options (422), an update after them."""
        media = negotiation.body_media_type(self.content_type) if options_kind == CREATE_OPTIONS else ""
        raw = await self.body()
        wopts = self.write_options(options_kind)
        media = media or negotiation.body_media_type(self.content_type)
        return negotiation.decode_body(raw, media, kind, api_version or self.strategy.api_version), wopts


Handler = Callable[[GenericStore, RequestScope], Awaitable[Response]]
