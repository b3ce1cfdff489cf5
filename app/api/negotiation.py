"""Content negotiation, in one place: which request bodies are understood (by Content-Type),
what an Accept header asks for, and the writers of every answer on a resource path (objects,
lists, watch streams, Status).

Refusals are upstream's: an Accept header that allows none of JSON, YAML or protobuf (with
parameters upstream honours) is a 406, a body in another media type a 415, a PATCH whose
Content-Type is not a patch type a 415 before anything else is looked at.

Answers are JSON, or protobuf when the Accept header chooses it (``app.api.protobuf``: objects,
lists, Status errors, watch frames); JSON also where upstream would write YAML. An Accept header
may ask for a ``meta.k8s.io`` conversion (a Table, PartialObjectMetadata,
PartialObjectMetadataList; built by ``app.api.tables``). Request bodies are JSON, YAML or
protobuf; patches by their patch media type.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from starlette.responses import Response, StreamingResponse

from app import metrics
from app.api import bodies, discovery, protobuf, tables
from app.api.generic import WriteResult
from app.api.options import table_include_object
from app.api.tables import Conversion
from app.auth.context import warning_header_value
from app.registry.base import KindStrategy, Obj
from app.storage.cache import StoredObject, event_line_parts
from kube import errors
from kube.errors import ApiError, bad_request, not_acceptable, unsupported_media_type

JSON = "application/json"
YAML = "application/yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"
# What upstream's serializers read and write, in its order (CBOR sits behind a gate that is off):
# the only request bodies a create, update, delete or review takes, the only answers there are.
SERIALIZED_MEDIA_TYPES = (JSON, YAML, PROTOBUF)
# Those with a stream framing, for watches.
STREAM_MEDIA_TYPES = (JSON, PROTOBUF)
# Patch media types, in upstream's order; the CBOR apply type is behind the same gate.
PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}
META_GROUP = "meta.k8s.io"

log = logging.getLogger("app.api")


# ---- request bodies ---------------------------------------------------------------------


# Go's mime token characters: printable ASCII but for space and the tspecials.
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_MEDIA_TYPE = re.compile(rf"({_TOKEN})(?:/({_TOKEN}))?")
_PARAMETER = re.compile(rf'\s*;\s*({_TOKEN})\s*=\s*({_TOKEN}|"(?:[^"\\]|\\.)*")')


@functools.lru_cache(maxsize=64)  # clients send the same few Content-Types
def go_media_type(content_type: str) -> str | None:
    """The media type Go's mime.ParseMediaType finds in a Content-Type (lower case, without
    parameters), or None where it reports an error: no type, junk after the subtype, a
    malformed or repeated parameter (a trailing ';' is allowed)."""
    base, _, _ = content_type.partition(";")
    media = base.strip().lower()
    if _MEDIA_TYPE.fullmatch(media) is None:
        return None
    rest = content_type[len(base) :]
    seen: set[str] = set()
    while rest.strip():
        match = _PARAMETER.match(rest)
        if match is None:
            return media if rest.strip() == ";" else None
        key = match.group(1).lower()
        if key in seen:
            return None
        seen.add(key)
        rest = rest[match.end() :]
    return media


def body_media_type(content_type: str | None) -> str:
    """The serializer upstream's NegotiateInputSerializer picks for a body: JSON when no
    Content-Type is sent, else one it serves (parameters such as charset are ignored); 415
    for anything else."""
    if not content_type:
        return JSON
    if content_type in (JSON, PROTOBUF):  # what clients send, parsed already
        return content_type
    media = go_media_type(content_type)
    if media not in SERIALIZED_MEDIA_TYPES:
        raise unsupported_media_type(SERIALIZED_MEDIA_TYPES)
    return media


def decode_object(raw: bytes, content_type: str | None, kind: str) -> Any:
    """A create/update body: JSON (also when no Content-Type is sent), YAML or protobuf."""
    return decode_body(raw, body_media_type(content_type), kind)


def decode_body(raw: bytes, media: str, kind: str, api_version: str = "") -> Any:
    """A body in ``media`` (one ``body_media_type`` chose) as an object of ``kind`` (a protobuf
    envelope that names no type is read as ``api_version`` and ``kind``)."""
    if media == JSON:
        if not raw.strip():
            raise bad_request(f"the object provided is unrecognized (must be of type {kind}): no content")
        return bodies.decode_json(raw, kind)
    if media == YAML:
        return bodies.decode_yaml(raw, kind)
    return protobuf.decode_body(raw, api_version or "v1", kind)


def decode_delete_options(raw: bytes, content_type: str | None) -> Any:
    """A DELETE body: None when empty (the options come from the query then), else
    DeleteOptions in a media type upstream reads them in."""
    if not raw:
        return None
    return decode_body(raw, body_media_type(content_type), "DeleteOptions", "meta.k8s.io/v1")


def patch_type(content_type: str | None) -> str:
    """The patch type a PATCH's Content-Type names; 415 for any other, as upstream's patch
    handler answers before anything else (it cuts parameters off at the first ';' and
    compares the rest as it is, case and spaces included)."""
    media = content_type or ""
    cut = media.find(";")
    if cut > 0:
        media = media[:cut]
    found = PATCH_TYPES.get(media)
    if found is None:
        raise unsupported_media_type(tuple(PATCH_TYPES))
    return found


def decode_patch(raw: bytes, kind: str, patch: str) -> Any:
    """A PATCH body of the type ``patch`` names (the apply configuration is YAML, where an empty
    document is an empty configuration, refused later for its missing type)."""
    if patch == "apply":
        return bodies.decode_yaml(raw, kind, apply=True)
    if not raw.strip():
        raise bad_request("the body of the request was empty")
    return bodies.decode_patch_json(raw)


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
        """Whether this range accepts the concrete ``media_type`` (``*/*`` or ``type/*``; case matters, as upstream)."""
        main, _, sub = media_type.partition("/")
        return (self.type == main and self.subtype in ("*", sub)) or (self.type == "*" and self.subtype == "*")

    def asks_for(self, group: str, versions: Sequence[str], kinds: Sequence[str]) -> bool:
        """Whether this entry asks for JSON converted to one of ``kinds`` in ``group``/``versions``."""
        return (
            self.params.get("as") in kinds
            and self.params.get("g") == group
            and self.params.get("v") in versions
            and self.matches(JSON)
        )


_GO_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _quality(value: str) -> float:
    """Go's strconv.ParseFloat as goautoneg reads ``q``: 0 when it fails (spaces included)."""
    return float(value) if _GO_FLOAT.fullmatch(value) else 0.0


def _before(a: MediaRange, b: MediaRange) -> bool:
    """goautoneg's ordering: higher q, or a concrete type or subtype before a wildcard."""
    return a.q > b.q or (a.type != "*" and b.type == "*") or (a.subtype != "*" and b.subtype == "*")


def parse_accept(header: str | None) -> list[MediaRange]:
    """Accept entries in the order upstream considers them (goautoneg's ParseAccept).

    Entries are compared as written (no case folding); ``q=0`` entries stay, last; a bare
    ``*`` is ``*/*``; entries without a subtype are dropped. The order is goautoneg's, an
    insertion sort with a comparison that is not a strict order, so the client's order shows
    through in the odd places it does upstream.
    """
    ranges: list[MediaRange] = []
    for part in (header or "").split(","):
        pieces = part.strip(" ").split(";")
        main, *subs = pieces[0].split("/")
        main = main.strip(" ")
        if not subs and main == "*":
            sub = "*"
        elif len(subs) == 1:
            sub = subs[0].strip(" ")
        else:
            continue
        params: dict[str, str] = {}
        q = 1.0
        for param in pieces[1:]:
            key, sep, value = param.partition("=")
            if not sep:
                continue
            key = key.strip(" ")
            if key == "q":
                q = _quality(value)
            else:
                params[key] = value.strip(" ")
        ranges.append(MediaRange(main, sub, params, q))
    for i in range(1, len(ranges)):
        j = i
        while j > 0 and _before(ranges[j], ranges[j - 1]):
            ranges[j], ranges[j - 1] = ranges[j - 1], ranges[j]
            j -= 1
    return ranges


@dataclass(frozen=True)
class Negotiated:
    """What upstream's NegotiateOutputMediaType chose: a media type it serializes (this server
    answers JSON whatever it is) and the ``meta.k8s.io`` conversion asked for, if any."""

    media_type: str
    conversion: Conversion | None


def _not_acceptable(accepted: Sequence[str]) -> ApiError:
    """upstream's errNotAcceptable."""
    return not_acceptable(f"only the following media types are accepted: {', '.join(accepted)}")


