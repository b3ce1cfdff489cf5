"""Request bodies: the size limit, JSON and YAML decoding, hostile input (which decoder a
request gets is content negotiation's choice)."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
import yaml
from mypy_extensions import mypyc_attr
from starlette.requests import ClientDisconnect
from starlette.types import Receive

from app import protobuf
from app.api.schemas import FieldPath, KnownFields, UnknownFields, collect_unknown, known_fields_of_kind, render_field_path
from app.protobuf import go_json_type
from kube.errors import ApiError, bad_request, entity_too_large
from kube.quantity import Quantity, QuantityError

MAX_DEPTH = 100
MAX_YAML_NODES = 1_000_000


async def read_body(receive: Receive, declared: str | None, limit: int) -> bytes:
    """The whole body (ASGI ``receive``), refusing anything over ``limit`` bytes without reading it all.

    ``declared`` is the Content-Length header, if any.
    """
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise entity_too_large(limit)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise entity_too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Refuse absurd nesting before any recursive code sees it."""
    if (type(value) is dict or type(value) is list) and not _within_depth(value, limit - 1):
        raise bad_request(f"the request body is nested deeper than {limit} levels")


def _within_depth(container: dict[str, Any] | list[Any], remaining: int) -> bool:
    """Whether every value below ``container`` is at most ``remaining`` levels deeper."""
    if remaining <= 0:
        return not container
    for item in container.values() if type(container) is dict else container:
        if (type(item) is dict or type(item) is list) and not _within_depth(item, remaining - 1):
            return False
    return True


@mypyc_attr(native_class=False)  # compiled by mypyc (kube/compiled.py), which cannot subclass str natively
class OutOfRangeNumber(str):
    """A JSON number no Go number holds (``1e400``, ``18446744073709551616``), kept as its literal:
    upstream's typed decoding names it in the error (app.api.generic reports it)."""


@dataclass
class DecodeFindings:
    """What decoding a body found that upstream's strict decoding reports, for the request's
    field validation to report in turn (Strict refuses, Warn warns)."""

    duplicate_fields: list[str] = field(default_factory=list)
    out_of_range_numbers: bool = False
    # A YAML body: go-yaml's lines for repeated keys ("line 5: key \"name\" already set in map"),
    # and fields named in the order of the JSON upstream converts YAML to (keys sorted).
    yaml: bool = False
    yaml_duplicates: list[str] = field(default_factory=list)
    # A body in a typed encoding (protobuf) whose every value already holds in the kind's Go
    # types: there is no wrong JSON type to look for.
    typed: bool = False

    def strict_errors(self, unknown: list[str], positions: dict[str, int] | None) -> list[str]:
        """Upstream's strict decoding errors of a body: for YAML the repeated keys (one error
        of go-yaml's lines) then the unknown fields by sorted keys; for JSON repeated and unknown
        fields in document order (``positions``: each field's place before unknown ones were
        dropped), a repeated unknown field named once, as unknown."""
        if self.yaml:
            errors = [YAML_UNMARSHAL_ERRORS + "\n  ".join(self.yaml_duplicates)] if self.yaml_duplicates else []
            return errors + [f'unknown field "{path}"' for path in sorted(unknown, key=sorted_field_order)]
        duplicates = [path for path in self.duplicate_fields if not any(_within(path, u) for u in unknown)]
        events = [(path, f'duplicate field "{path}"') for path in duplicates] + [(path, f'unknown field "{path}"') for path in unknown]
        if positions is not None and duplicates and unknown:
            events.sort(key=lambda event: positions.get(event[0], len(positions)))
        return [message for _path, message in events]


YAML_UNMARSHAL_ERRORS = "yaml: unmarshal errors:\n  "


def strict_warnings(errors: list[str]) -> list[str]:
    """Strict decoding errors as upstream warns of them: go-yaml's error one line each."""
    warnings: list[str] = []
    for error in errors:
        if error.startswith(YAML_UNMARSHAL_ERRORS):
            warnings.extend(error[len(YAML_UNMARSHAL_ERRORS) :].split("\n  "))
        else:
            warnings.append(error)
    return warnings


def _within(path: str, ancestor: str) -> bool:
    return path == ancestor or path.startswith((ancestor + ".", ancestor + "["))


_PATH_SEGMENT = re.compile(r"\[(\d+)\]|([^.\[]+)")


def sorted_field_order(path: str) -> tuple[tuple[int, int, bytes], ...]:
    """A field path's place when every object's keys are sorted (as Go marshals maps):
    list items by index, keys by their bytes."""
    return tuple((0, int(m.group(1)), b"") if m.group(1) is not None else (1, 0, m.group(2).encode()) for m in _PATH_SEGMENT.finditer(path))


def document_positions(value: Any) -> dict[str, int]:
    """Each field path of a decoded body (as strict decoding names fields) and its place in the
    document, for ordering repeated and unknown fields as upstream finds them."""
    positions: dict[str, int] = {}
    _number_paths(value, None, positions)
    return positions


def _number_paths(value: Any, path: FieldPath, positions: dict[str, int]) -> None:
    if type(value) is dict:
        for key, item in value.items():
            child = (path, key)
            positions[render_field_path(child)] = len(positions)
            _number_paths(item, child, positions)
    elif type(value) is list:
        for index, item in enumerate(value):
            _number_paths(item, (path, index), positions)


