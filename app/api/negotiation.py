"""Content negotiation, in one place: which request bodies are understood (by Content-Type),
what an Accept header asks for, and the writers of every answer on a resource path (objects,
lists, watch streams, Status).

Answers are JSON. An Accept header may ask for a ``meta.k8s.io`` conversion of it (a Table,
PartialObjectMetadata, PartialObjectMetadataList; built by ``app.api.tables``); entries this
server cannot produce (protobuf) are skipped. Request bodies are JSON, YAML, or protobuf for the
few kinds ``app.api.protobuf`` reads; patches by their patch media type.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.responses import Response, StreamingResponse

from app import metrics
from app.api import bodies, discovery, protobuf, tables
from app.api.generic import WriteResult
from app.api.tables import Conversion
from app.registry.base import KindStrategy, Obj
from app.storage.cache import StoredObject
from kube import errors
from kube.errors import ApiError, bad_request, unsupported_media_type

JSON = "application/json"
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
# A create/update body in any of these is JSON (so is a body sent without a Content-Type).
JSON_TYPES = ("", JSON, "*/*", "text/plain")
PROTOBUF = "application/vnd.kubernetes.protobuf"
PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+cbor": None,
}
META_GROUP = "meta.k8s.io"


# ---- request bodies ---------------------------------------------------------------------


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def decode_object(raw: bytes, content_type: str | None, kind: str) -> Any:
    """A create/update body: JSON (also when no Content-Type is sent), YAML or protobuf."""
    mt = media_type(content_type)
    if mt in JSON_TYPES:
        if not raw.strip():
            raise bad_request(f"the object provided is unrecognized (must be of type {kind}): no content")
        return bodies.decode_json(raw, kind)
    if mt in YAML_TYPES:
        return bodies.decode_yaml(raw, kind)
    if mt == PROTOBUF:
        try:
            value = protobuf.decode_k8s_protobuf(raw)
        except ValueError:
            raise unsupported_media_type(mt) from None
        bodies.check_depth(value)
        return value
    raise unsupported_media_type(content_type or "")


def decode_delete_options(raw: bytes, content_type: str | None) -> Any:
    """A DELETE body: None when empty, else DeleteOptions as YAML when it says so, JSON otherwise.

    The OpenAPI documents offer JSON and YAML for DeleteOptions, as upstream's do; any other
    Content-Type is read as JSON, as before (clients send DELETE bodies with odd types).
    """
    if not raw.strip():
        return None
    if media_type(content_type) in YAML_TYPES:
        return bodies.decode_yaml(raw, "DeleteOptions")
    return bodies.decode_json(raw, "DeleteOptions")


def decode_patch(raw: bytes, content_type: str | None, kind: str) -> tuple[Any, str]:
    """A PATCH body and its patch type (json, merge, strategic, apply) from the Content-Type."""
    mt = media_type(content_type)
    patch_type = PATCH_TYPES.get(mt)
    if patch_type is None:
        raise unsupported_media_type(content_type or "")
    if not raw.strip():
        raise bad_request("the body of the request was empty")
    if patch_type == "apply":
        return bodies.decode_yaml(raw, kind), patch_type
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"error decoding patch: {exc}") from None
    bodies.check_depth(value)
    return value, patch_type


# ---- Accept ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MediaRange:
    """One entry of an Accept header: ``type/subtype;param=value;q=...``."""

    type: str
    subtype: str
    params: dict[str, str] = field(default_factory=dict)
    q: float = 1.0

    @property
    def media_type(self) -> str:
        return f"{self.type}/{self.subtype}"

    def matches(self, media_type: str) -> bool:
        """Whether this range accepts the concrete ``media_type`` (wildcards allowed)."""
        main, _, sub = media_type.partition("/")
        return self.type in ("*", main) and self.subtype in ("*", sub)

    def asks_for(self, group: str, versions: Sequence[str], kinds: Sequence[str]) -> bool:
        """Whether this entry asks for JSON converted to one of ``kinds`` in ``group``/``versions``."""
        return (
            self.params.get("as") in kinds
            and self.params.get("g") == group
            and self.params.get("v") in versions
            and self.matches(JSON)
        )


def parse_accept(header: str | None) -> list[MediaRange]:
    """Accept entries in the order a server must consider them.

    Like apimachinery's negotiation: higher ``q`` first, then concrete types before
    wildcards; otherwise the client's order is kept (a stable sort). Entries with
    ``q=0`` are dropped; an empty header means ``*/*``.
    """
    ranges: list[MediaRange] = []
    for raw in (header or "").split(","):
        parts = [p.strip() for p in raw.split(";")]
        if not parts[0]:
            continue
        main, _, sub = parts[0].lower().partition("/")
        if main == "*" and not sub:
            sub = "*"  # a bare "*" is common enough to tolerate
        params: dict[str, str] = {}
        q = 1.0
        for param in parts[1:]:
            key, _, value = param.partition("=")
            key, value = key.strip().lower(), value.strip().strip('"')
            if not key:
                continue
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
            else:
                params[key] = value
        if q <= 0.0 or not sub:
            continue
        ranges.append(MediaRange(main, sub, params, q))
    if not ranges and not (header or "").strip():
        ranges.append(MediaRange("*", "*"))
    return sorted(ranges, key=lambda r: (-r.q, r.type == "*", r.subtype == "*"))


@functools.lru_cache(maxsize=256)  # clients send the same few Accept headers on every request
def conversion(accept_header: str | None) -> Conversion | None:
    """The conversion the preferred servable Accept entry asks for (None: the object as it is).

    Entries asking for an unknown conversion, or for one in an encoding this server does not
    produce (protobuf), are skipped, as upstream skips media types it cannot serve; the first
    plain entry decides "no conversion".
    """
    for entry in parse_accept(accept_header):
        if "as" not in entry.params:
            return None
        if entry.asks_for(META_GROUP, tables.TABLE_VERSIONS, tables.CONVERSIONS):
            return Conversion(entry.params["as"], entry.params["v"])
    return None


def wants_aggregated_discovery(accept_header: str | None) -> bool:
    """Whether ``/api`` or ``/apis`` must answer the aggregated discovery document.

    Upstream v1.37 serves only ``apidiscovery.k8s.io/v2`` (v2beta1 is gone): entries
    asking for another ``as=`` form or version are skipped, and the first plain entry
    (``application/json``, ``*/*``...) selects the legacy document.
    """
    for entry in parse_accept(accept_header):
        if "as" not in entry.params:
            return False
        if entry.asks_for(discovery.AGGREGATED_GROUP, (discovery.AGGREGATED_VERSION,), (discovery.AGGREGATED_KIND,)):
            return True
    return False


def wants_protobuf_only(accept_header: str) -> bool:
    """Whether a client asks for protobuf and not JSON (``/openapi/v2``: answered 404, which kubectl tolerates)."""
    return "protobuf" in accept_header and "json" not in accept_header


# ---- answers --------------------------------------------------------------------------------


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None, media_type: str = JSON) -> Response:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return Response(raw, status_code=status, media_type=media_type, headers=headers)


def status_response(exc: ApiError, headers: dict[str, str] | None = None) -> Response:
    return json_response(exc.status(), exc.code, headers)


def success_response(code: int | None = None, details: Obj | None = None) -> Response:
    """A Success Status: the answer of a write with no object to show (a binding, or a delete
    that removed an object of a kind that does not answer the deleted object)."""
    body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details is not None:
        body["details"] = details
    if code is not None:
        body["code"] = code
    return json_response(body, code or 200)


def warning_headers(warnings: list[str]) -> dict[str, str]:
    if not warnings:
        return {}
    # Starlette joins repeated headers poorly; one header with comma-separated warn-values is valid HTTP.
    # A quoted string with control and non-ASCII characters escaped (as Go's strconv.Quote does):
    # header values may hold neither.
    return {"Warning": ", ".join(f"299 - {json.dumps(w)}" for w in warnings)}


def _plain(item: StoredObject | Obj) -> Obj:
    """The object of a stored item or an already decoded one."""
    return item.obj if isinstance(item, StoredObject) else item


def stored_response(strategy: KindStrategy, stored: StoredObject, accept: str, include_object: str) -> Response:
    """A read object, as the Accept header asks."""
    wanted = conversion(accept)
    if wanted is None:
        return json_response(stored.raw)
    return json_response(tables.convert_object(strategy, stored.obj, wanted, include_object))


def written_response(strategy: KindStrategy, result: WriteResult, accept: str, code: int) -> Response:
    """A written object with the write's warnings, as the Accept header asks."""
    headers = warning_headers(result.warnings)
    wanted = conversion(accept)
    if wanted is None:
        return json_response(result.raw, code, headers)
    # Converted after the write, as upstream: a list conversion fails with the write done.
    return json_response(tables.convert_object(strategy, _plain(result.obj), wanted), code, headers)