def _options_allowed(entry: MediaRange, media_type: str) -> Conversion | Literal[False] | None:
    """upstream's acceptMediaTypeOptions for a resource endpoint: False when the entry's
    parameters rule ``media_type`` out, else the conversion it asks for (None: none)."""
    stream = entry.params.get("stream", "")
    if stream and (stream != "watch" or media_type not in STREAM_MEDIA_TYPES):
        return False
    server_version = entry.params.get("sv", "")
    if server_version and server_version != "v1":
        return False
    if not any(key in entry.params for key in ("as", "g", "v")):
        return None
    kind, group, version = entry.params.get("as", ""), entry.params.get("g", ""), entry.params.get("v", "")
    if group != META_GROUP or version not in tables.TABLE_VERSIONS or kind not in tables.CONVERSIONS:
        return False
    if kind == tables.TABLE and media_type == PROTOBUF:
        return False
    return Conversion(kind, version)


@functools.lru_cache(maxsize=256)  # clients send the same few Accept headers on every request
def _negotiate(accept_header: str) -> Negotiated | ApiError:
    if not accept_header:
        return Negotiated(JSON, None)
    for entry in parse_accept(accept_header):
        for media_type in SERIALIZED_MEDIA_TYPES:
            if not entry.matches(media_type):
                continue
            wanted = _options_allowed(entry, media_type)
            if wanted is not False:
                return Negotiated(media_type, wanted)
    return _not_acceptable(SERIALIZED_MEDIA_TYPES)