# Set by decode_json for the request decoding the body (each request runs in its own task).
_findings: ContextVar[DecodeFindings | None] = ContextVar("decode_findings", default=None)
# The findings of every typed body: nothing found, so one value serves all (never changed).
_TYPED_BODY: Final[DecodeFindings] = DecodeFindings(typed=True)


def note_typed_body() -> None:
    """This request's body came decoded from a typed encoding (``DecodeFindings.typed``)."""
    _findings.set(_TYPED_BODY)


def take_decode_findings() -> DecodeFindings | None:
    """What decoding this request's body found (once: a second call returns None, but for a
    typed body, whose findings are none, left in place: a second set would cost a protobuf write
    a context change for nothing)."""
    findings = _findings.get()
    if findings is not None and findings is not _TYPED_BODY:
        _findings.set(None)
    return findings


def decode_json(raw: bytes, kind: str) -> Any:
    """An object body; what strict decoding would report is kept for ``take_decode_findings``."""
    value = _decode(raw, lambda error: f"the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: {error}")
    _check_type_meta(value, raw, kind)
    return value


def summarize_data(body: bytes) -> str:
    """upstream's summarizeData: the first 30 bytes, as text when the body looks like JSON, else hex."""
    if not body:
        return "<empty>"
    head = body[:30]
    text = head.decode("utf-8", "replace") if body[:1] == b"{" else head.hex()
    return text + " ..." if len(body) > 30 else text


# The type-meta keys Go reads first, by their case-folded spelling.
_TYPE_META_KEYS: Final = {"apiversion": "apiVersion", "kind": "kind"}


def _check_type_meta(value: Any, body: bytes, kind: str) -> None:
    """Upstream reads a body's apiVersion and kind first, into strings (keys matched in any
    case); a value of another type fails there, and the error shows the start of ``body``."""
    if type(value) is not dict:
        return
    for key, item in value.items():
        if item is None or type(item) is str:
            continue  # what the keys may hold: the key's case need not be looked at
        name = _TYPE_META_KEYS.get(key.lower())
        if name is not None:
            raise bad_request(
                f"the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: "
                f"json: cannot unmarshal {_json_kind(item)} into Go struct field .{name} of type string ({summarize_data(body)})"
            )


def _json_kind(value: Any) -> str:
    """How Go names the kind of a decoded JSON value (a number kept as its literal included)."""
    return "number" if type(value) is OutOfRangeNumber else go_json_type(value)


def decode_patch_json(raw: bytes) -> Any:
    """A JSON, merge or strategic merge patch; its repeated keys are kept for
    ``take_decode_findings``. A number no float64 holds is refused, as Go decodes patches into
    interface{} values; other numbers past int64 become floats."""
    value = _decode(raw, lambda error: f"error decoding patch: {error}")
    findings = _findings.get()
    if findings is not None and findings.out_of_range_numbers:
        value = _as_floats(value)
    return value


def _as_floats(value: Any) -> Any:
    if type(value) is dict:
        return {key: _as_floats(item) for key, item in value.items()}
    if type(value) is list:
        return [_as_floats(item) for item in value]
    if type(value) is OutOfRangeNumber:
        number = float(value)
        if number in (float("inf"), float("-inf")):
            raise bad_request(f"error decoding patch: json: cannot unmarshal number {value} into Go value of type float64")
        return number
    return value


def _decode(raw: bytes, describe: Callable[[Exception], str]) -> Any:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "infinity" not in str(exc):
            raise bad_request(describe(exc)) from None
    else:
        # A body with no more opening brackets than the limit (strings' included: counted in C)
        # cannot nest deeper than it, and is not walked.
        if raw.count(b"{") + raw.count(b"[") > MAX_DEPTH:
            check_depth(value)
        # orjson keeps the last of repeated keys and turns numbers past int64 into floats; a body
        # it would write back byte for byte has neither (compact JSON from Go or orjson clients).
        if orjson.dumps(value) == raw:
            return value
    value, findings = _decode_exactly(raw, describe)
    if findings.duplicate_fields or findings.out_of_range_numbers:
        _findings.set(findings)
    return value


@mypyc_attr(native_class=False)
class _Members(list[tuple[str, Any]]):
    """The members of a JSON object in document order, repeated keys included."""


def _exact_int(literal: str) -> int | OutOfRangeNumber:
    number = int(literal)
    return number if -(1 << 63) <= number < (1 << 63) else OutOfRangeNumber(literal)


def _exact_float(literal: str) -> float | OutOfRangeNumber:
    number = float(literal)
    return OutOfRangeNumber(literal) if number in (float("inf"), float("-inf")) else number


def _no_constant(literal: str) -> Any:
    raise ValueError(f"invalid character '{literal[0]}' looking for beginning of value")