def deleted_response(strategy: KindStrategy, obj: StoredObject | Obj | None, accept: str, code: int) -> Response:
    """A deleted (or deleting) object: a PartialObjectMetadata when asked for, never a Table
    (upstream answers the object itself then)."""
    wanted = conversion(accept)
    if obj is not None and wanted is not None and wanted.kind != tables.TABLE:
        obj = tables.convert_object(strategy, _plain(obj), wanted)
    return json_response(obj.raw if isinstance(obj, StoredObject) else orjson.dumps(obj), code)


def _list_bytes(strategy: KindStrategy, items: Sequence[StoredObject | Obj], meta: Obj) -> bytes:
    # The stored bytes of each item go out as they are: no decode and re-encode per item (and no
    # function call per item either: lists are long).
    raws = [i.raw if isinstance(i, StoredObject) else orjson.dumps(i) for i in items]
    head = orjson.dumps({"kind": strategy.list_kind, "apiVersion": strategy.api_version, "metadata": meta})
    return head[:-1] + b',"items":[' + b",".join(raws) + b"]}"


def list_response(strategy: KindStrategy, items: Sequence[StoredObject | Obj], meta: Obj, accept: str, include_object: str) -> Response:
    """A list (or the objects a deletecollection removed), as the Accept header asks."""
    wanted = conversion(accept)
    if wanted is None:
        return json_response(_list_bytes(strategy, items, meta))
    refused = tables.not_acceptable_for_list(strategy, wanted)
    if refused is not None:
        raise refused
    objs = [_plain(i) for i in items]
    if wanted.kind == tables.TABLE:
        return json_response(tables.table_for(strategy, objs, meta, include_object))
    return json_response(tables.partial_list(objs, meta, wanted.version))


