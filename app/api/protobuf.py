"""The API's protobuf answers and request bodies (``application/vnd.kubernetes.protobuf``), on top
of the codec in ``app.protobuf``: objects, lists, Status errors and watch frames, as upstream's
apiserver writes them, and request bodies refused with upstream's decode errors.

A stored version is encoded once, in its envelope, and kept among the recently encoded ones
(``ENCODED``): a watch fans the same version out to every watcher, and a LIST after a watch's
events finds most items encoded already; neither decodes the stored JSON again for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app import protobuf
from app.api.bodies import LEGACY_SCHEME, MAX_DEPTH, check_depth, note_typed_body, summarize_data
from app.protobuf import CONTENT_TYPE, WATCH_CONTENT_TYPE, EncodeError, Message, ProtobufError
from app.registry.base import KindStrategy, Obj
from app.storage.cache import RecentVersions, StoredObject
from kube import errors
from kube.errors import ApiError

__all__ = ["CONTENT_TYPE", "WATCH_CONTENT_TYPE", "decode_body"]


class Encoded:
    """A version in its envelope, and (made when a list first wants it) a view of the envelope's
    raw field (tag 2, length, message): byte for byte the version's entry in a list's ``items``."""

    __slots__ = ("enveloped", "prefix_size", "view")

    def __init__(self, enveloped: bytes, prefix_size: int) -> None:
        self.enveloped = enveloped
        self.prefix_size = prefix_size
        self.view: memoryview | None = None

    def list_entry(self) -> memoryview:
        view = self.view
        if view is None:
            view = self.view = memoryview(self.enveloped)[self.prefix_size : len(self.enveloped) - len(protobuf.ENVELOPE_TAIL)]
        return view


# Recent versions encoded. An object's answer and its watch events are the envelope as it is, a
# list's items the views. Protobuf clients
# (kube-scheduler, kube-controller-manager) list and watch whole resources: 16,384 versions of
# ordinary objects (up to 64 MiB of their JSON; the protobuf is about 0.6 of it) keep a cluster's
# pods, claims and nodes of that size encoded once, where 4,096 had a relist and GETs of older
# objects encode them again each time.
ENCODED: RecentVersions[Encoded] = RecentVersions(max_items=16384, max_bytes=64 * 1024 * 1024)


def decode_body(raw: bytes, api_version: str, kind: str) -> Obj:
    """A protobuf request body for an endpoint of ``api_version`` and ``kind`` (the defaults of an
    envelope without its type), as JSON; 400 with upstream's transformDecodeError text when it
    cannot be read, or when raw JSON inside nests deeper than a JSON body may."""
    try:
        named_version, named_kind, message_bytes = protobuf.open_envelope(raw)
    except ProtobufError as exc:
        raise errors.bad_request(f"the object provided is unrecognized (must be of type {kind}): {exc} ({summarize_data(raw)})") from None
    api_version = named_version or api_version
    named_kind = named_kind or kind
    message = _BODY_MESSAGES.get((api_version, named_kind))
    if message is None:
        message = protobuf.schema().message_for(api_version, named_kind)
        if message is None:
            raise errors.bad_request(
                f'{named_kind} in version "{_version(api_version)}" cannot be handled as a {kind}: no kind "{named_kind}" is registered for version "{api_version}" in scheme "{LEGACY_SCHEME}"'
            )
        _BODY_MESSAGES[(api_version, named_kind)] = message
    try:
        value, typed, shallow = protobuf.decode_checked(message_bytes, message, MAX_DEPTH, {"apiVersion": api_version, "kind": named_kind})
    except ProtobufError as exc:
        raise errors.bad_request(f'{named_kind} in version "{_version(api_version)}" cannot be handled as a {kind}: {exc}') from None
    if not shallow:
        check_depth(value)  # raw JSON inside may nest deeper than a JSON body may
    if typed:
        note_typed_body()  # nothing in it can fail to decode as JSON into the Go type
    return value


# The message of each type of body read (only types the schema has: as many as it has).
_BODY_MESSAGES: dict[tuple[str, str], Message] = {}


def _version(api_version: str) -> str:
    return api_version.rsplit("/", 1)[-1]


def _message(api_version: str, kind: str) -> Message:
    message = protobuf.schema().message_for(api_version, kind)
    if message is None and api_version.startswith("meta.k8s.io/"):
        message = protobuf.schema().message_for("meta.k8s.io/v1", kind)  # v1beta1's are v1's
    if message is None:
        raise errors.internal_error(f"no protobuf message for {api_version}/{kind}")
    return message


# The message and envelope prefix of each type answered in protobuf, found with one lookup.
_TYPES: dict[tuple[str, str], tuple[Message, bytes]] = {}


def _message_and_prefix(api_version: str, kind: str) -> tuple[Message, bytes]:
    key = (api_version, kind)
    found = _TYPES.get(key)
    if found is None:
        found = _TYPES[key] = (_message(api_version, kind), protobuf.envelope_prefix(api_version, kind))
    return found


def _encode(message: Message, obj: Obj, prefix: bytes | None = None) -> bytes:
    """``obj`` as ``message``; in its envelope when given the envelope's ``prefix``."""
    try:
        return protobuf.encode(obj, message) if prefix is None else protobuf.encode_in_envelope(obj, message, prefix)
    except EncodeError as exc:
        # Only an object this server stored could get here: it stored something upstream could not.
        raise errors.internal_error(f"object cannot be written as protobuf: {exc}") from None