def _decode_exactly(raw: bytes, describe: Callable[[Exception], str]) -> tuple[Any, DecodeFindings]:
    """The slow, exact decoding: repeated keys are reported (the last one wins, as upstream) and
    numbers out of Go's range are kept as their literal."""
    try:
        members = json.loads(raw, object_pairs_hook=_Members, parse_int=_exact_int, parse_float=_exact_float, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise bad_request(describe(exc)) from None
    findings = DecodeFindings()
    value = _objects(members, None, findings)
    check_depth(value)
    return value, findings


def _objects(value: Any, path: FieldPath, findings: DecodeFindings) -> Any:
    """``value`` with its objects made dicts; repeated keys and out-of-range numbers noted."""
    kind = type(value)
    if kind is _Members:
        obj: dict[str, Any] = {}
        for key, item in value:
            if key in obj:
                findings.duplicate_fields.append(render_field_path((path, key)))
            obj[key] = _objects(item, (path, key), findings)
        return obj
    if kind is list:
        return [_objects(item, (path, index), findings) for index, item in enumerate(value)]
    if kind is OutOfRangeNumber:
        findings.out_of_range_numbers = True
    return value


class _BoundedLoader(yaml.SafeLoader):
    """A safe YAML loader that measures the expanded document before building it."""


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # cycles count once
    total = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            total += _expanded_size(child, memo)
            if total > MAX_YAML_NODES:
                break
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            total += _expanded_size(k, memo) + _expanded_size(v, memo)
            if total > MAX_YAML_NODES:
                break
    memo[key] = total
    return total


def decode_yaml(raw: bytes, kind: str, apply: bool = False) -> Any:
    """A YAML body (``apply``: a server-side apply configuration, whose errors upstream words
    its own way); its repeated keys are kept for ``take_decode_findings``."""
    try:
        loader = _BoundedLoader(raw.decode("utf-8"))
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            if _expanded_size(node, {}) > MAX_YAML_NODES:
                raise bad_request("the YAML document expands to too many nodes (aliases)")
            findings = DecodeFindings(yaml=True)
            _repeated_yaml_keys(node, findings.yaml_duplicates)
            value = loader.construct_document(node)
        finally:
            loader.dispose()
    except ApiError:
        raise
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError, ValueError) as exc:
        prefix = "error decoding YAML" if apply else f"the object provided is unrecognized (must be of type {kind})"
        raise bad_request(f"{prefix}: error converting YAML to JSON: {exc}") from None
    # YAML may hold values JSON cannot (timestamps, binary); round-trip to find them.
    try:
        value = orjson.loads(orjson.dumps(value))
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise bad_request(f"error converting YAML to JSON: {exc}") from None
    check_depth(value)
    if not apply:
        _check_type_meta(value, raw, kind)
    _findings.set(findings)
    return value


def _repeated_yaml_keys(node: yaml.Node, found: list[str]) -> None:
    """go-yaml's strict errors for keys a mapping repeats, in the order it decodes (a repeated
    key's value is not looked into); the later value wins, as in the document upstream decodes."""
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            _repeated_yaml_keys(child, found)
    elif isinstance(node, yaml.MappingNode):
        seen: set[tuple[str, str]] = set()
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                identity = (key.tag, key.value)
                if identity in seen:
                    shown = json.dumps(key.value) if key.tag == "tag:yaml.org,2002:str" else key.value
                    found.append(f"line {key.start_mark.line + 1}: key {shown} already set in map")
                    continue
                seen.add(identity)
            _repeated_yaml_keys(value, found)


class _DecodeAbort(Exception):
    """An error Go's decoding stops at: one a type's own JSON decoder returned."""


_STRING_DECODED = frozenset({"time", "microtime", "duration"})
_INT_RANGES = {"int32": (-(1 << 31), 1 << 31), "int64": (-(1 << 63), 1 << 63), "uint32": (0, 1 << 32), "uint64": (0, 1 << 64)}


@dataclass
class _GoDecoding:
    """Where Go's decoding of a body stands: the first type error it noted (it goes on after
    one)."""

    saved: str | None = None

    def type_error(self, value: Any, go_type: str, struct: str, context: _ErrorContext, abort: bool = False, number: bool = False) -> None:
        """``number``: the Go type is a number, which Go names a number that does not fit in by its literal."""
        shown = f"number {value}" if number and type(value) in (int, float, OutOfRangeNumber) else _json_kind(value)
        error = f"json: cannot unmarshal {shown} into Go struct field {struct}.{_render_context(context)} of type {go_type}"
        if abort:
            raise _DecodeAbort(error)
        if self.saved is None:
            self.saved = error


# The Go field names leading to the value decoded now (Go's error context), as a chain of
# (the enclosing struct's context, the field's names: the embedded structs it is promoted
# from, then its JSON name); joined only when an error is found, so a clean body builds no text.
_ErrorContext = tuple[Any, tuple[str, ...]] | None


def _render_context(context: _ErrorContext) -> str:
    names: list[tuple[str, ...]] = []
    while context is not None:
        context, field_names = context
        names.append(field_names)
    return ".".join(name for field_names in reversed(names) for name in field_names)


def kind_decode_error(obj: dict[str, Any], api_version: str, kind: str, out_of_range: bool = False) -> str | None:
    """Go's error decoding the body ``obj`` into the Go type of ``kind``, as upstream's JSON
    decoder would (None when it decodes): the first value of a JSON type the Go type cannot
    hold (``json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of type
    map[string]string``; Go goes on after one), unless a type's own decoder fails later, which
    stops decoding and is the error (a quantity that does not parse, an int-or-string that is
    neither). Unknown fields are left alone (strict decoding reports them, after this).
    ``out_of_range``: the body has numbers past Go's ranges (``OutOfRangeNumber``); those left
    where they fit (a float, free-form JSON) become floats there."""
    return decode_finding_unknown(obj, api_version, kind, out_of_range, find_unknown=False)[0]