def negotiate(accept_header: str | None) -> Negotiated:
    """upstream's NegotiateOutputMediaType for a resource path: the first Accept entry (in
    goautoneg's order) naming a media type the server serializes, with parameters it honours
    (a known ``meta.k8s.io`` conversion, ``stream=watch`` where there is a stream framing);
    406 when there is none. No header means JSON."""
    negotiated = _negotiate(accept_header or "")
    if isinstance(negotiated, ApiError):
        raise negotiated
    return negotiated


def conversion(accept_header: str | None) -> Conversion | None:
    """The conversion the Accept header asks for (None: the object as it is). The router has
    refused a header that allows no answer; one that did not get here is read as no conversion."""
    negotiated = _negotiate(accept_header or "")
    return negotiated.conversion if isinstance(negotiated, Negotiated) else None


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


class _BytesResponse(Response):
    """An answer of ready bytes with no headers of its own, built as starlette's ``Response``
    builds it (Content-Length, then Content-Type; no length on a 1xx, 204 or 304) without its
    general header handling, which runs as Python on every answer."""

    def __init__(self, body: bytes, status_code: int, media_type: str) -> None:
        self.status_code = status_code
        self.media_type = media_type
        self.background = None
        self.body = body
        content_type = (b"content-type", media_type.encode("latin-1"))
        if status_code < 200 or status_code in (204, 304):
            self.raw_headers = [content_type]
        else:
            self.raw_headers = [(b"content-length", str(len(body)).encode("latin-1")), content_type]


def _response(raw: bytes, status: int, headers: dict[str, str] | None, media_type: str) -> Response:
    if headers or media_type.startswith("text/"):
        return Response(raw, status_code=status, media_type=media_type, headers=headers)
    return _BytesResponse(raw, status, media_type)


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None, media_type: str = JSON) -> Response:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return _response(raw, status, headers, media_type)


