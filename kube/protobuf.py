"""Kubernetes' protobuf wire format, for every kind k8s.io/api v0.37.2 defines: the objects this
project keeps as JSON, read from and written to protobuf the way upstream's Go types are.

The messages come from ``protobuf_schema.json`` beside this file, which ``interop/protocheck
schema`` writes by reading the Go types' struct tags (field numbers, wire types, JSON names, which
fields are pointers, which JSON fields are omitted when empty). The interface definitions are the
facts; the codec here is this project's own.

The mapping is Go's, both ways:

- reading (``decode``) is what upstream does with a protobuf body, seen as JSON: decode into the
  Go struct (absent fields are zero values), then ``encoding/json`` of that struct (``omitempty``
  fields left out when empty), except that what Go would write as ``null`` (a nil pointer, slice
  or map, a zero time) is left out: for upstream both mean the same unset field;
- writing (``encode``) is what upstream does with a JSON object: ``encoding/json`` into the struct
  (``null`` and absent fields are zero values, unknown keys dropped), then the generated
  marshaller (every non-pointer field written, even empty; pointers only when set; map entries
  sorted by key; quantities in their canonical form).

So the bytes this module writes are the bytes upstream writes for the same object, which
``tests/interop`` checks against Go.
"""

from __future__ import annotations

import base64
import calendar
import functools
import re
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from kube.objects import Obj
from kube.quantity import Quantity, QuantityError

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
WATCH_CONTENT_TYPE = CONTENT_TYPE + ";stream=watch"
MAGIC = b"k8s\x00"
SCHEMA_PATH = Path(__file__).with_name("protobuf_schema.json")

# Wire types.
VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5

# A message nested deeper than this is refused: no served kind comes near it (the schema has no
# recursive message), so only hostile input would.
MAX_DEPTH = 100

# Schema field labels.
SCALAR, MESSAGE, LIST, MAP = "scalar", "message", "list", "map"

# Element types whose wire form is VARINT; the rest are length-delimited.
_VARINT_TYPES = frozenset({"bool", "int32", "int64", "uint32", "uint64"})
# Element types that are messages on the wire (the special ones are messages too).
_SPECIAL_TYPES = frozenset({"time", "microtime", "duration", "quantity", "intorstring", "rawextension", "fieldsv1"})
_KNOWN_TYPES = _VARINT_TYPES | _SPECIAL_TYPES | {"string", "bytes", "message"}


class ProtobufError(ValueError):
    """Bytes that are not the message they claim to be; the text is Go's for the same fault."""


class EncodeError(ValueError):
    """An object that upstream's JSON decoder would refuse for the kind's Go type."""


# ---- the schema ------------------------------------------------------------------------------


class Field:
    """One field of a message (see ``interop/protocheck/schema.go`` for the meaning of each)."""

    __slots__ = (
        "elem_wire",
        "go",
        "go_elem",
        "go_item",
        "inline",
        "json",
        "key",
        "key_tag",
        "label",
        "message",
        "message_name",
        "name",
        "number",
        "omitempty",
        "omitzero",
        "packed",
        "pointer",
        "tag",
        "type",
        "value_tag",
        "wrapped",
    )

    def __init__(self, spec: dict[str, Any], owner: str) -> None:
        self.number: int = spec["n"]
        self.json: str = spec["json"]
        self.label: str = spec["label"]
        self.type: str = spec["type"]
        if self.type not in _KNOWN_TYPES:
            raise ValueError(f"{owner}: field {self.number} has an unknown type {self.type!r}")
        self.message_name: str = spec.get("message", "")
        self.message: Message | None = None  # resolved once every message is read
        self.key: str = spec.get("key", "")
        self.pointer: bool = spec.get("pointer", False)
        self.omitempty: bool = spec.get("omitempty", False)
        self.omitzero: bool = spec.get("omitzero", False)
        self.inline: bool = spec.get("inline", False)
        self.wrapped: bool = spec.get("wrapped", False)
        self.packed: bool = spec.get("packed", False)
        # The Go types as encoding/json's errors name them: the field's, a list's or map's
        # element's, a wrapped element's items'.
        self.go: str = spec.get("go", "")
        self.go_elem: str = spec.get("goElem", "")
        self.go_item: str = spec.get("goItem", "")
        self.name = f"{owner.rsplit('.', 1)[-1]}.{self.json or self.message_name.rsplit('.', 1)[-1]}"
        self.elem_wire = VARINT if self.type in _VARINT_TYPES else LEN
        wire = LEN if self.label == MAP or self.packed else self.elem_wire
        self.tag = _varint_bytes(self.number << 3 | wire)
        self.key_tag = _varint_bytes(1 << 3 | (VARINT if self.key in _VARINT_TYPES else LEN))
        self.value_tag = _varint_bytes(2 << 3 | (LEN if self.wrapped else self.elem_wire))