def decode_finding_unknown(
    obj: dict[str, Any], api_version: str, kind: str, out_of_range: bool, find_unknown: bool = True
) -> tuple[str | None, UnknownFields | None]:
    """``kind_decode_error``, and in the same walk the fields the kind's schema does not know
    (``schemas.prune_unknown_fields``, the dropping left to ``UnknownFields.drop``); None for
    them when the walk could not find them (no schema, or not asked)."""
    message = protobuf.schema().kinds.get((api_version, kind))
    if message is None:
        return None, None
    known = _object_fields(known_fields_of_kind(api_version, kind)) if find_unknown else None
    found = UnknownFields() if known is not None else None
    decoding = _GoDecoding()
    try:
        if known is None or found is None:
            _decode_struct(decoding, obj, _struct_plan(message), None)
        else:
            _decode_finding_unknown(decoding, obj, _struct_plan(message), known, None, None, found)
    except _DecodeAbort as exc:
        return str(exc), None
    if decoding.saved is None and out_of_range:
        _floats_in_place(obj)
    return decoding.saved, found


def typed_bodies_fully_known(api_version: str, kind: str) -> bool:
    """Whether the unknown-field walk can find nothing in a body decoded from a typed encoding
    (protobuf) into ``kind``: every field the kind's Go type can carry, at every depth, is one its
    schema knows, the raw JSON it can carry (RawExtension, FieldsV1) is free-form there, and no
    map it carries can hold a null (which the walk would drop). Worked out once per kind."""
    key = (api_version, kind)
    known = _TYPED_BODIES_KNOWN.get(key)
    if known is None:
        message = protobuf.schema().kinds.get(key)
        plan = known_fields_of_kind(api_version, kind)
        known = _TYPED_BODIES_KNOWN[key] = message is not None and plan is not None and _message_known(message, plan, set())
    return known


_TYPED_BODIES_KNOWN: Final[dict[tuple[str, str], bool]] = {}
# Map element types whose decoded value may be null (a zero time, absent raw JSON or bytes).
_NULLABLE_ELEMENTS: Final = frozenset({"time", "microtime", "rawextension", "fieldsv1", "bytes"})


def _message_known(message: protobuf.Message, plan: KnownFields, seen: set[tuple[str, int]]) -> bool:
    """Whether ``plan`` knows every field of ``message`` as the walk looks them up (a dict a
    free-form or non-object plan describes is not looked into)."""
    if plan.free_form or not plan.is_object:
        return True
    visit = (message.name, id(plan))
    if visit in seen:
        return True  # being checked further up
    seen.add(visit)
    for member in message.fields:
        if member.inline:
            if member.message is None or not _message_known(member.message, plan, seen):
                return False
            continue
        child = plan.declared.get(member.json) or plan.extra
        if child is None or not _field_known(member, child, seen):
            return False
    return True


def _field_known(member: protobuf.Field, plan: KnownFields, seen: set[tuple[str, int]]) -> bool:
    """Whether the walk finds nothing in any value of ``member`` that ``plan`` describes."""
    if plan.free_form:
        return True
    if member.is_list:
        return plan.items is None or _element_known(member, plan.items, seen)
    if member.is_map:
        if not plan.is_object:
            return True
        # Any key may come: each must find the map's value plan (and no declared property).
        if plan.declared or plan.extra is None or member.wrapped or member.type in _NULLABLE_ELEMENTS:
            return False
        return _element_known(member, plan.extra, seen)
    return _element_known(member, plan, seen)


def _element_known(member: protobuf.Field, plan: KnownFields, seen: set[tuple[str, int]]) -> bool:
    if member.wrapped:
        return True  # a list of scalars
    if member.message is not None:
        return _message_known(member.message, plan, seen)
    if member.type in ("rawextension", "fieldsv1"):
        return plan.free_form  # arbitrary JSON
    return True  # a scalar, which the walk does not look into


def _floats_in_place(value: Any) -> None:
    items = value.items() if type(value) is dict else enumerate(value) if type(value) is list else ()
    for key, item in items:
        if type(item) is OutOfRangeNumber:
            value[key] = float(item)
        elif type(item) is dict or type(item) is list:
            _floats_in_place(item)


# How a field's element decodes, as small ints: the walk below runs once for every value of
# every body, and comparing ints is cheaper than comparing the schema's type names.
_DECODE_ANY: Final = 0  # rawextension, fieldsv1: any JSON
_DECODE_STRUCT: Final = 1
_DECODE_STRING: Final = 2
_DECODE_BOOL: Final = 3
_DECODE_INTEGER: Final = 4
_DECODE_BASE64: Final = 5
_DECODE_QUANTITY: Final = 6
_DECODE_INT_OR_STRING: Final = 7
_DECODE_TIME: Final = 8  # a string, then parsed as RFC 3339
_DECODE_OTHER_TIME: Final = 9  # microtime, duration: a string (their parses are validation's)
_ELEMENT_CODES = {
    "message": _DECODE_STRUCT,
    "string": _DECODE_STRING,
    "bool": _DECODE_BOOL,
    "bytes": _DECODE_BASE64,
    "quantity": _DECODE_QUANTITY,
    "intorstring": _DECODE_INT_OR_STRING,
    "time": _DECODE_TIME,
}
_ELEMENT_CODES.update({name: _DECODE_INTEGER for name in ("int32", "int64", "uint32", "uint64")})
_ELEMENT_CODES.update({name: _DECODE_OTHER_TIME for name in ("microtime", "duration")})
# The field's value itself, a JSON array of elements, or a JSON object of them.
_IN_FIELD: Final = 0
_IN_LIST: Final = 1
_IN_MAP: Final = 2


