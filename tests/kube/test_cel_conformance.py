"""The official CEL conformance tests (google/cel-spec ``tests/simple/testdata``) for every feature
of Kubernetes' DRA CEL environment, read as data from ``../shared/conformance/cel-spec-testdata``.

Each case is compiled in an environment with the libraries the DRA environment has (standard
library, strings v2, sets, lists v3, two-variable comprehensions, optional values, bindings)
and the declarations the case asks for; checked cases must type-check, evaluate to the
expected value or fail where an error is expected. What the DRA environment does not have
(protobuf messages, other extensions, newer library versions) is skipped with the reason.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from kube.cel import (
    CELCompileError,
    CELRuntimeError,
    Environment,
    bindings,
    lists,
    optionals,
    sets,
    standard,
    strings,
    two_var_comprehensions,
)
from kube.cel.library import STANDARD_TYPE_VALUES
from kube.cel.types import (
    BOOL,
    BYTES,
    DOUBLE,
    DYN,
    INT,
    NULL,
    OPTIONAL,
    STRING,
    TYPE,
    UINT,
    Optional,
    Type,
    UInt,
    list_of,
    map_key,
    map_of,
    param,
    type_of,
)

# Beside the repository (CI checks it out there); CEL_CONFORMANCE_DATA overrides the location.
DATA = Path(
    os.environ.get("CEL_CONFORMANCE_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "conformance" / "cel-spec-testdata"
)

# The files covering features of the DRA environment.
FILES = [
    "basic", "comparisons", "conversions", "fp_math", "integer_math", "lists", "logic", "macros", "macros2",
    "parse", "plumbing", "string", "string_ext", "bindings_ext", "optionals", "timestamps",
]  # fmt: skip

# Whole sections the DRA environment does not have, with the reason.
SKIP_SECTIONS = {
    ("string_ext", "reverse"): "strings.reverse() is strings extension version 3; Kubernetes enables version 2",
    (
        "string_ext",
        "format",
    ): "expects format() of strings extension version 4 (new number and list rendering); Kubernetes enables version 2",
}
# Single cases, with the reason.
_OFFSET_PAST_END = (
    "cel-go returns -1 for an offset past the end of the string since v0.22 (what Kubernetes runs); the data expects the older error"
)
SKIP_CASES: dict[tuple[str, str, str], str] = {
    ("string_ext", "value_errors", "indexof_out_of_range"): _OFFSET_PAST_END,
    ("string_ext", "value_errors", "lastindexof_out_of_range"): _OFFSET_PAST_END,
}

PROTO_REASON = "needs protobuf messages (out of scope: DRA has no message types)"

# --- a small reader for protobuf text format -----------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|\#[^\n]*)
  | (?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<ext>\[[^\]]*\])
  | (?P<num>-?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)[fFuU]?)
  | (?P<ident>-?[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[{}<>:,;\[\]])
    """,
    re.VERBOSE,
)
_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, "'": 39, '"': 34, "?": 63}


def _unescape(body: str) -> bytes:
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode()
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1 :])
            assert m
            out.append(int(m.group(), 8) & 0xFF)
            i += 1 + len(m.group())
        elif nxt in "xX":
            m = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2 :])
            assert m
            out.append(int(m.group(), 16))
            i += 2 + len(m.group())
        elif nxt == "u":
            out += chr(int(body[i + 2 : i + 6], 16)).encode("utf-8", "surrogatepass")
            i += 6
        elif nxt == "U":
            out += chr(int(body[i + 2 : i + 10], 16)).encode()
            i += 10
        else:
            raise ValueError(f"bad escape \\{nxt}")
    return bytes(out)


@dataclass
class Scalar:
    kind: str
    text: str
    data: bytes = b""

    @property
    def string(self) -> str:
        return self.data.decode("utf-8") if self.kind == "str" else self.text


Message = dict[str, list[Any]]


