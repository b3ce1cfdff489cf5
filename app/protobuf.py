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
from typing import Any, Final

import orjson

from kube.objects import Obj
from kube.quantity import Quantity, QuantityError

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
WATCH_CONTENT_TYPE = CONTENT_TYPE + ";stream=watch"
MAGIC = b"k8s\x00"
SCHEMA_PATH = Path(__file__).with_name("protobuf_schema.json")

# Wire types.
# Final: mypyc (kube/compiled.py) compiles Final constants into the code instead of looking them up.
VARINT: Final = 0
I64: Final = 1
LEN: Final = 2
SGROUP: Final = 3
EGROUP: Final = 4
I32: Final = 5

# A message nested deeper than this is refused: no served kind comes near it (the schema has no
# recursive message), so only hostile input would.
MAX_DEPTH: Final = 100

# Schema field labels.
SCALAR, MESSAGE, LIST, MAP = "scalar", "message", "list", "map"

# Element types whose wire form is VARINT; the rest are length-delimited.
_VARINT_TYPES = frozenset({"bool", "int32", "int64", "uint32", "uint64"})
# Element types that are messages on the wire (the special ones are messages too).
_SPECIAL_TYPES = frozenset({"time", "microtime", "duration", "quantity", "intorstring", "rawextension", "fieldsv1"})
_KNOWN_TYPES = _VARINT_TYPES | _SPECIAL_TYPES | {"string", "bytes", "message"}

# Each element type as a small int, so that the hot loops compare ints rather than strings. The
# message and the special types (all messages on the wire) are the contiguous range
# _MESSAGE.._FIELDSV1.
_STRING: Final = 1
_MESSAGE: Final = 2
_TIME: Final = 3
_MICROTIME: Final = 4
_DURATION: Final = 5
_QUANTITY: Final = 6
_INTORSTRING: Final = 7
_RAWEXTENSION: Final = 8
_FIELDSV1: Final = 9
_BYTES: Final = 10
_BOOL: Final = 11
_INT32: Final = 12
_INT64: Final = 13
_UINT32: Final = 14
_UINT64: Final = 15
_CODES = {
    "string": _STRING, "message": _MESSAGE, "time": _TIME, "microtime": _MICROTIME, "duration": _DURATION,
    "quantity": _QUANTITY, "intorstring": _INTORSTRING, "rawextension": _RAWEXTENSION, "fieldsv1": _FIELDSV1,
    "bytes": _BYTES, "bool": _BOOL, "int32": _INT32, "int64": _INT64, "uint32": _UINT32, "uint64": _UINT64,
}  # fmt: skip
# Go types encoding/json's omitempty never finds empty (structs).
_NEVER_EMPTY = frozenset({"message", "time", "microtime", "quantity", "intorstring", "rawextension"})

# What reading does with a field the message did not carry: leave it out, put a constant (an
# immutable zero), or put a fresh copy of the zero value of the field's message.
_SKIP: Final = 0
_CONST: Final = 1
_FRESH: Final = 2


class ProtobufError(ValueError):
    """Bytes that are not the message they claim to be; the text is Go's for the same fault."""


class EncodeError(ValueError):
    """An object that upstream's JSON decoder would refuse for the kind's Go type."""


# ---- the schema ------------------------------------------------------------------------------


