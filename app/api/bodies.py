"""Request bodies: the size limit, JSON and YAML decoding, hostile input (which decoder a
request gets is content negotiation's choice)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import orjson
import yaml
from mypy_extensions import mypyc_attr
from starlette.requests import ClientDisconnect
from starlette.types import Receive

from app.api.schemas import FieldPath, SchemaNode, render_field_path
from kube import protobuf
from kube.errors import ApiError, bad_request, entity_too_large
from kube.protobuf import go_json_type

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


def take_decode_findings() -> DecodeFindings | None:
    """What decoding this request's body found (once: a second call returns None)."""
    findings = _findings.get()
    if findings is not None:
        _findings.set(None)
    return findings


def decode_json(raw: bytes, kind: str) -> Any:
    """An object body; what strict decoding would report is kept for ``take_decode_findings``."""
    return _decode(raw, lambda error: f"the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: {error}")


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


def type_mismatch_error(obj: dict[str, Any], node: SchemaNode | None) -> str | None:
    """Go's error decoding the first value of ``obj`` whose JSON type the Go type ``node``
    describes cannot hold (``json: cannot unmarshal string into Go struct field
    ReplicaSetSpec.spec.replicas of type int32``); None when every value fits. Named scalar types
    (v1.PersistentVolumeAccessMode) are named by their underlying type, all the schema knows, and
    types with decoders of their own (IntOrString, Quantity) are left to them."""
    return _mismatch(obj, node, "", ())


_GO_SCALARS = {"string": "string", "boolean": "bool", "number": "float64"}


def _declared_type(node: SchemaNode) -> str | None:
    declared = node.raw.get("type")
    if isinstance(declared, list):  # ["integer", "null"]: a pointer in Go
        declared = next((t for t in declared if t != "null"), None)
    return declared if isinstance(declared, str) else None


def _go_type(node: SchemaNode | None) -> str:
    declared = _declared_type(node) if node is not None else None
    if node is None or declared is None:
        return "interface {}"
    if declared == "integer":
        return "int32" if node.raw.get("format") == "int32" else "int64"
    if declared == "array":
        return "[]" + _go_type(node.items())
    if declared == "object":
        if node.has_properties and node.definition_name:
            package, name = node.definition_name.rsplit(".", 2)[-2:]
            return f"{package}.{name}"
        return "map[string]" + _go_type(node.additional_properties())
    return _GO_SCALARS.get(declared, "interface {}")


def _fits(value: Any, declared: str) -> bool:
    kind = type(value)
    if declared == "object":
        return kind is dict
    if declared == "array":
        return kind is list
    if declared == "string":
        return kind is str
    if declared == "boolean":
        return kind is bool
    if declared == "integer":
        return kind is int
    if declared == "number":
        return kind is int or kind is float
    return True


def _mismatch(value: Any, node: SchemaNode | None, struct: str, fields: tuple[str, ...]) -> str | None:
    if value is None or node is None or node.is_free_form:
        return None  # null decodes into anything; free-form fields take any JSON
    declared = _declared_type(node)
    if declared is None:
        return None
    if not _fits(value, declared):
        number = declared == "integer" and type(value) is float
        shown = f"number {value}" if number else go_json_type(value)
        if struct:
            return f"json: cannot unmarshal {shown} into Go struct field {struct}.{'.'.join(fields)} of type {_go_type(node)}"
        return f"json: cannot unmarshal {shown} into Go value of type {_go_type(node)}"
    if type(value) is dict:
        # Go names the innermost struct and the struct fields leading to it (not map keys).
        is_struct = node.has_properties
        here = (node.definition_name or "").rsplit(".", 1)[-1] if is_struct else struct
        for key, item in value.items():
            child = node.property(key) if is_struct else node.additional_properties()
            error = _mismatch(item, child, here, (*fields, key) if is_struct else fields)
            if error is not None:
                return error
    elif type(value) is list:
        items = node.items()
        for item in value:
            error = _mismatch(item, items, struct, fields)
            if error is not None:
                return error
    return None