def parse_text_format(text: str) -> Message:
    toks = [(m.lastgroup or "", m.group()) for m in _TOKEN.finditer(text) if m.lastgroup != "ws"]
    pos = 0

    def message(end: str | None) -> Message:
        nonlocal pos
        out: Message = {}
        while pos < len(toks):
            kind, tok = toks[pos]
            if end is not None and tok == end:
                pos += 1
                return out
            assert kind in ("ident", "ext"), f"unexpected {tok!r}"
            pos += 1
            if toks[pos][1] == ":":
                pos += 1
            out.setdefault(tok, []).extend(value())
            if pos < len(toks) and toks[pos][1] in (",", ";"):
                pos += 1
        assert end is None, "unterminated message"
        return out

    def value() -> list[Any]:
        nonlocal pos
        kind, tok = toks[pos]
        if tok in ("{", "<"):
            pos += 1
            return [message("}" if tok == "{" else ">")]
        if tok == "[":
            pos += 1
            items: list[Any] = []
            while toks[pos][1] != "]":
                items.extend(value())
                if toks[pos][1] == ",":
                    pos += 1
            pos += 1
            return items
        if kind == "str":
            data = b""
            while pos < len(toks) and toks[pos][0] == "str":
                data += _unescape(toks[pos][1][1:-1])
                pos += 1
            return [Scalar("str", "", data)]
        pos += 1
        return [Scalar(kind, tok)]

    return message(None)


# --- cel-spec messages as Python values ----------------------------------------------------------


class NeedsProto(Exception):
    pass


def _one(msg: Message, name: str, default: Any = None) -> Any:
    v = msg.get(name)
    return v[0] if v else default


def _number(s: Scalar) -> float | int:
    low = s.text.lower()
    if low in ("inf", "infinity"):
        return math.inf
    if low in ("-inf", "-infinity"):
        return -math.inf
    if low == "nan":
        return math.nan
    t = s.text.rstrip("uU")
    if low.startswith(("0x", "-0x")):
        return int(t, 16)
    return float(t) if any(c in t for c in ".eE") else int(t)


def cel_value(v: Message) -> Any:
    """A cel.expr.Value message as a runtime value."""
    if not v:
        return None
    ((key, items),) = v.items()
    item = items[0]
    if key == "null_value":
        return None
    if key == "bool_value":
        return item.text == "true"
    if key == "int64_value":
        return int(_number(item))
    if key == "uint64_value":
        return UInt(int(_number(item)))
    if key == "double_value":
        return float(_number(item))
    if key == "string_value":
        return item.data.decode("utf-8")
    if key == "bytes_value":
        return item.data
    if key == "list_value":
        return [cel_value(x) for x in item.get("values", [])]
    if key == "map_value":
        return {map_key(cel_value(_one(e, "key"))): cel_value(_one(e, "value")) for e in item.get("entries", [])}
    if key == "type_value":
        name = item.string
        if name in STANDARD_TYPE_VALUES:
            return STANDARD_TYPE_VALUES[name]
        if name == "optional_type":
            return OPTIONAL
        raise NeedsProto(name)
    raise NeedsProto(key)


_PRIMITIVES = {"BOOL": BOOL, "INT64": INT, "UINT64": UINT, "DOUBLE": DOUBLE, "STRING": STRING, "BYTES": BYTES}


def cel_type(t: Message) -> Type:
    """A cel.expr.Type message as a type."""
    if not t:
        return DYN
    ((key, items),) = t.items()
    item = items[0]
    if key == "primitive":
        return _PRIMITIVES[item.text]
    if key == "dyn":
        return DYN
    if key == "null":
        return NULL
    if key == "list_type":
        return list_of(cel_type(_one(item, "elem_type", {})))
    if key == "map_type":
        return map_of(cel_type(_one(item, "key_type", {})), cel_type(_one(item, "value_type", {})))
    if key == "type":
        return type_of(cel_type(item)) if item else TYPE
    if key == "type_param":
        return param(item.string)
    if key == "abstract_type" and _one(item, "name").string == "optional_type":
        return Type(OPTIONAL.kind, OPTIONAL.name, tuple(cel_type(p) for p in item.get("parameter_types", [])))
    raise NeedsProto(key)


@dataclass
class Case:
    file: str
    section: str
    name: str
    expr: str = ""
    disable_check: bool = False
    check_only: bool = False
    container: str = ""
    variables: dict[str, Type] = field(default_factory=dict)
    bindings: dict[str, Any] = field(default_factory=dict)
    expect: str = "value"  # value | error | type
    value: Any = True
    deduced_type: Type | None = None
    skip: str | None = None


def _flag(msg: Message, name: str) -> bool:
    return bool(_one(msg, name)) and _one(msg, name).text == "true"


_PROTO_NAMES = re.compile(r"TestAllTypes|NestedMessage|NestedEnum|GlobalEnum|google\.protobuf|cel\.expr\.conformance|proto[23]\.")