class _GoField:
    """One JSON key of a Go struct, with all its decoding needs worked out once."""

    __slots__ = ("container", "element", "field_names", "go", "go_elem", "go_item", "high", "low", "member", "plan", "wrapped")

    def __init__(self, member: protobuf.Field, field_names: tuple[str, ...]) -> None:
        self.member = member
        self.field_names = field_names
        self.container: int = _IN_LIST if member.label == protobuf.LIST else _IN_MAP if member.label == protobuf.MAP else _IN_FIELD
        self.element: int = _ELEMENT_CODES.get(member.type, _DECODE_ANY)
        self.go = member.go
        self.go_elem = member.go_elem
        self.go_item = member.go_item
        self.wrapped = member.wrapped
        self.low, self.high = _INT_RANGES.get(member.type, (0, 0))
        # The element struct's plan, made when first needed (a struct may hold its own type).
        self.plan: _StructPlan | None = None

    def struct_plan(self) -> _StructPlan:
        plan = self.plan
        if plan is None:
            assert self.member.message is not None
            plan = self.plan = _struct_plan(self.member.message)
        return plan


class _StructPlan:
    """A Go struct as decoding meets it: its name (for error texts) and its fields by JSON name,
    promoted fields of embedded structs included (a field of the struct itself hides a
    promoted one of the same name)."""

    __slots__ = ("fields", "struct")

    def __init__(self, message: protobuf.Message) -> None:
        self.struct = message.name.rsplit(".", 1)[-1]
        self.fields: dict[str, _GoField] = {}
        promoted: list[tuple[str, _GoField]] = []
        for member in message.fields:
            if member.inline and member.message is not None:
                embedded = member.message_name.rsplit(".", 1)[-1]
                for name, inner in _struct_plan(member.message).fields.items():
                    promoted.append((name, _GoField(inner.member, (embedded, *inner.field_names))))
            elif member.json:
                self.fields[member.json] = _GoField(member, (member.json,))
        for name, entry in promoted:
            self.fields.setdefault(name, entry)


@functools.cache
def _struct_plan(message: protobuf.Message) -> _StructPlan:
    return _StructPlan(message)


def _decode_struct(decoding: _GoDecoding, obj: dict[str, Any], plan: _StructPlan, context: _ErrorContext) -> None:
    fields = plan.fields
    for key, item in obj.items():
        if item is None:
            continue  # null leaves a Go value as it is
        entry = fields.get(key)
        if entry is not None:  # unknown fields are strict decoding's
            _decode_field(decoding, item, entry, plan.struct, context)


def _decode_field(decoding: _GoDecoding, item: Any, entry: _GoField, struct: str, context: _ErrorContext) -> None:
    """The non-null value of one field of ``struct`` (whose error context is ``context``)."""
    container = entry.container
    if container == _IN_FIELD:
        _decode_value(decoding, item, entry, entry.go, struct, context)
        return
    if type(item) is not (list if container == _IN_LIST else dict):
        decoding.type_error(item, entry.go, struct, (context, entry.field_names))
        return
    elements: Iterable[Any] = item.values() if type(item) is dict else item
    for element in elements:
        if element is None:
            continue
        if not entry.wrapped:
            _decode_value(decoding, element, entry, entry.go_elem, struct, context)
        elif type(element) is not list:
            decoding.type_error(element, entry.go_elem, struct, (context, entry.field_names))
        else:
            for inner in element:
                if inner is not None:
                    _decode_value(decoding, inner, entry, entry.go_item, struct, context)


def _object_fields(plan: KnownFields | None) -> KnownFields | None:
    """``plan`` when the unknown-field walk looks at the keys of an object it describes."""
    return plan if plan is not None and not plan.free_form and plan.is_object else None


def _decode_finding_unknown(
    decoding: _GoDecoding, obj: dict[str, Any], plan: _StructPlan, known: KnownFields, context: _ErrorContext, path: FieldPath, found: UnknownFields
) -> None:
    """``_decode_struct`` and ``collect_unknown`` (pruning) of one struct at once: both follow the
    same keys, so a value is looked at once where the Go type and the schema agree on what it is
    (a struct, a list or map of structs), and by each walk on its own elsewhere. The Go errors
    are the same (unknown fields matter only when there is none), and the unknown fields and
    nulls are found in the same order."""
    fields = plan.fields
    declared = known.declared
    extra = known.extra
    struct = plan.struct
    for key, item in obj.items():
        if item is None:
            found.nulls.append((obj, key))  # and Go leaves the value as it is
            continue
        entry = fields.get(key)
        child = declared.get(key) or extra
        if child is None:
            found.add(obj, key, path)
            if entry is not None:
                _decode_field(decoding, item, entry, struct, context)
            continue
        item_type = type(item)
        if entry is None:
            if item_type is dict or item_type is list:
                collect_unknown(item, child, (path, key), found, True)
            continue
        if entry.element != _DECODE_STRUCT or entry.wrapped or (item_type is not dict and item_type is not list):
            _decode_field(decoding, item, entry, struct, context)
            if item_type is dict or item_type is list:
                collect_unknown(item, child, (path, key), found, True)
            continue
        container = entry.container
        field_context = (context, entry.field_names)
        field_path = (path, key)
        if container == _IN_FIELD and item_type is dict and _object_fields(child) is not None:
            _decode_finding_unknown(decoding, item, entry.struct_plan(), child, field_context, field_path, found)
        elif container == _IN_LIST and item_type is list and not child.free_form and _object_fields(child.items) is not None:
            assert child.items is not None
            for index, element in enumerate(item):
                _decode_struct_element(decoding, item, index, element, entry, struct, context, child.items, field_path, found)
        elif container == _IN_MAP and item_type is dict and _object_fields(child) is not None and not child.declared and _object_fields(child.extra) is not None:
            assert child.extra is not None
            for name, element in item.items():
                if element is None:
                    found.nulls.append((item, name))
                    continue
                _decode_struct_element(decoding, item, name, element, entry, struct, context, child.extra, field_path, found)
        else:
            _decode_field(decoding, item, entry, struct, context)
            collect_unknown(item, child, field_path, found, True)