def _encoded(item: StoredObject) -> Encoded:
    """A stored version in its envelope, made once (the object decoded, typed by its own
    apiVersion and kind, encoded) and kept for the next reader."""
    found = ENCODED.get(item)
    if found is None:
        obj = item.obj
        api_version, kind = obj.get("apiVersion") or "", obj.get("kind") or ""
        message, prefix = _message_and_prefix(api_version, kind)
        enveloped = _encode(message, obj, prefix)
        found = Encoded(enveloped, len(prefix))
        ENCODED.put(item, found)
    return found


def object_bytes(item: StoredObject | Obj) -> bytes:
    """One enveloped object, typed by its own apiVersion and kind."""
    if isinstance(item, StoredObject):
        return _encoded(item).enveloped
    api_version, kind = item.get("apiVersion") or "", item.get("kind") or ""
    message, prefix = _message_and_prefix(api_version, kind)
    return _encode(message, item, prefix)


def status_bytes(exc: ApiError) -> bytes:
    return object_bytes(exc.status())


def list_pieces(strategy: KindStrategy, items: Sequence[StoredObject | Obj], meta: Obj, piece_bytes: int) -> list[bytes]:
    """A ``<Kind>List`` in its envelope, in pieces of about ``piece_bytes``, each ending at the
    first item that takes it to ``piece_bytes`` or more (the items are encoded first: the
    envelope's length comes before them)."""
    list_message = _message(strategy.api_version, strategy.list_kind)
    by_name = {f.json: f for f in list_message.fields}
    meta_field = by_name["metadata"]
    assert meta_field.message is not None and by_name["items"].tag == b"\x12"  # as the envelope's raw field
    meta_bytes = protobuf.encode(meta, meta_field.message)
    item_message = _message(strategy.api_version, strategy.kind)
    head = meta_field.tag + protobuf.varint(len(meta_bytes)) + meta_bytes
    # Each item is its kept envelope's raw field, as a view. Lists are long: little work per item
    # (the class a local, not looked up among the module's globals each time).
    peek = ENCODED.peek
    stored_type = StoredObject
    entries: list[Any] = []
    ends: list[int] = []  # where each piece after the first starts, in entries
    size = filled = len(head)
    for item in items:
        if type(item) is stored_type:
            found = peek(item)  # type: ignore[arg-type]
            if found is None:
                found = _encoded(item)  # type: ignore[arg-type]
            entry: Any = found.view
            if entry is None:
                entry = found.list_entry()
        else:
            message = _encode(item_message, item)  # type: ignore[arg-type]
            entry = b"\x12" + protobuf.varint(len(message)) + message
        entries.append(entry)
        length: int = len(entry)
        size += length
        filled += length
        if filled >= piece_bytes:
            ends.append(len(entries))
            filled = 0
    opening = protobuf.envelope_head(strategy.api_version, strategy.list_kind, size)
    if not ends or (len(ends) == 1 and ends[0] == len(entries)):
        return [b"".join((opening, head, *entries, protobuf.ENVELOPE_TAIL))]
    if ends[-1] != len(entries):
        ends.append(len(entries))
    pieces = []
    first = 0
    for last in ends:
        parts = entries[first:last]
        if first == 0:
            parts[:0] = (opening, head)
        if last == len(entries):
            parts.append(protobuf.ENVELOPE_TAIL)
        pieces.append(b"".join(parts))
        first = last
    return pieces


def watch_frame(event_type: str, item: StoredObject | Obj) -> bytes:
    """One framed watch event."""
    return protobuf.watch_event(event_type, object_bytes(item))