def load(name: str) -> list[Case]:
    data = parse_text_format((DATA / f"{name}.textproto").read_text(encoding="utf-8"))
    out = []
    for section in data.get("section", []):
        sname = _one(section, "name").string
        for t in section.get("test", []):
            c = Case(name, sname, _one(t, "name").string, _one(t, "expr").string)
            c.disable_check = _flag(t, "disable_check")
            c.check_only = _flag(t, "check_only")
            container = _one(t, "container")
            c.container = container.string if container else ""
            try:
                if _PROTO_NAMES.search(c.expr) or c.container.startswith("cel.expr.conformance"):
                    raise NeedsProto(c.expr)
                for decl in t.get("type_env", []):
                    if "ident" not in decl:
                        raise NeedsProto("function declarations")
                    c.variables[_one(decl, "name").string] = cel_type(_one(_one(decl, "ident"), "type", {}))
                for b in t.get("bindings", []):
                    c.bindings[_one(b, "key").string] = cel_value(_one(_one(b, "value"), "value", {}))
                if "value" in t:
                    c.value = cel_value(_one(t, "value"))
                elif "typed_result" in t:
                    tr = _one(t, "typed_result")
                    c.deduced_type = cel_type(_one(tr, "deduced_type", {}))
                    if "result" in tr:
                        c.value = cel_value(_one(tr, "result"))
                    else:
                        c.expect = "type"
                elif "eval_error" in t or "any_eval_errors" in t:
                    c.expect = "error"
                elif "unknown" in t or "any_unknowns" in t:
                    c.skip = "unknown values are not part of Kubernetes' evaluation"
            except NeedsProto:
                c.skip = PROTO_REASON
            if SKIP_SECTIONS.get((name, sname)):
                c.skip = SKIP_SECTIONS[(name, sname)]
            if (name, sname, c.name) in SKIP_CASES:
                c.skip = SKIP_CASES[(name, sname, c.name)]
            out.append(c)
    return out


@cache
def _libraries() -> list[Any]:
    return [standard(), strings(2), sets(), lists(3), two_var_comprehensions(), optionals(), bindings()]


def environment(case: Case) -> Environment:
    return Environment(_libraries(), case.variables, container=case.container, optimize=True)


def same(expected: Any, got: Any) -> bool:
    """Conformance equality: kinds must agree (1 is not 1u), NaN equals NaN."""
    if type(expected) is not type(got):
        if (isinstance(expected, dict) and isinstance(got, dict)) or (isinstance(expected, list) and isinstance(got, list | tuple)):
            pass
        else:
            return False
    if isinstance(expected, float):
        return (math.isnan(expected) and math.isnan(got)) or expected == got
    if isinstance(expected, list):
        return len(expected) == len(got) and all(same(a, b) for a, b in zip(expected, got, strict=True))
    if isinstance(expected, dict):
        return len(expected) == len(got) and all(
            k in got and same(v, got[k]) and type(next(x for x in got if x == k)) is type(k) for k, v in expected.items()
        )
    if isinstance(expected, Optional):
        return expected.present == got.present and (not expected.present or same(expected.value, got.value))
    if isinstance(expected, Type):
        return expected.name == got.name
    return bool(expected == got)


def _cases() -> list[Any]:
    if not DATA.is_dir():
        return [pytest.param(None, id="conformance-data-absent", marks=pytest.mark.skip(reason=f"no conformance data at {DATA}"))]
    params = []
    for name in FILES:
        for c in load(name):
            marks = [pytest.mark.skip(reason=c.skip)] if c.skip else []
            params.append(pytest.param(c, id=f"{c.file}/{c.section}/{c.name}", marks=marks))
    return params


@pytest.mark.parametrize("case", _cases())
def test_conformance(case: Case) -> None:
    env = environment(case)
    try:
        program = env.compile(case.expr, check_types=not case.disable_check)
    except CELCompileError as exc:
        assert case.expect == "error", f"compile failed: {exc}"
        return
    if case.deduced_type is not None and not case.disable_check:
        assert program.output_type == case.deduced_type, f"type {program.output_type} != {case.deduced_type}"
    if case.check_only or case.expect == "type":
        return
    try:
        got = program.evaluate(case.bindings)
    except CELRuntimeError as exc:
        assert case.expect == "error", f"evaluation failed: {exc}"
        return
    assert case.expect != "error", f"expected an error, got {got!r}"
    assert same(case.value, got), f"got {got!r}, want {case.value!r}"