def _decode_struct_element(
    decoding: _GoDecoding,
    container: Any,
    at: str | int,
    element: Any,
    entry: _GoField,
    struct: str,
    context: _ErrorContext,
    known: KnownFields,
    path: FieldPath,
    found: UnknownFields,
) -> None:
    """One element (``container[at]``) of a list or map of structs, both walks at once."""
    if element is None:
        return  # Go skips it; in a list, the unknown-field walk does too
    if type(element) is dict:
        _decode_finding_unknown(decoding, element, entry.struct_plan(), known, (context, entry.field_names), (path, at), found)
        return
    _decode_value(decoding, element, entry, entry.go_elem, struct, context)
    if type(element) is list:
        collect_unknown(element, known, (path, at), found, True)


def _decode_value(decoding: _GoDecoding, value: Any, entry: _GoField, go_type: str, struct: str, context: _ErrorContext) -> None:
    """One non-null value of ``entry``'s element type, of the Go type named ``go_type``;
    ``context`` is the enclosing struct's (the field's names are added only for an error)."""
    element = entry.element
    value_type = type(value)
    if element == _DECODE_STRUCT:
        if value_type is dict:
            _decode_struct(decoding, value, entry.struct_plan(), (context, entry.field_names))
        else:
            decoding.type_error(value, go_type, struct, (context, entry.field_names))
    elif element == _DECODE_STRING:
        if value_type is not str:
            decoding.type_error(value, go_type, struct, (context, entry.field_names))
    elif element == _DECODE_BOOL:
        if value_type is not bool:
            decoding.type_error(value, go_type, struct, (context, entry.field_names))
    elif element == _DECODE_INTEGER:
        if not _int_within(value, entry.low, entry.high):
            decoding.type_error(value, go_type, struct, (context, entry.field_names), number=True)
    elif element == _DECODE_BASE64:
        if value_type is not str:
            decoding.type_error(value, go_type, struct, (context, entry.field_names))
        else:
            error = go_base64_error(value)
            if error is not None and decoding.saved is None:
                decoding.saved = error
    elif element == _DECODE_QUANTITY:
        # Quantity's own decoder parses any JSON text but a string's quotes: numbers parse.
        if value_type is str or value_type is bool or value_type is dict or value_type is list:
            text = value.strip() if value_type is str else "{" if value_type is dict else "["
            try:
                Quantity.parse(text if value_type is not bool else str(value).lower())
            except QuantityError as exc:
                raise _DecodeAbort(str(exc)) from None
    elif element == _DECODE_INT_OR_STRING:
        if value_type is not str and not _holds_int(value, "int32"):
            # Not a string, so decoded as its int32 (an error there stops decoding).
            decoding.type_error(value, "int32", struct, (context, entry.field_names), abort=True, number=True)
    elif element in (_DECODE_TIME, _DECODE_OTHER_TIME):
        # Decoded as a string first, then parsed (an error in either stops decoding).
        if value_type is not str:
            decoding.type_error(value, "string", struct, (context, entry.field_names), abort=True)
        if element == _DECODE_TIME:
            _check_time(value, "time")
    # _DECODE_ANY: rawextension, fieldsv1


def _int_within(value: Any, low: int, high: int) -> bool:
    """Whether ``value`` is a JSON integer (an out-of-range literal included) in [low, high)."""
    value_type = type(value)
    if value_type is int:
        return bool(low <= value < high)
    if value_type is OutOfRangeNumber:
        try:
            number = int(value)
        except ValueError:
            return False
        return low <= number < high
    return False


def _field_values(member: protobuf.Field, item: list[Any] | dict[str, Any]) -> Iterator[tuple[Any, str | None]]:
    """The non-null values in a list's or map's JSON, each with the Go type it decodes into; an
    element of a named list type (wrapped) that is no JSON array comes with None."""
    elements: Iterable[Any] = item.values() if isinstance(item, dict) else item
    for element in elements:
        if element is None:
            continue
        if not member.wrapped:
            yield element, member.go_elem
        elif type(element) is not list:
            yield element, None
        else:
            for inner in element:
                if inner is not None:
                    yield inner, member.go_item


def _check_time(text: str, kind: str) -> None:
    """A metav1.Time's parse (RFC 3339; other layouts' parses are validation's)."""
    error = go_time_error(text) if kind == "time" else None
    if error is not None:
        raise _DecodeAbort(error)