def check_watch_acceptable(strategy: KindStrategy, accept: str) -> None:
    """Refuse (406) a conversion a watch cannot answer before the watch starts: each event carries one object."""
    wanted = conversion(accept)
    if wanted is not None and (refused := tables.not_acceptable_for_object(strategy, wanted)) is not None:
        raise refused


def event_line(kind: str, item: StoredObject | Obj) -> bytes:
    """One watch event on the wire: a JSON object and a newline."""
    if isinstance(item, StoredObject):
        return item.watch_line(kind)
    return b'{"type":"' + kind.encode() + b'","object":' + orjson.dumps(item) + b"}\n"


def watch_response(strategy: KindStrategy, events: AsyncIterator[list[tuple[str, StoredObject | Obj]]], accept: str, include_object: str) -> Response:
    """A watch stream: each batch of events is written as one chunk of JSON lines."""
    wanted = conversion(accept)
    as_table = wanted is not None and wanted.kind == tables.TABLE

    async def stream() -> AsyncIterator[bytes]:
        metrics.WATCHERS.inc()
        try:
            async for batch in events:
                lines: list[bytes] = []
                for kind, item in batch:
                    if as_table and kind == "BOOKMARK":
                        lines.append(event_line(kind, tables.table_bookmark(item["metadata"]["resourceVersion"])))  # type: ignore[index]
                    elif wanted is not None:
                        lines.append(event_line(kind, tables.convert_object(strategy, _plain(item), wanted, include_object)))
                    else:
                        lines.append(event_line(kind, item))
                yield b"".join(lines)
        finally:
            metrics.WATCHERS.dec()

    return StreamingResponse(stream(), media_type=JSON, headers={"Cache-Control": "no-cache, private"})


def expired_watch_response(exc: Exception) -> Response:
    """A watch from a compacted revision: one ERROR event (410 Gone) on a 200 stream."""
    error = errors.gone(str(exc)).status()

    async def expired() -> AsyncIterator[bytes]:
        yield orjson.dumps({"type": "ERROR", "object": error}) + b"\n"

    return StreamingResponse(expired(), media_type=JSON)