def out_of_range_number_error(obj: dict[str, Any], node: SchemaNode | None) -> str | None:
    """Go's error decoding the first out-of-range number of ``obj`` into the Go types ``node``
    describes (``json: cannot unmarshal number 1e400 into Go struct field ExactDeviceRequest.spec.devices.requests.exactly.count of type int64``).

    None when every such number fits where it is: a whole number past int64 in a float or
    free-form field becomes a float there, as in Go."""
    return _number_error(obj, node, "", ())


INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def int32_overflow_error(obj: dict[str, Any], node: SchemaNode | None, path: tuple[str, ...]) -> str | None:
    """Go's error decoding the integer at ``path`` of ``obj`` into an int32 that cannot hold it
    (``json: cannot unmarshal number 3000000000 into Go struct field PriorityClass.value of type int32``)."""
    value: Any = obj
    struct = ""
    for key in path:
        if type(value) is not dict:
            return None
        if node is not None and node.has_properties:
            struct = (node.definition_name or "").rsplit(".", 1)[-1]
        value = value.get(key)
        node = node.child(key) if node is not None else None
    if type(value) is not int or INT32_MIN <= value <= INT32_MAX:
        return None
    return f"json: cannot unmarshal number {value} into Go struct field {struct}.{'.'.join(path)} of type int32"


def _number_error(value: Any, node: SchemaNode | None, struct: str, fields: tuple[str, ...]) -> str | None:
    if type(value) is dict:
        # Go names the innermost struct and the struct fields leading to it (not map keys).
        is_struct = node is not None and node.has_properties
        here = (node.definition_name or "").rsplit(".", 1)[-1] if is_struct and node is not None else struct
        for key, item in list(value.items()):
            child = node.child(key) if node is not None and node.is_object and not node.is_free_form else None
            error = _member_number_error(value, key, item, child, here, (*fields, key) if is_struct else fields)
            if error is not None:
                return error
    elif type(value) is list:
        items = node.items() if node is not None else None
        for index, item in enumerate(value):
            error = _member_number_error(value, index, item, items, struct, fields)
            if error is not None:
                return error
    return None


def _member_number_error(container: Any, key: Any, item: Any, node: SchemaNode | None, struct: str, fields: tuple[str, ...]) -> str | None:
    """The error of ``container[key]``; a number that fits where it is becomes a float there."""
    if type(item) is OutOfRangeNumber:
        error = _number_into(item, node, struct, fields)
        if error is None:
            container[key] = float(item)
        return error
    if type(item) is dict or type(item) is list:
        return _number_error(item, node, struct, fields)
    return None


def _number_into(literal: OutOfRangeNumber, node: SchemaNode | None, struct: str, fields: tuple[str, ...]) -> str | None:
    """Go's error storing ``literal`` in a value of the type ``node`` describes, None when it fits."""
    declared = node.raw.get("type") if node is not None else None
    if isinstance(declared, list):  # ["integer", "null"]: a pointer in Go
        declared = next((t for t in declared if t != "null"), None)
    overflows_float = float(literal) in (float("inf"), float("-inf"))
    if declared == "integer":
        go_type, shown = ("int32" if node is not None and node.raw.get("format") == "int32" else "int64"), f"number {literal}"
    elif declared in (None, "number"):
        if not overflows_float:
            return None
        go_type, shown = "float64", f"number {literal}"
    else:
        go_type, shown = {"string": "string", "boolean": "bool", "array": "[]interface {}"}.get(str(declared), "map[string]interface {}"), "number"
    if struct:
        return f"json: cannot unmarshal {shown} into Go struct field {struct}.{'.'.join(fields)} of type {go_type}"
    return f"json: cannot unmarshal {shown} into Go value of type {go_type}"


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