def _holds_int(value: Any, kind: str) -> bool:
    """Whether ``value`` is a JSON integer the Go integer type ``kind`` holds."""
    low, high = _INT_RANGES[kind]
    return _int_within(value, low, high)


def kind_conversion_error(obj: dict[str, Any], api_version: str, kind: str) -> str | None:
    """The unstructured converter's error turning ``obj`` into ``kind`` (see ``unstructured_conversion_error``)."""
    message = protobuf.schema().kinds.get((api_version, kind))
    return unstructured_conversion_error(obj, message) if message is not None else None


def unstructured_conversion_error(obj: dict[str, Any], message: protobuf.Message) -> str | None:
    """The error of upstream's unstructured converter turning ``obj`` (a patched or applied
    object) into the Go type of ``message``, None when it converts: fields in the struct's
    order, the first error ends it (``cannot restore map from string``, ``unrecognized type:
    int64``, ``cannot convert float64 to int64``; types with JSON decoders of their own fail as
    those do). Unlike JSON decoding, whole numbers fit any number field."""
    try:
        _convert_struct(obj, message)
    except _DecodeAbort as exc:
        return str(exc)
    return None


# The reflect kinds the converter names: what an unstructured value is, what a Go field is.
_VALUE_KINDS = {str: "string", bool: "bool", int: "int64", float: "float64", dict: "map", list: "slice", OutOfRangeNumber: "float64"}
_FIELD_KINDS = {"string": "string", "bool": "bool", "int32": "int32", "int64": "int64", "uint32": "uint32", "uint64": "uint64", "float64": "float64", "float32": "float32"}


def _convert_struct(obj: dict[str, Any], message: protobuf.Message) -> None:
    for member in message.fields:
        if member.inline and member.message is not None:
            _convert_struct(obj, member.message)
            continue
        item = obj.get(member.json)
        if item is None:
            continue
        if member.label == protobuf.LIST or member.label == protobuf.MAP:
            if type(item) is not (list if member.label == protobuf.LIST else dict):
                raise _DecodeAbort(f"cannot restore {'slice' if member.label == protobuf.LIST else 'map'} from {_VALUE_KINDS[type(item)]}")
            for element, go_type in _field_values(member, item):
                if go_type is None:
                    raise _DecodeAbort(f"cannot restore slice from {_VALUE_KINDS[type(element)]}")
                _convert_value(element, member, go_type)
        else:
            _convert_value(item, member, member.go)


def _convert_value(value: Any, member: protobuf.Field, go_type: str) -> None:
    kind = member.type
    value_kind = _VALUE_KINDS[type(value)]
    if kind == "message":
        if type(value) is not dict:
            raise _DecodeAbort(f"cannot restore struct from: {value_kind}")
        assert member.message is not None
        _convert_struct(value, member.message)
    elif kind == "bytes":
        if type(value) is not str:
            raise _DecodeAbort(f"cannot restore slice from {value_kind}")
        error = go_base64_error(value)
        if error is not None:
            raise _DecodeAbort(f"error decoding from json: {error}")
    elif kind in _FIELD_KINDS:
        _convert_scalar(value, value_kind, _FIELD_KINDS[kind], go_type)
    elif kind == "quantity":
        if type(value) in (str, bool, dict, list):
            try:
                Quantity.parse(value.strip() if type(value) is str else "{")
            except QuantityError as exc:
                raise _DecodeAbort(str(exc)) from None
    elif kind == "intorstring" and type(value) is not str:
        whole = type(value) is float and value.is_integer()
        if not _holds_int(int(value) if whole else value, "int32"):
            shown = f"number {value}" if type(value) in (int, float, OutOfRangeNumber) else go_json_type(value)
            raise _DecodeAbort(f"json: cannot unmarshal {shown} into Go value of type int32")
    elif kind in _STRING_DECODED:
        if type(value) is not str:
            raise _DecodeAbort(f"json: cannot unmarshal {go_json_type(value)} into Go value of type string")
        _check_time(value, kind)


def _convert_scalar(value: Any, value_kind: str, field_kind: str, go_type: str) -> None:
    """Go's reflect conversions the converter allows: within strings, bools, numbers (a
    fraction not into an integer), and an integer into a string type is refused by name."""
    numeric = field_kind not in ("string", "bool")
    if value_kind == field_kind or (value_kind == "int64" and numeric):
        return
    if value_kind == "float64" and numeric:
        if field_kind.startswith("float") or float(value).is_integer():
            return
        raise _DecodeAbort(f"cannot convert float64 to {go_type}")
    if value_kind == "int64" and field_kind == "string":
        raise _DecodeAbort(f"cannot convert int64 to {go_type}")
    raise _DecodeAbort(f"unrecognized type: {field_kind}")


RFC3339 = "2006-01-02T15:04:05Z07:00"
# Go's RFC 3339 layout as its parser reads it: (the literal before an element, the element).
_RFC3339_CHUNKS = (("", "2006"), ("-", "01"), ("-", "02"), ("T", "15"), (":", "04"), (":", "05"), ("", "Z07:00"))
_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _go_quote(text: str) -> str:
    """A string as Go's time package quotes it in errors."""
    out = []
    for char in text:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif " " <= char < "\x80":
            out.append(char)
        else:
            out.extend(f"\\x{byte:02x}" for byte in char.encode())
    return '"' + "".join(out) + '"'