class Message:
    __slots__ = ("by_number", "fields", "name")

    def __init__(self, name: str, fields: list[Field]) -> None:
        self.name = name
        self.fields = tuple(fields)
        self.by_number = {f.number: f for f in fields}


class Schema:
    """Every message, and the message of each ``apiVersion`` + ``kind``."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.messages = {name: Message(name, [Field(spec, name) for spec in specs or ()]) for name, specs in document["messages"].items()}
        for message in self.messages.values():
            for field in message.fields:
                if field.type == "message":
                    field.message = self.messages[field.message_name]
        self.kinds: dict[tuple[str, str], Message] = {}
        for key, name in document["kinds"].items():
            api_version, _, kind = key.rpartition("/")
            self.kinds[(api_version, kind)] = self.messages[name]
        # meta.k8s.io's options and the watch event are registered in every group version.
        self._meta = {kind: self.kinds[("meta.k8s.io/v1", kind)] for kind in ("DeleteOptions", "WatchEvent")}
        self._meta["Status"] = self.kinds[("v1", "Status")]

    def message_for(self, api_version: str, kind: str) -> Message | None:
        found = self.kinds.get((api_version, kind))
        if found is None:
            found = self._meta.get(kind)
        return found


@functools.cache
def schema() -> Schema:
    return Schema(orjson.loads(SCHEMA_PATH.read_bytes()))


# ---- varints ------------------------------------------------------------------------------------


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    _put_varint(out, value)
    return bytes(out)


def varint_size(value: int) -> int:
    return max(1, ((value & 0xFFFFFFFFFFFFFFFF).bit_length() + 6) // 7)


def put_varint(out: bytearray, value: int) -> None:
    """Append ``value`` as a varint (a negative one as ten bytes of two's complement)."""
    _put_varint(out, value)


def _put_varint(out: bytearray, value: int) -> None:
    value &= 0xFFFFFFFFFFFFFFFF  # negative numbers as two's complement, ten bytes
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _get_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if shift >= 64:
            raise ProtobufError("proto: integer overflow")
        if pos >= end:
            raise ProtobufError("unexpected EOF")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


# ---- reading -----------------------------------------------------------------------------------


def _fields(data: bytes, start: int, end: int, owner: str) -> list[tuple[int, int, int, int]]:
    """(number, wire type, value or start, end) of each field in ``data[start:end]``: a varint's
    value (end -1), or a length-delimited field's bounds. Fixed-width and unknown fields are
    skipped as Go's generated code skips them."""
    out: list[tuple[int, int, int, int]] = []
    pos = start
    while pos < end:
        key, pos = _get_varint(data, pos, end)
        number, wire = key >> 3, key & 7
        if wire == EGROUP:
            raise ProtobufError(f"proto: {owner}: wiretype end group for non-group")
        if number <= 0 or number > 0x7FFFFFFF:
            raise ProtobufError(f"proto: {owner}: illegal tag {_signed(number, 32)} (wire type {key})")
        if wire == VARINT:
            value, pos = _get_varint(data, pos, end)
            out.append((number, wire, value, -1))
        elif wire == LEN:
            length, pos = _get_varint(data, pos, end)
            if length > 0x7FFFFFFFFFFFFFFF:
                raise ProtobufError("proto: negative length found during unmarshaling")
            if pos + length > end:
                raise ProtobufError("unexpected EOF")
            out.append((number, wire, pos, pos + length))
            pos += length
        elif wire in (I64, I32):
            size = 8 if wire == I64 else 4
            if pos + size > end:
                raise ProtobufError("unexpected EOF")
            out.append((number, wire, int.from_bytes(data[pos : pos + size], "little"), -1))
            pos += size
        elif wire == SGROUP:
            pos = _skip_group(data, pos, end, number)
        else:
            raise ProtobufError(f"proto: illegal wireType {wire}")
    return out


def _skip_group(data: bytes, pos: int, end: int, number: int) -> int:
    """Past an unknown (deprecated) group, nested groups included, without recursion."""
    depth = 1
    while depth:
        key, pos = _get_varint(data, pos, end)
        wire = key & 7
        if wire == VARINT:
            _, pos = _get_varint(data, pos, end)
        elif wire == LEN:
            length, pos = _get_varint(data, pos, end)
            pos += length
        elif wire == I64:
            pos += 8
        elif wire == I32:
            pos += 4
        elif wire == SGROUP:
            depth += 1
        elif wire == EGROUP:
            depth -= 1
        else:
            raise ProtobufError(f"proto: illegal wireType {wire}")
        if pos > end:
            raise ProtobufError("unexpected EOF")
    return pos


def _text(data: bytes, start: int, end: int) -> str:
    # Go keeps invalid UTF-8 in a string; its JSON then writes U+FFFD for each bad byte.
    return data[start:end].decode("utf-8", "replace")


def _time_text(seconds: int, nanos: int, micro: bool) -> str:
    stamp = time.gmtime(seconds)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", stamp)
    if micro:
        text += f".{nanos // 1000:06d}"
    return text + "Z"


def _read_timestamp(data: bytes, start: int, end: int, micro: bool) -> str | None:
    seconds = nanos = 0
    for number, wire, value, _ in _fields(data, start, end, "Timestamp"):
        if number in (1, 2):
            if wire != VARINT:
                raise ProtobufError(f"proto: wrong wireType = {wire} for field {'Seconds' if number == 1 else 'Nanos'}")
            if number == 1:
                seconds = _signed(value, 64)
            else:
                nanos = _signed(value, 32)
    if not micro:
        nanos = 0  # upstream reads whole seconds only
    if seconds == _ZERO_TIME_SECONDS and nanos == 0:
        return None
    try:
        return _time_text(seconds, nanos, micro)
    except (OverflowError, OSError, ValueError):
        raise ProtobufError(f"proto: a timestamp of {seconds} seconds is out of range") from None


# Go's zero time.Time (year 1) in Unix seconds: the value a zero Time's protobuf would carry.
_ZERO_TIME_SECONDS = -62135596800


def _read_special(kind: str, data: bytes, start: int, end: int) -> Any:
    """The JSON value of a special type's message (its Go type's MarshalJSON)."""
    if kind == "time" or kind == "microtime":
        if start == end:
            return None
        return _read_timestamp(data, start, end, kind == "microtime")
    if kind == "quantity":
        text = ""
        for number, wire, value, stop in _fields(data, start, end, "Quantity"):
            if number == 1:
                if wire != LEN:
                    raise ProtobufError(f"proto: wrong wireType = {wire} for field String_")
                text = _text(data, value, stop)
        try:
            return Quantity.parse(text).canonical()
        except QuantityError as exc:
            raise ProtobufError(str(exc)) from None
    if kind == "intorstring":
        type_ = int_val = 0
        str_val = ""
        for number, wire, value, stop in _fields(data, start, end, "IntOrString"):
            if number in (1, 2):
                if wire != VARINT:
                    raise ProtobufError(f"proto: wrong wireType = {wire} for field {'Type' if number == 1 else 'IntVal'}")
                if number == 1:
                    type_ = _signed(value, 64)
                else:
                    int_val = _signed(value, 32)
            elif number == 3:
                if wire != LEN:
                    raise ProtobufError(f"proto: wrong wireType = {wire} for field StrVal")
                str_val = _text(data, value, stop)
        if type_ == 0:
            return int_val
        if type_ == 1:
            return str_val
        raise ProtobufError(f"impossible IntOrString.Type: {type_}")
    if kind == "duration":
        nanos = 0
        for number, wire, value, _ in _fields(data, start, end, "Duration"):
            if number == 1:
                if wire != VARINT:
                    raise ProtobufError(f"proto: wrong wireType = {wire} for field Duration")
                nanos = _signed(value, 64)
        return go_duration(nanos)
    # rawextension, fieldsv1: raw JSON bytes in field 1
    raw: bytes | None = None
    for number, wire, value, stop in _fields(data, start, end, "RawExtension" if kind == "rawextension" else "FieldsV1"):
        if number == 1:
            if wire != LEN:
                raise ProtobufError(f"proto: wrong wireType = {wire} for field Raw")
            raw = data[value:stop]
    if raw is None:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ProtobufError(f"json: error calling MarshalJSON for type {_GO_TYPES[kind]}: invalid character in raw JSON ({exc})") from None


_GO_TYPES = {"rawextension": "runtime.RawExtension", "fieldsv1": "*v1.FieldsV1"}


def _read_value(field: Field, data: bytes, wire: int, value: int, stop: int, depth: int) -> Any:
    """One element of ``field`` (a scalar, a message, a special type) as its JSON value."""
    kind = field.type
    if wire != field.elem_wire:
        raise ProtobufError(f"proto: wrong wireType = {wire} for field {field.name}")
    if kind == "string":
        return _text(data, value, stop)
    if kind == "message":
        assert field.message is not None
        return _read_message(field.message, data, value, stop, depth + 1)
    if kind in _SPECIAL_TYPES:
        return _read_special(kind, data, value, stop)
    if kind == "bytes":
        return base64.b64encode(data[value:stop]).decode()
    if kind == "bool":
        return value != 0
    if kind == "int32":
        return _signed(value, 32)
    if kind == "int64":
        return _signed(value, 64)
    if kind == "uint32":
        return value & 0xFFFFFFFF
    return value


def _zero(field: Field) -> Any:
    """The JSON of a non-pointer field that the message did not carry (Go's zero value)."""
    kind = field.type
    if kind == "message":
        assert field.message is not None
        return _read_message(field.message, b"", 0, 0, 0)
    return _ZEROS[kind]


_ZEROS: dict[str, Any] = {
    "string": "",
    "bool": False,
    "int32": 0,
    "int64": 0,
    "uint32": 0,
    "uint64": 0,
    "bytes": None,
    "time": None,
    "microtime": None,
    "duration": "0s",
    "quantity": "0",
    "intorstring": 0,
    "rawextension": None,
    "fieldsv1": None,
}


def _is_empty(field: Field, value: Any) -> bool:
    """encoding/json's omitempty test for the Go value behind ``value``."""
    if field.label in (LIST, MAP) or field.pointer:
        return value is None
    kind = field.type
    if kind == "message" or kind in ("time", "microtime", "quantity", "intorstring", "rawextension"):
        return False  # structs are never empty to encoding/json
    if kind == "bytes":
        return not value
    return not value  # "", 0, false


def fill_zero_fields(value: Obj, message: Message) -> None:
    """Complete ``value`` (the JSON of a ``message``, changed in place) as encoding/json writes its
    Go value: a non-pointer field it leaves out (or sets to null) gets its zero value unless
    ``omitempty`` drops that (a struct is never dropped: ``"status": {}``), and the structs it
    holds, directly or in lists and maps, are completed in turn. What Go would write as null stays
    out, as ``decode`` leaves it out; values are not canonicalised."""
    for field in message.fields:
        nested = field.message
        if field.inline:
            if nested is not None:
                fill_zero_fields(value, nested)
            continue
        present = value.get(field.json)
        if present is None:
            if field.label in (LIST, MAP) or field.pointer:
                continue
            zero = _zero(field)
            if zero is not None and not (field.omitempty and _is_empty(field, zero)):
                value[field.json] = zero
        elif nested is not None and not field.wrapped:
            if field.label == MESSAGE:
                if isinstance(present, dict):
                    fill_zero_fields(present, nested)
            elif field.label == LIST:
                items = present if isinstance(present, list) else ()
                for item in items:
                    if isinstance(item, dict):
                        fill_zero_fields(item, nested)
            elif isinstance(present, dict):
                for item in present.values():
                    if isinstance(item, dict):
                        fill_zero_fields(item, nested)


def _read_message(message: Message, data: bytes, start: int, end: int, depth: int) -> Obj:
    if depth > MAX_DEPTH:
        raise ProtobufError(f"proto: {message.name.rsplit('.', 1)[-1]}: message nested deeper than {MAX_DEPTH}")
    values: dict[int, Any] = {}
    chunks: dict[int, list[tuple[int, int]]] = {}  # a message field seen more than once merges
    owner = message.name.rsplit(".", 1)[-1]
    for number, wire, value, stop in _fields(data, start, end, owner):
        field = message.by_number.get(number)
        if field is None:
            continue  # unknown fields are dropped, as Go's generated code does
        label = field.label
        if label == LIST:
            items = values.setdefault(number, [])
            if wire == LEN and field.elem_wire == VARINT:  # packed
                pos = value
                while pos < stop:
                    element, pos = _get_varint(data, pos, stop)
                    items.append(_read_value(field, data, VARINT, element, -1, depth))
            elif field.wrapped:
                items.append(_read_wrapped(field, data, wire, value, stop, depth))
            else:
                items.append(_read_value(field, data, wire, value, stop, depth))
        elif label == MAP:
            if wire != LEN:
                raise ProtobufError(f"proto: wrong wireType = {wire} for field {field.name}")
            key, entry = _read_entry(field, data, value, stop, depth)
            values.setdefault(number, {})[key] = entry
        elif field.type == "message" or field.type in _SPECIAL_TYPES:
            if wire != LEN:
                raise ProtobufError(f"proto: wrong wireType = {wire} for field {field.name}")
            chunks.setdefault(number, []).append((value, stop))
        else:
            values[number] = _read_value(field, data, wire, value, stop, depth)
    for number, parts in chunks.items():
        field = message.by_number[number]
        if len(parts) == 1:
            first, last = parts[0]
            values[number] = _read_value(field, data, LEN, first, last, depth)
        else:
            joined = b"".join(data[a:b] for a, b in parts)
            values[number] = _read_value(field, joined, LEN, 0, len(joined), depth)
    out: Obj = {}
    for field in message.fields:
        got: Any
        if field.number in values:
            got = values[field.number]
        elif field.label in (LIST, MAP) or field.pointer:
            got = None
        else:
            got = _zero(field)
        if field.inline:
            out.update(got)
            continue
        if got is None:
            continue  # Go writes null (a nil pointer, slice or map, a zero time): the same as absent
        if field.omitempty and _is_empty(field, got):
            continue
        out[field.json] = got
    return out


def _read_wrapped(field: Field, data: bytes, wire: int, start: int, stop: int, depth: int) -> list[Any]:
    """A named list type's message: its items in field 1."""
    if wire != LEN:
        raise ProtobufError(f"proto: wrong wireType = {wire} for field {field.name}")
    items = []
    for number, item_wire, value, end in _fields(data, start, stop, field.name):
        if number == 1:
            items.append(_read_value(field, data, item_wire, value, end, depth))
    return items


def _read_entry(field: Field, data: bytes, start: int, stop: int, depth: int) -> tuple[str, Any]:
    key: Any = _ZEROS.get(field.key, "")
    item: Any = None
    seen = False
    for number, wire, value, end in _fields(data, start, stop, field.name):
        if number == 1:
            if field.key == "string":
                if wire != LEN:
                    raise ProtobufError(f"proto: wrong wireType = {wire} for field {field.name}")
                key = _text(data, value, end)
            else:
                key = _signed(value, 64)
        elif number == 2:
            seen = True
            item = _read_wrapped(field, data, wire, value, end, depth) if field.wrapped else _read_value(field, data, wire, value, end, depth)
    if not seen and not field.wrapped:
        item = _zero(field)
    return str(key), item


# ---- writing -----------------------------------------------------------------------------------


def _put_bytes(out: bytearray, tag: bytes, payload: bytes | bytearray) -> None:
    out += tag
    _put_varint(out, len(payload))
    out += payload


def _as_int(field: Field, value: Any, bits: int) -> int:
    if value is None:
        return 0
    if type(value) is int:
        number = value
    elif type(value) is float and value.is_integer():
        number = int(value)
    else:
        raise EncodeError(f"json: cannot unmarshal {go_json_type(value)} into Go struct field {field.name} of type int{bits}")
    if not -(1 << (bits - 1)) <= number < (1 << (bits - 1)):
        raise EncodeError(f"json: cannot unmarshal number {number} into Go struct field {field.name} of type int{bits}")
    return number


def go_json_type(value: Any) -> str:
    """How Go's encoding/json names a JSON value's kind in unmarshal errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _timestamp(text: Any, field: Field, micro: bool) -> bytes:
    """A Time's message from its JSON (RFC 3339), b"" for the zero time."""
    if text is None:
        return b""
    if not isinstance(text, str):
        raise EncodeError(f"json: cannot unmarshal {go_json_type(text)} into Go struct field {field.name} of type string")
    seconds, nanos = _parse_time(text)
    out = bytearray(b"\x08")
    _put_varint(out, seconds)
    out += b"\x10"
    _put_varint(out, (nanos // 1000 * 1000) if micro else 0)
    return bytes(out)


_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|[+-]\d\d:\d\d)")


@functools.lru_cache(maxsize=4096)  # objects carry the same few timestamps again and again
def _parse_time(text: str) -> tuple[int, int]:
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise EncodeError(f'parsing time "{text}" as "2006-01-02T15:04:05Z07:00": cannot parse')
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    try:
        datetime(year, month, day, hour, minute, second)
    except ValueError as exc:
        raise EncodeError(f'parsing time "{text}": {exc}') from None
    seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    zone = match.group(8)
    if zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    fraction = match.group(7) or ""
    nanos = int((fraction[1:] + "000000000")[:9]) if fraction else 0
    return seconds, nanos


def _special(kind: str, field: Field, value: Any) -> bytes:
    """A special type's message from its JSON value (its Go type's UnmarshalJSON, then Marshal)."""
    if kind == "time" or kind == "microtime":
        return _timestamp(value, field, kind == "microtime")
    if kind == "quantity":
        text = _canonical_quantity(field, value)
        out = bytearray()
        _put_bytes(out, b"\x0a", text.encode())
        return bytes(out)
    if kind == "intorstring":
        out = bytearray()
        if isinstance(value, str):
            out += b"\x08\x01\x10\x00"
            _put_bytes(out, b"\x1a", value.encode())
        else:
            out += b"\x08\x00\x10"
            _put_varint(out, _as_int(field, value, 32))
            out += b"\x1a\x00"
        return bytes(out)
    if kind == "duration":
        out = bytearray(b"\x08")
        _put_varint(out, parse_go_duration(value) if value is not None else 0)
        return bytes(out)
    # rawextension, fieldsv1
    if value is None:
        return b""
    out = bytearray()
    _put_bytes(out, b"\x0a", orjson.dumps(value))
    return bytes(out)


@functools.lru_cache(maxsize=4096)
def _canonical_text(text: str) -> str:
    return Quantity.parse(text).canonical()


def _canonical_quantity(field: Field, value: Any) -> str:
    if value is None:
        return "0"
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise EncodeError(f"json: cannot unmarshal {go_json_type(value)} into Go struct field {field.name} of type resource.Quantity")
    try:
        return _canonical_text(value if isinstance(value, str) else orjson.dumps(value).decode())
    except QuantityError as exc:
        raise EncodeError(str(exc)) from None


def _put_value(out: bytearray, tag: bytes, field: Field, value: Any, depth: int) -> None:
    """One element of ``field`` with its tag (scalars written even when zero)."""
    kind = field.type
    if kind == "string":
        if value is None:
            value = ""
        elif not isinstance(value, str):
            raise EncodeError(f"json: cannot unmarshal {go_json_type(value)} into Go struct field {field.name} of type string")
        _put_bytes(out, tag, value.encode())
    elif kind == "message":
        assert field.message is not None
        if value is None:
            value = {}
        elif not isinstance(value, dict):
            raise EncodeError(f"json: cannot unmarshal {go_json_type(value)} into Go struct field {field.name} of type {field.message_name.rsplit('/', 1)[-1]}")
        _put_bytes(out, tag, _write_message(field.message, value, depth + 1))
    elif kind in _SPECIAL_TYPES:
        _put_bytes(out, tag, _special(kind, field, value))
    elif kind == "bool":
        if value is not None and not isinstance(value, bool):
            raise EncodeError(f"json: cannot unmarshal {go_json_type(value)} into Go struct field {field.name} of type bool")
        out += tag
        out.append(1 if value else 0)
    elif kind == "bytes":
        if value is None:
            raw = b""
        elif isinstance(value, str):
            try:
                raw = base64.b64decode(value, validate=True)
            except ValueError as exc:
                raise EncodeError(f"illegal base64 data: {exc}") from None
        else:
            raise EncodeError(f"json: cannot unmarshal {go_json_type(value)} into Go struct field {field.name} of type []uint8")
        _put_bytes(out, tag, raw)
    else:
        out += tag
        _put_varint(out, _as_int(field, value, 32 if kind in ("int32", "uint32") else 64))


def _write_message(message: Message, obj: Obj, depth: int = 0) -> bytearray:
    if depth > MAX_DEPTH:
        raise EncodeError(f"{message.name}: nested deeper than {MAX_DEPTH}")
    out = bytearray()
    for field in message.fields:
        if field.inline:
            assert field.message is not None
            _put_bytes(out, field.tag, _write_message(field.message, obj, depth + 1))
            continue
        value = obj.get(field.json)
        label = field.label
        if label == LIST:
            if value is None:
                continue
            if not isinstance(value, list):
                raise EncodeError(f"json: cannot unmarshal {go_json_type(value)} into Go struct field {field.name} of type []")
            if field.packed:
                packed = bytearray()
                for item in value:
                    _put_varint(packed, _as_int(field, item, 64))
                _put_bytes(out, field.tag, packed)
            elif field.wrapped:
                for item in value:
                    _put_bytes(out, field.tag, _wrapped(field, item, depth))
            else:
                for item in value:
                    _put_value(out, field.tag, field, item, depth)
        elif label == MAP:
            if value is None:
                continue
            if not isinstance(value, dict):
                raise EncodeError(f"json: cannot unmarshal {go_json_type(value)} into Go struct field {field.name} of type map")
            for key in sorted(value):
                entry = bytearray()
                _put_bytes(entry, field.key_tag, key.encode())
                item = value[key]
                if field.wrapped:
                    _put_bytes(entry, field.value_tag, _wrapped(field, item, depth))
                elif field.type == "bytes" and item is None:
                    pass  # a nil []byte value is left out, as Go's marshaller does
                else:
                    _put_value(entry, field.value_tag, field, item, depth)
                _put_bytes(out, field.tag, entry)
        elif field.pointer and value is None:
            continue
        else:
            _put_value(out, field.tag, field, value, depth)
    return out


def _wrapped(field: Field, items: Any, depth: int) -> bytearray:
    out = bytearray()
    if items is None:
        return out
    if not isinstance(items, list):
        raise EncodeError(f"json: cannot unmarshal {go_json_type(items)} into Go struct field {field.name} of type []string")
    for item in items:
        _put_value(out, b"\x0a", field, item, depth)
    return out


# ---- durations ---------------------------------------------------------------------------------

_DURATION_UNITS = (("h", 3600 * 10**9), ("m", 60 * 10**9), ("s", 10**9), ("ms", 10**6), ("us", 10**3), ("µs", 10**3), ("μs", 10**3), ("ns", 1))
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: Any) -> int:
    """Nanoseconds of a Go duration string (``1h30m``, ``-2.5s``)."""
    if not isinstance(text, str):
        raise EncodeError(f"json: cannot unmarshal {go_json_type(text)} into Go value of type string")
    body = text.lstrip("+-")
    negative = text.startswith("-")
    if body == "0":
        return 0
    units = dict(_DURATION_UNITS)
    total = 0.0
    pos = 0
    if not body:
        raise EncodeError(f'time: invalid duration "{text}"')
    while pos < len(body):
        match = _DURATION_PART.match(body, pos)
        if match is None or match.group(1) in ("", "."):
            raise EncodeError(f'time: invalid duration "{text}"')
        total += float(match.group(1)) * units[match.group(2)]
        pos = match.end()
    return -int(total) if negative else int(total)


def go_duration(nanos: int) -> str:
    """Go's time.Duration.String."""
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    value = abs(nanos)
    if value < 10**9:
        for unit, size in (("ms", 10**6), ("µs", 10**3), ("ns", 1)):
            if value >= size:
                return sign + _fraction(value, size) + unit
    hours, rest = divmod(value, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    seconds = _fraction(rest, 10**9) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}"
    if minutes:
        return f"{sign}{minutes}m{seconds}"
    return sign + seconds


def _fraction(value: int, size: int) -> str:
    whole, rest = divmod(value, size)
    if not rest:
        return str(whole)
    digits = len(str(size)) - 1
    return f"{whole}.{str(rest).rjust(digits, '0').rstrip('0')}"


# ---- the envelope ------------------------------------------------------------------------------


# What follows the message in an envelope: contentEncoding and contentType, both empty.
ENVELOPE_TAIL = b"\x1a\x00\x22\x00"


def envelope_head(api_version: str, kind: str, size: int) -> bytes:
    """``k8s\\0`` and a runtime.Unknown up to its message of ``size`` bytes."""
    type_meta = bytearray()
    _put_bytes(type_meta, b"\x0a", api_version.encode())
    _put_bytes(type_meta, b"\x12", kind.encode())
    out = bytearray(MAGIC)
    _put_bytes(out, b"\x0a", type_meta)
    out += b"\x12"
    _put_varint(out, size)
    return bytes(out)


def envelope(api_version: str, kind: str, raw: bytes | bytearray) -> bytes:
    """A message in its envelope, as upstream's serializer writes it."""
    return envelope_head(api_version, kind, len(raw)) + raw + ENVELOPE_TAIL


def open_envelope(body: bytes) -> tuple[str, str, bytes]:
    """(apiVersion, kind, raw message) of a ``k8s\\0`` body; Go's error texts for bad ones."""
    if not body:
        raise ProtobufError("empty data")
    if not body.startswith(MAGIC):
        raise ProtobufError(f"provided data does not appear to be a protobuf message, expected prefix {_go_bytes(MAGIC)}")
    if len(body) == len(MAGIC):
        raise ProtobufError("empty body")
    api_version = kind = ""
    raw = b""
    for number, wire, value, stop in _fields(body, len(MAGIC), len(body), "Unknown"):
        if number == 1:
            if wire != LEN:
                raise ProtobufError(f"proto: wrong wireType = {wire} for field TypeMeta")
            for sub, sub_wire, sub_value, sub_stop in _fields(body, value, stop, "TypeMeta"):
                if sub in (1, 2):
                    if sub_wire != LEN:
                        raise ProtobufError(f"proto: wrong wireType = {sub_wire} for field {'APIVersion' if sub == 1 else 'Kind'}")
                    if sub == 1:
                        api_version = _text(body, sub_value, sub_stop)
                    else:
                        kind = _text(body, sub_value, sub_stop)
        elif number in (2, 3, 4):
            if wire != LEN:
                raise ProtobufError(f"proto: wrong wireType = {wire} for field {('Raw', 'ContentEncoding', 'ContentType')[number - 2]}")
            if number == 2:
                raw = body[value:stop]
            elif number == 3 and stop > value:
                raise ProtobufError(f"unsupported content encoding {_text(body, value, stop)!r}")
    return api_version, kind, raw


def _go_bytes(data: bytes) -> str:
    return "[" + " ".join(str(b) for b in data) + "]"


# ---- the codec's entry points ------------------------------------------------------------------


def decode(raw: bytes, message: Message) -> Obj:
    """The JSON form of one message's bytes (no envelope), as upstream would hand it on."""
    return _read_message(message, raw, 0, len(raw), 0)


def encode(obj: Obj, message: Message) -> bytes:
    """One message's bytes (no envelope) from its JSON form."""
    return bytes(_write_message(message, obj))


def encode_object(obj: Obj) -> bytes:
    """An object with its apiVersion and kind, in its envelope."""
    api_version, kind = obj.get("apiVersion") or "", obj.get("kind") or ""
    message = schema().message_for(api_version, kind)
    if message is None:
        raise EncodeError(f"no protobuf message for {api_version}/{kind}")
    return envelope(api_version, kind, _write_message(message, obj))


def decode_object(body: bytes, default_api_version: str = "", default_kind: str = "") -> Obj:
    """An enveloped object as JSON, with the apiVersion and kind its envelope names (or the
    defaults, as upstream fills an envelope's missing type from the endpoint's)."""
    api_version, kind, raw = open_envelope(body)
    api_version = api_version or default_api_version
    kind = kind or default_kind
    if not kind:
        raise ProtobufError("Object 'Kind' is missing in protobuf body")
    message = schema().message_for(api_version, kind)
    if message is None:
        raise ProtobufError(f"no kind {kind!r} is registered for version {api_version!r}")
    return {"apiVersion": api_version, "kind": kind, **decode(raw, message)}


def same_in_go(a: Any, b: Any, message_name: str) -> bool:
    """Whether two JSON values of a message are one Go value: equal, or equal once each has gone
    through the Go type (``"key": ""`` and no key are the same omitempty string; ``"1000m"`` and
    ``"1"`` the same quantity). What upstream compares when a field is immutable."""
    if a == b:
        return True
    message = schema().messages.get(message_name)
    if message is None or not isinstance(a, dict) or not isinstance(b, dict):
        return False
    try:
        return decode(encode(a, message), message) == decode(encode(b, message), message)
    except ValueError:
        return False


def frame(message: bytes) -> bytes:
    """One frame of a protobuf stream: a four-byte big-endian length, then the bytes."""
    return len(message).to_bytes(4, "big") + message


def watch_event(event_type: str, object_envelope: bytes) -> bytes:
    """A framed metav1.WatchEvent whose object is an enveloped object's bytes."""
    out = bytearray()
    _put_bytes(out, b"\x0a", event_type.encode())
    raw = bytearray()
    _put_bytes(raw, b"\x0a", object_envelope)
    _put_bytes(out, b"\x12", raw)
    return frame(bytes(out))


def read_watch_events(stream: bytes) -> list[tuple[str, bytes]]:
    """(type, enveloped object) of each frame of a protobuf watch stream."""
    events = []
    pos = 0
    while pos < len(stream):
        if pos + 4 > len(stream):
            raise ProtobufError("unexpected EOF")
        size = int.from_bytes(stream[pos : pos + 4], "big")
        start, pos = pos + 4, pos + 4 + size
        if pos > len(stream):
            raise ProtobufError("unexpected EOF")
        event_type, envelope_bytes = "", b""
        for number, wire, value, stop in _fields(stream, start, pos, "WatchEvent"):
            if number == 1 and wire == LEN:
                event_type = _text(stream, value, stop)
            elif number == 2 and wire == LEN:
                for sub, sub_wire, sub_value, sub_stop in _fields(stream, value, stop, "RawExtension"):
                    if sub == 1 and sub_wire == LEN:
                        envelope_bytes = stream[sub_value:sub_stop]
        events.append((event_type, envelope_bytes))
    return events