def _media_type(accept: str) -> str:
    """The media type an answer is written in: what the Accept header chose, else JSON (a
    refused header's 406 is itself JSON, as upstream writes it)."""
    negotiated = _negotiate(accept)
    return negotiated.media_type if isinstance(negotiated, Negotiated) else JSON


def _wants_protobuf(accept: str) -> bool:
    return bool(accept) and _media_type(accept) == PROTOBUF


def protobuf_response(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return _response(body, status, headers, PROTOBUF)


def object_response(obj: StoredObject | Obj, accept: str, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """One object (with its apiVersion and kind) in the media type the Accept header chose."""
    if _wants_protobuf(accept):
        return protobuf_response(protobuf.object_bytes(obj), status, headers)
    return json_response(obj.raw if isinstance(obj, StoredObject) else obj, status, headers)


def status_body(exc: ApiError, accept: str) -> tuple[str, bytes]:
    """(Content-Type, body) of ``exc``'s Status in the media type the Accept header chose, for
    the filters that write their refusals themselves."""
    if _wants_protobuf(accept):
        return PROTOBUF, protobuf.status_bytes(exc)
    return JSON, orjson.dumps(exc.status())


def accept_header(scope: Any) -> str:
    """The Accept header of an ASGI request."""
    for key, value in scope["headers"]:
        if key == b"accept":
            return str(value.decode("latin-1"))
    return ""


def status_response(exc: ApiError, headers: dict[str, str] | None = None, accept: str = "") -> Response:
    if exc.retry_after_seconds:
        headers = {**(headers or {}), "Retry-After": str(exc.retry_after_seconds)}
    if _wants_protobuf(accept):
        return protobuf_response(protobuf.status_bytes(exc), exc.code, headers)
    return json_response(exc.status(), exc.code, headers)


def success_response(code: int | None = None, details: Obj | None = None, accept: str = "") -> Response:
    """A Success Status: the answer of a write with no object to show (a binding, or a delete
    that removed an object of a kind that does not answer the deleted object)."""
    body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details is not None:
        body["details"] = details
    if code is not None:
        body["code"] = code
    return object_response(body, accept, code or 200)


def warning_headers(warnings: list[str]) -> dict[str, str]:
    if not warnings:
        return {}
    # Starlette joins repeated headers poorly; one header with comma-separated warn-values is valid HTTP.
    return {"Warning": warning_header_value(warnings)}


def _plain(item: StoredObject | Obj) -> Obj:
    """The object of a stored item or an already decoded one."""
    return item.obj if isinstance(item, StoredObject) else item


def stored_response(strategy: KindStrategy, stored: StoredObject, accept: str, include_object: str) -> Response:
    """A read object, as the Accept header asks."""
    wanted = conversion(accept)
    if wanted is None:
        return object_response(stored, accept)
    return object_response(tables.convert_object(strategy, stored.obj, wanted, _include_object(wanted, include_object)), accept)


def written_response(strategy: KindStrategy, result: WriteResult, accept: str, code: int) -> Response:
    """A written object with the write's warnings, as the Accept header asks."""
    headers = warning_headers(result.warnings)
    wanted = conversion(accept)
    if wanted is None:
        return object_response(result.obj, accept, code, headers)
    # Converted after the write, as upstream: a list conversion fails with the write done.
    return object_response(tables.convert_object(strategy, _plain(result.obj), wanted), accept, code, headers)


def deleted_response(strategy: KindStrategy, obj: StoredObject | Obj | None, accept: str, code: int) -> Response:
    """A deleted (or deleting) object: a PartialObjectMetadata when asked for, never a Table
    (upstream answers the object itself then)."""
    wanted = conversion(accept)
    if obj is not None and wanted is not None and wanted.kind != tables.TABLE:
        obj = tables.convert_object(strategy, _plain(obj), wanted)
    if obj is None:
        return json_response(b"null", code)
    return object_response(obj, accept, code)


# A streamed answer goes out in pieces of about this size: the whole list is never one buffer.
STREAM_CHUNK_BYTES = 256 * 1024
# A client that takes no piece of a streamed answer (a watch; a list is cut at its request
# deadline) for this long is cut off rather than buffered for: --stream-write-timeout.
STREAM_WRITE_TIMEOUT = 60.0


class ChunkedResponse(StreamingResponse):
    """A 200 whose body is written piece by piece as the client takes it (uvicorn waits while the
    connection's buffer is full), and abandoned (the connection closed) when the client takes
    nothing for ``STREAM_WRITE_TIMEOUT`` seconds."""

    def __init__(self, chunks: AsyncIterator[bytes], headers: dict[str, str] | None = None, media_type: str = JSON) -> None:
        super().__init__(chunks, 200, headers, media_type)

    async def stream_response(self, send: Any) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        chunks = self.body_iterator
        try:
            async for chunk in chunks:
                try:
                    async with asyncio.timeout(STREAM_WRITE_TIMEOUT):
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                except TimeoutError:
                    log.info("cut off a client that read nothing for %gs", STREAM_WRITE_TIMEOUT)
                    return  # uvicorn closes a connection whose response was not finished
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class _Pieces:
    """Bytes gathered into pieces of about STREAM_CHUNK_BYTES: at most one piece is built at a time."""

    def __init__(self, *start: bytes) -> None:
        self.parts: list[bytes] = list(start)
        self.size = 0

    def add(self, *parts: bytes) -> bytes | None:
        """Append ``parts``; the piece to write when it is full."""
        self.parts.extend(parts)
        self.size += sum(map(len, parts))
        return self.take() if self.size >= STREAM_CHUNK_BYTES else None

    def take(self) -> bytes:
        piece = b"".join(self.parts)
        self.parts = []
        self.size = 0
        return piece


async def _list_chunks(strategy: KindStrategy, items: Sequence[StoredObject | Obj], meta: Obj) -> AsyncIterator[bytes]:
    # The stored bytes of each item go out as they are (no decode and re-encode), in runs of about
    # STREAM_CHUNK_BYTES joined at C speed (lists are long: no function call per item).
    raws = [i.raw if isinstance(i, StoredObject) else orjson.dumps(i) for i in items]
    head = orjson.dumps({"kind": strategy.list_kind, "apiVersion": strategy.api_version, "metadata": meta})
    sample = raws[:64]
    per_piece = max(1, STREAM_CHUNK_BYTES * len(sample) // max(sum(map(len, sample)), 1))
    for start in range(0, max(len(raws), 1), per_piece):
        # The first piece opens the list, every other one starts with the comma after the last.
        first = head[:-1] + b',"items":[' if start == 0 else b""
        last = b"]}" if start + per_piece >= len(raws) else b""
        yield first + b",".join([b"", *raws[start : start + per_piece]])[0 if start else 1 :] + last


def _small_list(strategy: KindStrategy, items: Sequence[StoredObject | Obj], meta: Obj) -> bytes | None:
    """A list small enough to answer in one piece (with a Content-Length), None otherwise."""
    total = 0
    for item in items:
        if not isinstance(item, StoredObject):
            return None
        total += len(item.raw)
        if total > STREAM_CHUNK_BYTES:
            return None
    head = orjson.dumps({"kind": strategy.list_kind, "apiVersion": strategy.api_version, "metadata": meta})
    return head[:-1] + b',"items":[' + b",".join([i.raw for i in items]) + b"]}"  # type: ignore[union-attr]


def list_response(strategy: KindStrategy, items: Sequence[StoredObject | Obj], meta: Obj, accept: str, include_object: str) -> Response:
    """A list (or the objects a deletecollection removed), as the Accept header asks."""
    wanted = conversion(accept)
    if wanted is None and _wants_protobuf(accept):
        pieces = protobuf.list_pieces(strategy, items, meta, STREAM_CHUNK_BYTES)
        if len(pieces) == 1:
            return protobuf_response(pieces[0])
        return ChunkedResponse(_aiter(pieces), media_type=PROTOBUF)
    if wanted is None:
        small = _small_list(strategy, items, meta)
        if small is not None:
            return json_response(small)
        return ChunkedResponse(_list_chunks(strategy, items, meta))
    refused = tables.not_acceptable_for_list(strategy, wanted)
    if refused is not None:
        raise refused
    objs = [_plain(i) for i in items]
    if wanted.kind == tables.TABLE:
        return json_response(tables.table_for(strategy, objs, meta, table_include_object(include_object)))
    return object_response(tables.partial_list(objs, meta, wanted.version), accept)


async def _aiter(pieces: list[bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


def _include_object(wanted: Conversion, include_object: str) -> str:
    """What a conversion puts in each row: only a Table reads (and refuses) includeObject."""
    return table_include_object(include_object) if wanted.kind == tables.TABLE else include_object


def check_watch_acceptable(strategy: KindStrategy, accept: str, include_object: str = "") -> None:
    """Refuse what a watch cannot answer before it starts: a Table's bad includeObject (400), a
    media type without a stream framing (406, upstream's NegotiateOutputMediaTypeStream; YAML
    has none), or a list conversion (406: each event carries one object)."""
    wanted = conversion(accept)
    if wanted is not None:
        _include_object(wanted, include_object)
    if negotiate(accept).media_type not in STREAM_MEDIA_TYPES:
        raise _not_acceptable([f"{media_type};stream=watch" for media_type in STREAM_MEDIA_TYPES])
    if wanted is not None and (refused := tables.not_acceptable_for_object(strategy, wanted)) is not None:
        raise refused


def event_line(kind: str, item: StoredObject | Obj) -> bytes:
    """One watch event on the wire: a JSON object and a newline."""
    if isinstance(item, StoredObject):
        return b"".join(event_line_parts(kind, item))
    return b'{"type":"' + kind.encode() + b'","object":' + orjson.dumps(item) + b"}\n"


def watch_response(strategy: KindStrategy, events: AsyncIterator[list[tuple[str, StoredObject | Obj]]], accept: str, include_object: str) -> Response:
    """A watch stream: the events ready at each wake-up are written together, in pieces of about
    STREAM_CHUNK_BYTES (an initial state of many objects is never one buffer)."""
    wanted = conversion(accept)
    as_table = wanted is not None and wanted.kind == tables.TABLE
    if wanted is not None:
        include_object = _include_object(wanted, include_object)
    in_protobuf = _wants_protobuf(accept)
    # JSON lines, or protobuf's length-prefixed WatchEvent frames.
    encode = protobuf.watch_frame if in_protobuf else event_line

    async def stream() -> AsyncIterator[bytes]:
        metrics.WATCHERS.inc()
        try:
            async for batch in events:
                pieces = _Pieces()
                for kind, item in batch:
                    if as_table and kind == "BOOKMARK":
                        piece = pieces.add(event_line(kind, tables.table_bookmark(item["metadata"]["resourceVersion"])))  # type: ignore[index]
                    elif wanted is not None:
                        piece = pieces.add(encode(kind, tables.convert_object(strategy, _plain(item), wanted, include_object)))
                    elif in_protobuf:
                        piece = pieces.add(encode(kind, item))
                    elif isinstance(item, StoredObject):
                        piece = pieces.add(*event_line_parts(kind, item))
                    else:
                        piece = pieces.add(event_line(kind, item))
                    if piece is not None:
                        yield piece
                if pieces.parts:
                    yield pieces.take()
                batch = []  # not held while the watch waits for the next events
        finally:
            metrics.WATCHERS.dec()
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()

    media_type = protobuf.WATCH_CONTENT_TYPE if in_protobuf else JSON
    return ChunkedResponse(stream(), headers={"Cache-Control": "no-cache, private"}, media_type=media_type)


def expired_watch_response(exc: Exception, accept: str = "") -> Response:
    """A watch from a compacted revision: one ERROR event (410 Gone) on a 200 stream."""
    error = errors.gone(str(exc)).status()
    if _wants_protobuf(accept):
        return StreamingResponse(_aiter([protobuf.watch_frame("ERROR", error)]), media_type=protobuf.WATCH_CONTENT_TYPE)
    return StreamingResponse(_aiter([orjson.dumps({"type": "ERROR", "object": error}) + b"\n"]), media_type=JSON)