def _two_digits(value: str, fixed: bool) -> tuple[int, str] | None:
    """Go's getnum: one or two leading digits (two when ``fixed``), None when there are not."""
    if not value[:1].isdigit() or not value[:1].isascii():
        return None
    if not (len(value) > 1 and value[1].isascii() and value[1].isdigit()):
        return None if fixed else (int(value[0]), value[1:])
    return int(value[:2]), value[2:]


@functools.lru_cache(maxsize=4096)  # objects carry the same few times again and again (managedFields)
def go_time_error(text: str) -> str | None:
    """Go's error parsing ``text`` as an RFC 3339 time (metav1.Time's decoding), None when it parses:
    ``parsing time "x" as "2006-01-02T15:04:05Z07:00": cannot parse "x" as "2006"``, or a value
    out of its range (``parsing time "2024-13-01T00:00:00Z": month out of range``)."""
    value = text
    fields: dict[str, int] = {}

    def cannot(rest: str, element: str) -> str:
        return f"parsing time {_go_quote(text)} as {_go_quote(RFC3339)}: cannot parse {_go_quote(rest)} as {_go_quote(element)}"

    def out_of_range(what: str) -> str:
        return f"parsing time {_go_quote(text)}: {what} out of range"

    for literal, element in _RFC3339_CHUNKS:
        if not value.startswith(literal):
            matched = 0
            while matched < len(literal) and matched < len(value) and value[matched] == literal[matched]:
                matched += 1
            return cannot(value[matched:], literal)
        value = value[len(literal) :]
        hold = value
        if element == "2006":
            digits = value[:4]
            if len(value) < 4 or not (digits.isascii() and digits.isdigit()):
                return cannot(hold, element)
            fields["year"], value = int(digits), value[4:]
            continue
        if element == "Z07:00":
            if value[:1] == "Z":
                value = value[1:]
                continue
            if len(value) < 6 or value[3] != ":" or value[0] not in "+-":
                return cannot(hold, element)
            hours, minutes = _two_digits(value[1:3], True), _two_digits(value[4:6], True)
            if hours is None or minutes is None:
                return cannot(hold, element)
            value = value[6:]
            if minutes[0] > 60:
                return out_of_range("time zone offset minute")
            if hours[0] > 24:
                return out_of_range("time zone offset hour")
            continue
        number = _two_digits(value, element != "15")
        if number is None:
            return cannot(hold, element)
        fields[element], value = number
        limit, what = {"01": (13, "month"), "02": (32, "day"), "15": (24, "hour"), "04": (60, "minute"), "05": (60, "second")}[element]
        if fields[element] >= limit or (element == "01" and fields[element] == 0):
            return out_of_range(what)
        if element == "05" and len(value) >= 2 and value[0] in ".," and value[1].isascii() and value[1].isdigit():
            end = 2
            while end < len(value) and value[end].isascii() and value[end].isdigit():
                end += 1
            value = value[end:]
    if value:
        return f"parsing time {_go_quote(text)}: extra text: {_go_quote(value)}"
    year, month, day = fields["year"], fields["01"], fields["02"]
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if day < 1 or day > _DAYS_IN_MONTH[month - 1] + (1 if month == 2 and leap else 0):
        return out_of_range("day")
    return None


_BASE64 = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def go_base64_error(text: str) -> str | None:
    """Go's error decoding ``text`` as padded standard base64 (``illegal base64 data at input
    byte 4``: where the fault is, line breaks skipped but counted), None when it decodes."""
    data = text.encode()
    size = len(data)
    pos = 0
    while pos < size:
        digits = 0
        while digits < 4:
            if pos == size:
                return None if digits == 0 else f"illegal base64 data at input byte {pos - digits}"
            char = data[pos]
            pos += 1
            if char in _BASE64:
                digits += 1
                continue
            if char in (10, 13):
                continue
            if char != 61 or digits < 2:  # not "=", or padding too early
                return f"illegal base64 data at input byte {pos - 1}"
            if digits == 2:  # a second "=" must follow
                while pos < size and data[pos] in (10, 13):
                    pos += 1
                if pos == size:
                    return f"illegal base64 data at input byte {size}"
                if data[pos] != 61:
                    return f"illegal base64 data at input byte {pos - 1}"
                pos += 1
            while pos < size and data[pos] in (10, 13):
                pos += 1
            return f"illegal base64 data at input byte {pos}" if pos < size else None
    return None


# The scheme upstream's decoders look kinds up in (its errors name it).
LEGACY_SCHEME = "pkg/api/legacyscheme/scheme.go:30"


def unconvertible_kind(kind: str, api_version: str, group: str, target: str) -> str:
    """Why upstream's decoder cannot turn a body of another ``kind`` (in the endpoint's group
    version) into the endpoint's kind: no such kind there, or no conversion from the one there
    is (Go's type names: the versioned package, and the internal one the endpoint stores)."""
    message = protobuf.schema().kinds.get((api_version, kind))
    if message is None:
        return f'no kind "{kind}" is registered for version "{api_version}" in scheme "{LEGACY_SCHEME}"'
    source = message.name.rsplit("/", 1)[-1]
    internal = "core" if group in ("", "events.k8s.io") else group.split(".")[0]
    return f"converting ({source}) to ({internal}.{target}): unknown conversion"