class Field:
    """One field of a message (see ``interop/protocheck/schema.go`` for the meaning of each)."""

    __slots__ = (
        "absent",
        "code",
        "drop_empty",
        "elem_wire",
        "go",
        "go_elem",
        "go_item",
        "heads",
        "inline",
        "is_list",
        "is_map",
        "json",
        "key",
        "key_heads",
        "key_is_string",
        "known_texts",
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
        "value_heads",
        "wrapped",
        "zero_bytes",
        "zero_value",
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
        # Writing: the field's tag, a map entry's key's and value's, each with every one-byte varint.
        self.heads: list[bytes] = _heads(self.tag)
        self.key_heads: list[bytes] = _heads(_varint_bytes(1 << 3 | (VARINT if self.key in _VARINT_TYPES else LEN)))
        self.value_heads: list[bytes] = _heads(_varint_bytes(2 << 3 | (LEN if self.wrapped else self.elem_wire)))
        self.code: int = _CODES[self.type]
        # A string field's bytes (tag, length, text) for each short text written so far, while it
        # has had few distinct ones: enumerations and the names objects share (a namespace, a
        # manager, an image). One with more is free text (names, uids) and is no longer kept.
        self.known_texts: dict[str, bytes] | None = {} if self.code == _STRING else None
        self.is_list: bool = self.label == LIST
        self.is_map: bool = self.label == MAP
        self.key_is_string: bool = self.key == "string"
        # encoding/json's omitempty test, for a value that is not null (lists, maps and pointers
        # are empty only when null; structs never are).
        self.drop_empty: bool = self.omitempty and not (self.is_list or self.is_map or self.pointer) and self.type not in _NEVER_EMPTY
        # Reading, when the message did not carry the field: Go's zero value as JSON.
        self.zero_value: Any = None
        if self.is_list or self.is_map or self.pointer:
            self.absent: int = _SKIP
        elif self.type == "message":
            self.absent = _FRESH
        else:
            self.zero_value = _ZEROS[self.type]
            self.absent = _SKIP if self.zero_value is None or (self.drop_empty and not self.zero_value) else _CONST
        # Writing, when the object has the field null or not at all: the bytes Go writes for its
        # zero value (made on first use; None for lists, maps and pointers, which are left out).
        self.zero_bytes: bytes | None = None


class Message:
    __slots__ = ("by_number", "fields", "name", "owner", "slots", "zero", "zero_flat")

    def __init__(self, name: str, fields: list[Field]) -> None:
        self.name = name
        self.owner = name.rsplit(".", 1)[-1]
        self.fields = tuple(fields)
        self.by_number = {f.number: f for f in fields}
        # Field number -> index in ``fields`` (-1: not a field of this message).
        slots = [-1] * (max(self.by_number, default=0) + 1)
        for index, f in enumerate(fields):
            slots[f.number] = index
        self.slots: list[int] = slots
        # The JSON of this message's zero value (read from no bytes), made on first use; copied
        # for each reader (shallow when it holds no dict or list).
        self.zero: Obj | None = None
        self.zero_flat = False


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
    if value < 0:
        value &= 0xFFFFFFFFFFFFFFFF  # negative numbers as two's complement, ten bytes
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


# The varints of 0..127, one byte each: most lengths and small numbers.
_SMALL_VARINTS: Final[list[bytes]] = [bytes([i]) for i in range(128)]


def varint(value: int) -> bytes:
    """``value`` as a varint (a negative one as ten bytes of two's complement)."""
    if 0 <= value < 128:
        return _SMALL_VARINTS[value]
    if 128 <= value < 16384:  # two bytes: the lengths of most nested messages, made once each
        found = _TWO_BYTE_VARINTS[value - 128]
        if found is None:
            found = _TWO_BYTE_VARINTS[value - 128] = _varint_bytes(value)
        return found
    return _varint_bytes(value)


# The two-byte varints written so far, by value - 128 (a list: indexed without hashing).
_TWO_BYTE_VARINTS: Final[list[bytes | None]] = [None] * (16384 - 128)


def _get_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos < end and data[pos] < 0x80:  # one byte: most values
        return data[pos], pos + 1
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
            # Only a tenth byte can take it past 64 bits (masking a small int would box it).
            return (result if shift < 63 else result & 0xFFFFFFFFFFFFFFFF), pos
        shift += 7


def _signed(value: int, bits: int) -> int:
    if 0 <= value < 0x40000000:  # positive in any width, and compared unboxed
        return value
    if bits == 64 and 0 <= value < 0x3FFFFFFFFFFFFFFF:  # a positive int64 such as a time's seconds, still unboxed
        return value
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


# ---- reading -----------------------------------------------------------------------------------


def _field_at(data: bytes, pos: int, end: int, owner: str) -> tuple[int, int, int, int, int]:
    """The field at ``pos`` of ``data[:end]``: (number, wire type, a varint's or fixed field's
    value or a length-delimited field's start, its end or -1, the next field's position). An
    unknown (deprecated) group is skipped and comes back as number 0. Errors are Go's."""
    if pos < end and data[pos] < 0x80:
        key = data[pos]
        pos += 1
    else:
        key, pos = _get_varint(data, pos, end)
    number = key >> 3
    wire = key & 7
    if wire == EGROUP:
        raise ProtobufError(f"proto: {owner}: wiretype end group for non-group")
    if number <= 0 or number > 0x7FFFFFFF:
        raise ProtobufError(f"proto: {owner}: illegal tag {_signed(number, 32)} (wire type {key})")
    if wire == LEN:
        if pos < end and data[pos] < 0x80:
            length = data[pos]
            pos += 1
        else:
            length, pos = _get_varint(data, pos, end)
            if length > 0x7FFFFFFFFFFFFFFF:
                raise ProtobufError("proto: negative length found during unmarshaling")
        stop = pos + length
        if stop > end:
            raise ProtobufError("unexpected EOF")
        return number, wire, pos, stop, stop
    if wire == VARINT:
        value, pos = _get_varint(data, pos, end)
        return number, wire, value, -1, pos
    if wire in (I64, I32):
        size = 8 if wire == I64 else 4
        if pos + size > end:
            raise ProtobufError("unexpected EOF")
        return number, wire, int.from_bytes(data[pos : pos + size], "little"), -1, pos + size
    if wire == SGROUP:
        return 0, wire, 0, -1, _skip_group(data, pos, end, number)
    raise ProtobufError(f"proto: illegal wireType {wire}")


def _fields(data: bytes, start: int, end: int, owner: str) -> list[tuple[int, int, int, int]]:
    """(number, wire type, value or start, end) of each field in ``data[start:end]``: a varint's
    value (end -1), or a length-delimited field's bounds. Fixed-width and unknown fields are
    skipped as Go's generated code skips them."""
    out: list[tuple[int, int, int, int]] = []
    pos = start
    while pos < end:
        number, wire, value, stop, pos = _field_at(data, pos, end, owner)
        if number:
            out.append((number, wire, value, stop))
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
    # Strict first: mypyc calls CPython's UTF-8 decoder directly for it.
    try:
        return data[start:end].decode("utf-8")
    except UnicodeDecodeError:
        return data[start:end].decode("utf-8", "replace")


# The text of recently read whole-second times: objects carry the same few again and again.
_TIME_TEXTS: Final[dict[int, str]] = {}
# The seconds of the years 1000 to 9999: the times whose text has the four-digit year of RFC 3339.
_FOUR_DIGIT_YEARS: Final = (-30610224000, 253402300800)
# How many times outside those years were read (see decode_checked).
_LONG_OR_SHORT_YEARS: Final[list[int]] = [0]
# The raw JSON (RawExtension, FieldsV1) the last decode read, for decode_checked's depth bound.
_RAW_JSON_READ: Final[list[bytes]] = []


def _time_text(seconds: int, nanos: int, micro: bool) -> str:
    if not _FOUR_DIGIT_YEARS[0] <= seconds < _FOUR_DIGIT_YEARS[1]:
        _LONG_OR_SHORT_YEARS[0] += 1
    elif not micro:
        found = _TIME_TEXTS.get(seconds)
        if found is not None:
            return found
    stamp = time.gmtime(seconds)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", stamp)
    if micro:
        return text + f".{nanos // 1000:06d}Z"
    text += "Z"
    if len(_TIME_TEXTS) >= 4096:
        _TIME_TEXTS.clear()
    _TIME_TEXTS[seconds] = text
    return text


def _read_timestamp(data: bytes, start: int, end: int, micro: bool) -> str | None:
    seconds = nanos = 0
    pos = start
    while pos < end:
        key = data[pos]
        if key == 0x08 or key == 0x10:  # seconds or nanos, as Go writes them (read as _field_at would)
            value, pos = _get_varint(data, pos + 1, end)
            if key == 0x08:
                seconds = _signed(value, 64)
            else:
                nanos = _signed(value, 32)
            continue
        number, wire, value, _, pos = _field_at(data, pos, end, "Timestamp")
        if number == 1 or number == 2:
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
_ZERO_TIME_SECONDS: Final = -62135596800


def _read_special(code: int, data: bytes, start: int, end: int) -> Any:
    """The JSON value of a special type's message (its Go type's MarshalJSON)."""
    if code in (_TIME, _MICROTIME):
        if start == end:
            return None
        return _read_timestamp(data, start, end, code == _MICROTIME)
    if code == _QUANTITY:
        text = ""
        for number, wire, value, stop in _fields(data, start, end, "Quantity"):
            if number == 1:
                if wire != LEN:
                    raise ProtobufError(f"proto: wrong wireType = {wire} for field String_")
                text = _text(data, value, stop)
        try:
            return _canonical_text(text)
        except QuantityError as exc:
            raise ProtobufError(str(exc)) from None
    if code == _INTORSTRING:
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
    if code == _DURATION:
        nanos = 0
        for number, wire, value, _ in _fields(data, start, end, "Duration"):
            if number == 1:
                if wire != VARINT:
                    raise ProtobufError(f"proto: wrong wireType = {wire} for field Duration")
                nanos = _signed(value, 64)
        return go_duration(nanos)
    # rawextension, fieldsv1: raw JSON bytes in field 1
    raw: bytes | None = None
    length, at = _get_varint(data, start + 1, end) if end - start >= 2 and data[start] == 0x0A else (-1, 0)
    if length >= 0 and at + length == end:
        raw = data[at:end]  # field 1 alone, as Go writes it
    else:
        for number, wire, value, stop in _fields(data, start, end, "RawExtension" if code == _RAWEXTENSION else "FieldsV1"):
            if number == 1:
                if wire != LEN:
                    raise ProtobufError(f"proto: wrong wireType = {wire} for field Raw")
                raw = data[value:stop]
    if raw is None:
        return None
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        go_type = "runtime.RawExtension" if code == _RAWEXTENSION else "*v1.FieldsV1"
        raise ProtobufError(f"json: error calling MarshalJSON for type {go_type}: invalid character in raw JSON ({exc})") from None
    _RAW_JSON_READ.append(raw)  # the only JSON whose nesting the schema does not bound
    return parsed


def _read_value(field: Field, data: bytes, wire: int, value: int, stop: int, depth: int) -> Any:
    """One element of ``field`` (a scalar, a message, a special type) as its JSON value."""
    if wire != field.elem_wire:
        raise ProtobufError(f"proto: wrong wireType = {wire} for field {field.name}")
    code = field.code
    if code == _STRING:
        return _text(data, value, stop)
    if code == _MESSAGE:
        message = field.message
        assert message is not None
        return _read_message(message, data, value, stop, depth + 1, {})
    if code <= _FIELDSV1:
        return _read_special(code, data, value, stop)
    if code == _BYTES:
        return base64.b64encode(data[value:stop]).decode()
    if code == _BOOL:
        return value != 0
    if code == _INT32:
        return _signed(value, 32)
    if code == _INT64:
        return _signed(value, 64)
    if code == _UINT32:
        return value & 0xFFFFFFFF
    return value


def _zero(field: Field) -> Any:
    """The JSON of a non-pointer field that the message did not carry (Go's zero value)."""
    if field.code == _MESSAGE:
        assert field.message is not None
        return _zero_message(field.message)
    return _ZEROS[field.type]


def _zero_message(message: Message) -> Obj:
    """A fresh copy of a message's zero value as JSON."""
    zero = message.zero
    if zero is None:
        zero = message.zero = _read_message(message, b"", 0, 0, 0, {})
        message.zero_flat = not any(isinstance(v, (dict, list)) for v in zero.values())
    if message.zero_flat:
        return dict(zero)
    return _copied(zero)  # type: ignore[no-any-return]


def _copied(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value


_ZEROS: Final[dict[str, Any]] = {
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

# A field the message has not carried (yet), as opposed to one read as null.
_ABSENT: Final[Any] = object()


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
            # Lists, maps and pointers stay out, as do zero values omitempty drops or Go writes as null.
            if field.absent != _SKIP:
                value[field.json] = _zero(field)
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


def _read_message(message: Message, data: bytes, start: int, end: int, depth: int, out: Obj) -> Obj:
    """A message as JSON (put in ``out``, which may hold keys to come first), as Go's generated
    Unmarshal reads it. Go writes fields in the order of their numbers, which is the schema's (and
    the JSON's): such a message is read straight into its JSON, each field put as it comes after
    the zero values of those it skipped. A message in another order, or with a field other than a
    list or map more than once, is read again by ``_read_any_order``."""
    if depth > MAX_DEPTH:
        raise ProtobufError(f"proto: {message.owner}: message nested deeper than {MAX_DEPTH}")
    fields = message.fields
    slots = message.slots
    top = len(slots)
    owner = message.owner
    first_keys = len(out)
    following = 0  # the fields before this one are in ``out`` (or left out)
    items: list[Any] = []  # the list and the map being read (the field before ``following``)
    entries: dict[str, Any] = {}
    pos = start
    while pos < end:
        # Most fields have a one-byte key and a one-byte value or a length of one or two bytes:
        # read here, without _field_at's tuple (which also reports any fault in them).
        key = data[pos]
        if key < 0x80 and key >= 8 and pos + 2 < end:
            wire = key & 7
            if wire == LEN:
                length = data[pos + 1]
                value = pos + 2
                if length >= 0x80:
                    if data[pos + 2] >= 0x80:
                        length = -1  # three bytes or more
                    else:
                        length = (length & 0x7F) | data[pos + 2] << 7
                        value = pos + 3
                stop = value + length
                if length < 0 or stop > end:
                    number, wire, value, stop, pos = _field_at(data, pos, end, owner)
                number = key >> 3
                pos = stop
            elif wire == VARINT and data[pos + 1] < 0x80:
                number = key >> 3
                value = data[pos + 1]
                stop = -1
                pos += 2
            else:
                number, wire, value, stop, pos = _field_at(data, pos, end, owner)
        else:
            number, wire, value, stop, pos = _field_at(data, pos, end, owner)
        index = slots[number] if 0 < number < top else -1
        if index < 0:
            continue  # unknown fields are dropped, as Go's generated code does
        field = fields[index]
        if index >= following:
            if index > following:
                _put_absent(out, fields, following, index)
            following = index + 1
            if field.is_list:
                items = []
                out[field.json] = items
            elif field.is_map:
                if wire != LEN:
                    raise ProtobufError(f"proto: wrong wireType = {wire} for field {field.name}")
                entries = {}
                out[field.json] = entries
            else:
                code = field.code
                got: Any
                if code == _STRING and wire == LEN:  # _read_value's commonest cases, without its call
                    got = _text(data, value, stop)
                elif code == _MESSAGE and wire == LEN:
                    nested = field.message
                    assert nested is not None
                    got = _read_message(nested, data, value, stop, depth + 1, {})
                else:
                    got = _read_value(field, data, wire, value, stop, depth)
                _put_json(out, field, got)
                continue
        elif index + 1 != following or not (field.is_list or field.is_map):
            return _read_any_order(message, data, start, end, depth, _without_after(out, first_keys))
        if field.is_list:
            _read_items(field, data, wire, value, stop, depth, items)
        else:
            if wire != LEN:
                raise ProtobufError(f"proto: wrong wireType = {wire} for field {field.name}")
            entry_key, entry = _read_entry(field, data, value, stop, depth)
            entries[entry_key] = entry
    if following < len(fields):
        _put_absent(out, fields, following, len(fields))
    return out


def _without_after(out: Obj, first_keys: int) -> Obj:
    """``out`` as it was given to ``_read_message`` (its first ``first_keys`` keys)."""
    if len(out) == first_keys:
        return out
    return dict(list(out.items())[:first_keys])


def _read_items(field: Field, data: bytes, wire: int, value: int, stop: int, depth: int, items: list[Any]) -> None:
    """Append one occurrence of a list field to ``items``: a packed run of numbers, or one element."""
    if wire == LEN and field.elem_wire == VARINT:  # packed
        at = value
        while at < stop:
            element, at = _get_varint(data, at, stop)
            items.append(_read_value(field, data, VARINT, element, -1, depth))
    elif field.wrapped:
        items.append(_read_wrapped(field, data, wire, value, stop, depth))
    else:
        items.append(_read_value(field, data, wire, value, stop, depth))


def _absent_json(field: Field) -> Any:
    """The JSON of Go's zero value of a field the message did not carry (_ABSENT: nothing to show)."""
    absent = field.absent
    if absent == _SKIP:
        return _ABSENT
    if absent == _CONST:
        return field.zero_value
    assert field.message is not None
    return _zero_message(field.message)


def _put_json(out: Obj, field: Field, got: Any) -> None:
    """Put a field's JSON into its message's: an inline struct's keys, nothing for Go's null (a
    nil pointer, slice or map, a zero time: the same as absent) or an omitted empty value."""
    if field.inline:
        out.update(got)
    elif got is not None and not (field.drop_empty and not got):
        out[field.json] = got


def _put_absent(out: Obj, fields: tuple[Field, ...], first: int, stop: int) -> None:
    """Put the JSON of ``fields[first:stop]``, which the message did not carry (Go's zero values)."""
    for index in range(first, stop):
        field = fields[index]
        got = _absent_json(field)
        if got is not _ABSENT:
            _put_json(out, field, got)


def _read_any_order(message: Message, data: bytes, start: int, end: int, depth: int, out: Obj) -> Obj:
    """``_read_message`` of a message whose fields come in any order, any number of times: a
    scalar's last value counts, a message's parts are merged, a list's or map's are gathered."""
    fields = message.fields
    slots = message.slots
    top = len(slots)
    values: list[Any] = [_ABSENT] * len(fields)
    merged: list[int] | None = None  # message fields seen more than once: their bytes are merged
    owner = message.owner
    pos = start
    while pos < end:
        number, wire, value, stop, pos = _field_at(data, pos, end, owner)
        index = slots[number] if 0 < number < top else -1
        if index < 0:
            continue  # unknown fields are dropped, as Go's generated code does
        field = fields[index]
        if field.is_list:
            found = values[index]
            if found is _ABSENT:
                items: list[Any] = []
                values[index] = items
            else:
                items = found
            _read_items(field, data, wire, value, stop, depth, items)
        elif field.is_map:
            if wire != LEN:
                raise ProtobufError(f"proto: wrong wireType = {wire} for field {field.name}")
            found = values[index]
            if found is _ABSENT:
                entries: dict[str, Any] = {}
                values[index] = entries
            else:
                entries = found
            entry_key, entry = _read_entry(field, data, value, stop, depth)
            entries[entry_key] = entry
        elif _MESSAGE <= field.code <= _FIELDSV1:
            if wire != LEN:
                raise ProtobufError(f"proto: wrong wireType = {wire} for field {field.name}")
            if values[index] is _ABSENT:
                values[index] = _read_value(field, data, LEN, value, stop, depth)
            elif merged is None:
                merged = [index]
            elif index not in merged:
                merged.append(index)
        else:
            values[index] = _read_value(field, data, wire, value, stop, depth)
    if merged is not None:
        # A message field seen more than once is read as the concatenation of its parts, as
        # Go's Unmarshal of each part into the same struct merges them.
        for index in merged:
            field = fields[index]
            joined = b"".join(data[a:b] for number, _, a, b in _fields(data, start, end, owner) if number == field.number)
            values[index] = _read_value(field, joined, LEN, 0, len(joined), depth)
    for index in range(len(fields)):
        field = fields[index]
        got = values[index]
        if got is _ABSENT:
            got = _absent_json(field)
            if got is _ABSENT:
                continue
        _put_json(out, field, got)
    return out


def _read_wrapped(field: Field, data: bytes, wire: int, start: int, stop: int, depth: int) -> list[Any]:
    """A named list type's message: its items in field 1."""
    if wire != LEN:
        raise ProtobufError(f"proto: wrong wireType = {wire} for field {field.name}")
    items = []
    pos = start
    while pos < stop:
        number, item_wire, value, end, pos = _field_at(data, pos, stop, field.name)
        if number == 1:
            items.append(_read_value(field, data, item_wire, value, end, depth))
    return items


def _read_entry(field: Field, data: bytes, start: int, stop: int, depth: int) -> tuple[str, Any]:
    if field.code == _STRING and field.key_is_string and not field.wrapped and stop - start >= 4 and data[start] == 0x0A and data[start + 1] < 0x80:
        # The usual entry of a map of strings (labels, annotations): key, then value, each
        # with a one-byte length, and nothing else.
        key_end = start + 2 + data[start + 1]
        if key_end + 2 <= stop and data[key_end] == 0x12 and data[key_end + 1] < 0x80 and key_end + 2 + data[key_end + 1] == stop:
            return _text(data, start + 2, key_end), _text(data, key_end + 2, stop)
    key: Any = _ZEROS.get(field.key, "")
    item: Any = None
    seen = False
    pos = start
    while pos < stop:
        number, wire, value, end, pos = _field_at(data, pos, stop, field.name)
        if number == 1:
            if field.key_is_string:
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


# The pieces a message is written as: each field's tag comes with the varint after it (a length,
# a small number, a bool) in one piece, and a nested message's tag and length in one slot filled in
# once its fields are written, so that the message is joined once, with the whole message, from as
# few pieces as can be (joining costs per piece).


def _heads(tag: bytes) -> list[bytes]:
    """``tag`` followed by each one-byte varint (0..127), then ``tag`` alone (at ``_TAG_ALONE``):
    one list per distinct tag, shared by the fields that have it (a few dozen tags in all)."""
    found = _HEADS.get(tag)
    if found is None:
        found = _HEADS[tag] = [tag + _SMALL_VARINTS[i] for i in range(128)]
        found.append(tag)
    return found


_TAG_ALONE: Final = 128


_HEADS: Final[dict[bytes, list[bytes]]] = {}
# The tag of a named list type's items (field 1, length-delimited).
_ITEM_HEADS: Final = _heads(b"\x0a")


def _head(heads: list[bytes], value: int) -> bytes:
    """The tag of ``heads`` and ``value`` as a varint, as one piece."""
    if 0 <= value < 128:
        return heads[value]
    if value < 16384:
        # Two-byte lengths (most nested messages'), kept by the field's tag as they come up.
        tag = heads[_TAG_ALONE]
        longer = _LONGER_HEADS.get(tag)
        if longer is None:
            longer = _LONGER_HEADS[tag] = {}
        found = longer.get(value)
        if found is None:
            found = longer[value] = tag + varint(value)
        return found
    return heads[_TAG_ALONE] + varint(value)


# Each tag's heads with two-byte values (at most 16,256 a tag), made as used.
_LONGER_HEADS: Final[dict[bytes, dict[int, bytes]]] = {}


def _add_bytes(parts: list[bytes], heads: list[bytes], payload: bytes) -> int:
    """A length-delimited field (the tag of ``heads``, the length, ``payload``) as parts of a
    message being written; how many bytes that is."""
    size = len(payload)
    head = heads[size] if size < 128 else _head(heads, size)
    parts.append(head)
    if size:
        parts.append(payload)
    return len(head) + size


def _open_field(parts: list[bytes]) -> int:
    """A slot for the tag and length of a length-delimited field whose bytes follow in ``parts``."""
    parts.append(b"")
    return len(parts) - 1


def _close_field(parts: list[bytes], slot: int, heads: list[bytes], size: int) -> int:
    """Put the tag and length of the field opened at ``slot`` (``size`` bytes); the field's whole size."""
    head = heads[size] if size < 128 else _head(heads, size)
    parts[slot] = head
    return len(head) + size


def _as_int(field: Field, value: Any, bits: int) -> int:
    if value is None:
        return 0
    if type(value) is int:
        number = value
    elif type(value) is float and value.is_integer():
        number = int(value)
    else:
        raise EncodeError(f"json: cannot unmarshal {go_json_type(value)} into Go struct field {field.name} of type int{bits}")
    # Most numbers fit 31 bits, which mypyc compares without boxing; the rest against the bounds.
    if not -0x40000000 <= number < 0x40000000 and not -(1 << (bits - 1)) <= number < (1 << (bits - 1)):
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
    cache = _MICRO_TIMESTAMPS if micro else _TIMESTAMPS
    found = cache.get(text)
    if found is not None:
        return found
    seconds, nanos = _parse_time(text)
    out = bytearray(b"\x08")
    _put_varint(out, seconds)
    out += b"\x10"
    _put_varint(out, (nanos // 1000 * 1000) if micro else 0)
    made = bytes(out)
    if len(cache) >= 4096:
        cache.clear()
    cache[text] = made
    return made


# The messages of recently written times and quantities, by their JSON text: objects carry the
# same few again and again.
_TIMESTAMPS: Final[dict[str, bytes]] = {}
_MICRO_TIMESTAMPS: Final[dict[str, bytes]] = {}
_QUANTITIES: Final[dict[str, bytes]] = {}


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


def _special(code: int, field: Field, value: Any) -> bytes:
    """A special type's message from its JSON value (its Go type's UnmarshalJSON, then Marshal)."""
    if code in (_TIME, _MICROTIME):
        return _timestamp(value, field, code == _MICROTIME)
    if code == _QUANTITY:
        if isinstance(value, str):
            found = _QUANTITIES.get(value)
            if found is not None:
                return found
        text = _canonical_quantity(field, value).encode("utf-8")
        made = b"\x0a" + varint(len(text)) + text
        if isinstance(value, str):
            if len(_QUANTITIES) >= 4096:
                _QUANTITIES.clear()
            _QUANTITIES[value] = made
        return made
    if code == _INTORSTRING:
        out = bytearray()
        if isinstance(value, str):
            out += b"\x08\x01\x10\x00"
            _put_bytes(out, b"\x1a", value.encode())
        else:
            out += b"\x08\x00\x10"
            _put_varint(out, _as_int(field, value, 32))
            out += b"\x1a\x00"
        return bytes(out)
    if code == _DURATION:
        out = bytearray(b"\x08")
        _put_varint(out, parse_go_duration(value) if value is not None else 0)
        return bytes(out)
    # rawextension, fieldsv1
    if value is None:
        return b""
    raw = orjson.dumps(value)
    return b"\x0a" + varint(len(raw)) + raw


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


def _put_value(parts: list[bytes], heads: list[bytes], field: Field, value: Any, depth: int) -> int:
    """One element of ``field`` with the tag of ``heads`` (scalars written even when zero); how many bytes."""
    code = field.code
    if code == _STRING:
        if value is None:
            return _add_bytes(parts, heads, b"")
        if not isinstance(value, str):
            raise EncodeError(f"json: cannot unmarshal {go_json_type(value)} into Go struct field {field.name} of type string")
        text: str = value
        known = field.known_texts
        if known is not None and heads is field.heads:
            piece = known.get(text)
            if piece is None:
                return _add_known_text(parts, field, known, text)
            parts.append(piece)
            return len(piece)
        return _add_bytes(parts, heads, text.encode("utf-8"))  # typed str and a named codec: mypyc calls CPython's UTF-8 encoder directly
    if code == _MESSAGE:
        message = field.message
        assert message is not None
        if value is None:
            value = {}
        elif not isinstance(value, dict):
            raise EncodeError(
                f"json: cannot unmarshal {go_json_type(value)} into Go struct field {field.name} of type {field.message_name.rsplit('/', 1)[-1]}"
            )
        slot = _open_field(parts)
        return _close_field(parts, slot, heads, _write_fields(parts, message, value, depth + 1))
    if code <= _FIELDSV1:
        return _add_bytes(parts, heads, _special(code, field, value))
    if code == _BOOL:
        if value is not None and not isinstance(value, bool):
            raise EncodeError(f"json: cannot unmarshal {go_json_type(value)} into Go struct field {field.name} of type bool")
        head = heads[1 if value else 0]
        parts.append(head)
        return len(head)
    if code == _BYTES:
        if value is None:
            raw = b""
        elif isinstance(value, str):
            try:
                raw = base64.b64decode(value, validate=True)
            except ValueError as exc:
                raise EncodeError(f"illegal base64 data: {exc}") from None
        else:
            raise EncodeError(f"json: cannot unmarshal {go_json_type(value)} into Go struct field {field.name} of type []uint8")
        return _add_bytes(parts, heads, raw)
    head = _head(heads, _as_int(field, value, 32 if code in (_INT32, _UINT32) else 64))
    parts.append(head)
    return len(head)


# How many distinct texts a string field may have for its bytes to be kept (``Field.known_texts``).
_MAX_KNOWN_TEXTS: Final = 64


def _add_known_text(parts: list[bytes], field: Field, known: dict[str, bytes], text: str) -> int:
    """A text of ``field`` not kept yet, kept when short unless the field has had too many."""
    data = text.encode("utf-8")
    if len(data) >= 128:
        return _add_bytes(parts, field.heads, data)
    if len(known) >= _MAX_KNOWN_TEXTS:
        field.known_texts = None  # free text: keeping its values would only cost lookups
        return _add_bytes(parts, field.heads, data)
    piece = known[text] = field.heads[len(data)] + data
    parts.append(piece)
    return len(piece)


def _zero_bytes(field: Field, depth: int) -> bytes:
    """What Go writes for a non-pointer field whose JSON is null or absent (its zero value), kept
    on the field once made."""
    zero = field.zero_bytes
    if zero is None:
        parts: list[bytes] = []
        _put_value(parts, field.heads, field, None, depth)
        zero = field.zero_bytes = b"".join(parts)
    return zero


def _write_message(message: Message, obj: Obj, depth: int = 0) -> bytes:
    parts: list[bytes] = []
    _write_fields(parts, message, obj, depth)
    return b"".join(parts)


def _write_fields(parts: list[bytes], message: Message, obj: Obj, depth: int) -> int:
    """Append a message's fields to ``parts``, nested messages included (their lengths filled in
    once written); how many bytes that is."""
    if depth > MAX_DEPTH:
        raise EncodeError(f"{message.name}: nested deeper than {MAX_DEPTH}")
    size = 0
    for field in message.fields:
        if field.inline:
            inner = field.message
            assert inner is not None
            slot = _open_field(parts)
            size += _close_field(parts, slot, field.heads, _write_fields(parts, inner, obj, depth + 1))
            continue
        value = obj.get(field.json)
        if value is None:
            if not (field.is_list or field.is_map or field.pointer):
                zero = _zero_bytes(field, depth)
                parts.append(zero)
                size += len(zero)
            continue
        if field.is_list:
            if not isinstance(value, list):
                raise EncodeError(f"json: cannot unmarshal {go_json_type(value)} into Go struct field {field.name} of type []")
            if field.packed:
                packed = bytearray()
                for item in value:
                    _put_varint(packed, _as_int(field, item, 64))
                size += _add_bytes(parts, field.heads, bytes(packed))
            elif field.wrapped:
                for item in value:
                    size += _put_wrapped(parts, field.heads, field, item, depth)
            else:
                for item in value:
                    size += _put_value(parts, field.heads, field, item, depth)
        elif field.is_map:
            if not isinstance(value, dict):
                raise EncodeError(f"json: cannot unmarshal {go_json_type(value)} into Go struct field {field.name} of type map")
            keys: list[str] = sorted(value)  # JSON's keys are texts: encoded directly below
            for key in keys:
                slot = _open_field(parts)
                entry = _add_bytes(parts, field.key_heads, key.encode("utf-8"))
                item = value[key]
                if field.wrapped:
                    entry += _put_wrapped(parts, field.value_heads, field, item, depth)
                elif field.code == _BYTES and item is None:
                    pass  # a nil []byte value is left out, as Go's marshaller does
                else:
                    entry += _put_value(parts, field.value_heads, field, item, depth)
                size += _close_field(parts, slot, field.heads, entry)
        else:
            size += _put_value(parts, field.heads, field, value, depth)
    return size


def _put_wrapped(parts: list[bytes], heads: list[bytes], field: Field, items: Any, depth: int) -> int:
    """A named list type's value (a message of the items, each as field 1) with the tag of ``heads``."""
    if items is not None and not isinstance(items, list):
        raise EncodeError(f"json: cannot unmarshal {go_json_type(items)} into Go struct field {field.name} of type []string")
    slot = _open_field(parts)
    size = 0
    for item in items or ():
        size += _put_value(parts, _ITEM_HEADS, field, item, depth)
    return _close_field(parts, slot, heads, size)


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
ENVELOPE_TAIL: Final = b"\x1a\x00\x22\x00"


def envelope_prefix(api_version: str, kind: str) -> bytes:
    """``k8s\0`` and a runtime.Unknown's TypeMeta: what comes before its raw field (field 2, the
    message as a length-delimited field, the same bytes a list's ``items`` entry has)."""
    key = (api_version, kind)
    found = _ENVELOPE_PREFIXES.get(key)
    if found is None:
        api_version_bytes, kind_bytes = api_version.encode(), kind.encode()
        type_meta = b"\x0a" + varint(len(api_version_bytes)) + api_version_bytes + b"\x12" + varint(len(kind_bytes)) + kind_bytes
        found = MAGIC + b"\x0a" + varint(len(type_meta)) + type_meta
        if len(_ENVELOPE_PREFIXES) < 1024:  # the served kinds, and a bound against made-up ones
            _ENVELOPE_PREFIXES[key] = found
            _PREFIX_TYPES[found] = key
    return found


# Each apiVersion and kind's envelope prefix, made once: every answer and watch event has one.
_ENVELOPE_PREFIXES: Final[dict[tuple[str, str], bytes]] = {}
# The other way round: the type a prefix names, for reading request bodies.
_PREFIX_TYPES: Final[dict[bytes, tuple[str, str]]] = {}


def envelope_head(api_version: str, kind: str, size: int) -> bytes:
    """``k8s\0`` and a runtime.Unknown up to its message of ``size`` bytes."""
    return envelope_prefix(api_version, kind) + b"\x12" + varint(size)


def envelope(api_version: str, kind: str, raw: bytes | bytearray) -> bytes:
    """A message in its envelope, as upstream's serializer writes it."""
    return envelope_head(api_version, kind, len(raw)) + raw + ENVELOPE_TAIL


def open_envelope(body: bytes) -> tuple[str, str, bytes]:
    """(apiVersion, kind, raw message) of a ``k8s\\0`` body; Go's error texts for bad ones."""
    found = _open_usual_envelope(body)
    if found is not None:
        return found
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
    if (api_version, kind) in schema().kinds:
        envelope_prefix(api_version, kind)  # known for the next body of this type (_open_usual_envelope)
    return api_version, kind, raw


def _open_usual_envelope(body: bytes) -> tuple[str, str, bytes] | None:
    """``open_envelope`` of an envelope as clients write it (the prefix of a type read or written
    before, the message once, then empty contentEncoding and contentType: what ``envelope``
    writes), without reading it field by field; None for any other body."""
    size = len(body)
    if size < 8 or body[5] >= 0x80:
        return None
    start = 6 + body[5]  # past the TypeMeta (its length one byte: any served type's is)
    if start + 2 > size or body[start] != 0x12:
        return None
    names = _PREFIX_TYPES.get(body[:start])
    if names is None:
        return None
    length, pos = _get_varint(body, start + 1, size)
    if pos + length + 4 != size or not body.endswith(ENVELOPE_TAIL):
        return None
    return names[0], names[1], body[pos : pos + length]


def _go_bytes(data: bytes) -> str:
    return "[" + " ".join(str(b) for b in data) + "]"


# ---- the codec's entry points ------------------------------------------------------------------


def decode(raw: bytes, message: Message, into: Obj | None = None) -> Obj:
    """The JSON form of one message's bytes (no envelope), as upstream would hand it on; put in
    ``into`` when given (after the keys it holds, unless the message has them too)."""
    _RAW_JSON_READ.clear()
    return _read_message(message, raw, 0, len(raw), 0, {} if into is None else into)


def decode_checked(raw: bytes, message: Message, depth_limit: int, into: Obj | None = None) -> tuple[Obj, bool, bool]:
    """``decode`` (into ``into``), and what a server would otherwise walk the result for: whether every value
    reads back into the Go type as JSON (False when a time lies outside the years 1000-9999, whose
    text has no four-digit year), and whether the JSON nests at most ``depth_limit`` levels deep
    (True when the schema's nesting plus the most the deepest raw JSON inside can add stays
    within it; False means it may not). Only raw JSON (a RawExtension such as an opaque device
    config's parameters, a managedFields entry's FieldsV1) nests beyond what the schema allows,
    each where the schema puts it: the deepest one counts, bounded as it is read."""
    before = _LONG_OR_SHORT_YEARS[0]
    obj = decode(raw, message, into)
    room = depth_limit - json_depth(message)
    shallow = room >= 0
    for text in _RAW_JSON_READ:
        # Each level takes an opening and a closing bracket: raw JSON nests at most half its
        # length deep, and at most as deep as it has opening brackets (counted when needed).
        if len(text) >> 1 > room and text.count(b"{") + text.count(b"[") > room:
            shallow = False
            break
    _RAW_JSON_READ.clear()
    return obj, _LONG_OR_SHORT_YEARS[0] == before, shallow


def json_depth(message: Message) -> int:
    """At least how many levels of JSON the message's JSON nests, raw JSON inside it aside
    (a list or map counts twice, which covers named list types); ``UNBOUNDED`` for a message that
    can contain itself."""
    found = _JSON_DEPTHS.get(message.name)
    if found is not None:
        return found
    _JSON_DEPTHS[message.name] = UNBOUNDED  # met again below it: it contains itself
    deepest = 0
    for field in message.fields:
        below = json_depth(field.message) if field.message is not None else 0
        if field.is_list or field.is_map:
            below += 2
        deepest = max(deepest, below)
    depth = min(1 + deepest, UNBOUNDED)
    _JSON_DEPTHS[message.name] = depth
    return depth


UNBOUNDED: Final = 1 << 30
_JSON_DEPTHS: Final[dict[str, int]] = {}


def encode(obj: Obj, message: Message) -> bytes:
    """One message's bytes (no envelope) from its JSON form."""
    return _write_message(message, obj)


def encode_in_envelope(obj: Obj, message: Message, prefix: bytes) -> bytes:
    """``envelope`` of ``obj`` written as ``message``, ``prefix`` being ``envelope_prefix``'s for
    its type, made in one piece (the message is not copied once more into the envelope)."""
    parts: list[bytes] = [prefix, b""]
    parts[1] = b"\x12" + varint(_write_fields(parts, message, obj, 0))
    parts.append(ENVELOPE_TAIL)
    return b"".join(parts)


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
    """A framed metav1.WatchEvent whose object is an enveloped object's bytes (one copy of them)."""
    kind = event_type.encode()
    raw_head = b"\x0a" + varint(len(object_envelope))
    head = b"\x0a" + varint(len(kind)) + kind + b"\x12" + varint(len(raw_head) + len(object_envelope)) + raw_head
    return b"".join(((len(head) + len(object_envelope)).to_bytes(4, "big"), head, object_envelope))


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
