"""The small protobuf subset kubectl sends (``kubectl create namespace NAME``, and the reviews of
``kubectl auth whoami`` and ``kubectl auth can-i`` with or without ``--list``): each such kind
describes its message (``KindStrategy.protobuf``), which this module decodes.

A body is ``k8s\\x00`` followed by a ``runtime.Unknown`` envelope
``{1: TypeMeta{1: apiVersion, 2: kind}, 2: raw, 3: contentEncoding, 4: contentType}``
whose ``raw`` is the typed object. Only those kinds are understood; anything else,
or any field whose data this decoder would have to drop, raises ValueError so the
server answers 415 instead of storing a partial object.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from app.registry import KINDS
from app.registry.base import PROTOBUF_OBJECT_META, PROTOBUF_STRINGS, ProtobufMessage

Obj = dict[str, Any]

PROTOBUF_CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

_VARINT = 0
_I64 = 1
_LEN = 2
_I32 = 5


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 64:
            raise ValueError("varint too long")


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) for each field; LEN values are bytes, others ints."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("field number 0")
        if wire == _VARINT:
            value, pos = _varint(data, pos)
            yield number, wire, value
        elif wire == _LEN:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ValueError("truncated length-delimited field")
            yield number, wire, data[pos : pos + length]
            pos += length
        elif wire in (_I64, _I32):
            size = 8 if wire == _I64 else 4
            if pos + size > len(data):
                raise ValueError("truncated fixed-width field")
            yield number, wire, int.from_bytes(data[pos : pos + size], "little")
            pos += size
        else:
            raise ValueError(f"unsupported wire type {wire}")


def _text(wire: int, value: int | bytes) -> str:
    if wire != _LEN or not isinstance(value, bytes):
        raise ValueError("expected a string field")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError("string field is not UTF-8") from exc


def _message(wire: int, value: int | bytes) -> bytes:
    if wire != _LEN or not isinstance(value, bytes):
        raise ValueError("expected an embedded message")
    return value


def _map_entry(data: bytes) -> tuple[str, str]:
    key = value = ""
    for number, wire, raw in _fields(data):
        if number == 1:
            key = _text(wire, raw)
        elif number == 2:
            value = _text(wire, raw)
        else:
            raise ValueError(f"unexpected field {number} in a map entry")
    return key, value


def _require_empty(what: str, wire: int, value: int | bytes) -> None:
    """Fields this decoder does not represent are fine only when they carry nothing."""
    if value not in (0, b""):
        raise ValueError(f"cannot decode {what}")


# ObjectMeta fields the server sets itself (selfLink, generation, timestamps, grace period):
# their content is ignored, exactly as the server ignores them in a JSON create.
_SERVER_SET_META = frozenset({4, 7, 8, 9, 10})
_META_STRINGS = {1: "name", 2: "generateName", 3: "namespace", 5: "uid", 6: "resourceVersion"}


def _object_meta(data: bytes) -> Obj:
    meta: Obj = {}
    for number, wire, value in _fields(data):
        if number in _META_STRINGS:
            text = _text(wire, value)
            if text:
                meta[_META_STRINGS[number]] = text
        elif number in (11, 12):
            key, item = _map_entry(_message(wire, value))
            meta.setdefault("labels" if number == 11 else "annotations", {})[key] = item
        elif number == 14:
            meta.setdefault("finalizers", []).append(_text(wire, value))
        elif number in _SERVER_SET_META:
            continue
        else:
            _require_empty(f"metadata field {number}", wire, value)
    return meta


def _decode(data: bytes, message: ProtobufMessage, what: str) -> Obj:
    """A message the way its kind describes it (``ProtobufMessage``)."""
    out: Obj = {}
    for number, wire, value in _fields(data):
        if number in message.ignored:
            continue
        field = message.fields.get(number)
        if field is None:
            _require_empty(f"{what} field {number}", wire, value)
            continue
        name, kind = field
        if isinstance(kind, ProtobufMessage):
            out[name] = _decode(_message(wire, value), kind, name)
        elif kind == PROTOBUF_OBJECT_META:
            out[name] = _object_meta(_message(wire, value))
        elif kind == PROTOBUF_STRINGS:
            out.setdefault(name, []).append(_text(wire, value))
        else:
            text = _text(wire, value)
            if text:
                out[name] = text
    return out


def _messages() -> dict[tuple[str, str], ProtobufMessage]:
    """The kinds that describe their protobuf message, by apiVersion and kind."""
    global _MESSAGES
    if _MESSAGES is None:
        _MESSAGES = {(k.api_version, k.kind): k.protobuf for k in KINDS if k.protobuf is not None}
    return _MESSAGES


_MESSAGES: dict[tuple[str, str], ProtobufMessage] | None = None


def decode_k8s_protobuf(body: bytes) -> Obj:
    """The JSON-equivalent object of a Kubernetes protobuf request body; ValueError if unsupported."""
    if not body.startswith(MAGIC):
        raise ValueError("missing k8s protobuf magic prefix")
    api_version = kind = ""
    raw: bytes | None = None
    for number, wire, value in _fields(body[len(MAGIC) :]):
        if number == 1:
            for sub, sub_wire, sub_value in _fields(_message(wire, value)):
                if sub == 1:
                    api_version = _text(sub_wire, sub_value)
                elif sub == 2:
                    kind = _text(sub_wire, sub_value)
        elif number == 2:
            raw = _message(wire, value)
        elif number == 3:
            if _text(wire, value):
                raise ValueError("content encodings are not supported")
        elif number == 4:
            content_type = _text(wire, value)
            if content_type not in ("", PROTOBUF_CONTENT_TYPE):
                raise ValueError(f"unsupported embedded content type {content_type!r}")
    message = _messages().get((api_version, kind))
    if message is None:
        raise ValueError(f"protobuf decoding of {api_version or '?'}/{kind or '?'} is not supported")
    obj = _decode(raw or b"", message, kind)
    return {"apiVersion": api_version, "kind": kind, **obj}
