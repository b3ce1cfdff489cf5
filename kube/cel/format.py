"""``string.format()`` as cel-go's strings extension before version 4 implements it (Kubernetes
enables version 2), with its en_US number printing (digit grouping, scientific notation as a power of ten),
and Go's ``%g`` for doubles, which ``string(double)`` uses too."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kube.cel.parser import CreateList, CreateMap, Expr
from kube.cel.types import (
    BOOL_K,
    BYTES_K,
    DOUBLE_K,
    DURATION_K,
    DYN_K,
    INT_K,
    LIBRARY_TYPES,
    LIST_K,
    MAP_K,
    NULL_K,
    STRING_K,
    TIMESTAMP_K,
    TYPE_K,
    UINT_K,
    EvalError,
    Type,
    UInt,
    from_key,
    runtime_type,
)
from kube.labels import go_quote

DEFAULT_PRECISION = 6
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def format_double(d: float) -> str:
    """Go's ``%g`` for a float64 (shortest representation)."""
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "+Inf" if d > 0 else "-Inf"
    if d == 0:
        return "-0" if math.copysign(1, d) < 0 else "0"
    r = repr(d)
    mantissa, _, exp_text = r.partition("e")
    digits = mantissa.replace("-", "").replace(".", "").lstrip("0")
    if exp_text:
        exp = int(exp_text)
        int_part, _, frac = mantissa.lstrip("-").partition(".")
        digits = (int_part + frac).rstrip("0") or "0"
        exp10 = exp + len(int_part) - 1
    else:
        int_part, _, frac = mantissa.lstrip("-").partition(".")
        if int_part.strip("0"):
            exp10 = len(int_part.lstrip("0")) - 1
            digits = (int_part.lstrip("0") + frac).rstrip("0")
        else:
            stripped = frac.lstrip("0")
            exp10 = -(len(frac) - len(stripped)) - 1
            digits = stripped.rstrip("0")
    digits = digits or "0"
    sign = "-" if d < 0 else ""
    if exp10 < -4 or exp10 >= 21:
        m = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{m}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    if exp10 >= len(digits) - 1:
        return sign + digits + "0" * (exp10 - len(digits) + 1)
    if exp10 >= 0:
        return sign + digits[: exp10 + 1] + "." + digits[exp10 + 1 :]
    return sign + "0." + "0" * (-exp10 - 1) + digits


class FormatError(EvalError):
    pass


def _type_name(v: Any) -> str:
    return runtime_type(v).name


def _fixed(value: float, precision: int) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    return f"{value:,.{precision}f}"


def _scientific(value: float, precision: int) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    text = f"{value:.{precision}e}"
    mantissa, _, exp = text.partition("e")
    n = int(exp)
    digits = f"{abs(n):02d}"
    return f"{mantissa}\u202f×\u202f10{('-' if n < 0 else '').translate(_SUPERSCRIPT)}{digits.translate(_SUPERSCRIPT)}"


def _as_string(v: Any) -> str:
    """``%s``: a value's string conversion (lists and maps in CEL literal syntax)."""
    t = type(v)
    if isinstance(v, list | tuple):
        return _format_list(v)
    if isinstance(v, dict):
        return _format_map(v)
    if t is bool:
        return "true" if v else "false"
    if t is int or t is UInt:
        return str(int(v))
    if t is float:
        return format_double(v)
    if t is str:
        return v
    if t is bytes:
        return v.decode("utf-8", "replace")
    if v is None:
        return "null"
    if t is Type:
        return v.name
    as_text = getattr(v, "cel_string", None)
    if as_text is not None and t in LIBRARY_TYPES and LIBRARY_TYPES[t].name.startswith("google.protobuf."):
        return str(as_text())
    raise FormatError(
        "error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given "
        + _type_name(v)
    )


def _member(v: Any) -> str:
    """A list or map member: strings and bytes quoted, doubles fixed-point, times as calls."""
    t = type(v)
    if t is float:
        text = f"{v:.{DEFAULT_PRECISION}f}" if math.isfinite(v) else ("NaN" if math.isnan(v) else ("+Inf" if v > 0 else "-Inf"))
        return text if math.isfinite(v) else go_quote(text)
    if t is str:
        return go_quote(v)
    if t is bytes:
        return "b" + go_quote(v.decode("utf-8", "replace"))
    if t in LIBRARY_TYPES and LIBRARY_TYPES[t].name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
        kind = "timestamp" if LIBRARY_TYPES[t].name.endswith("Timestamp") else "duration"
        return f"{kind}({go_quote(v.cel_string())})"
    if t is Type:
        return f"type({v.name})"
    return _as_string(v)


def _format_list(items: Any) -> str:
    return "[" + ", ".join(_member(x) for x in items) + "]"


def _format_map(m: dict[Any, Any]) -> str:
    pairs = []
    for k, v in m.items():
        key = from_key(k)
        if type(key) not in (str, bool, int, UInt):
            raise FormatError(f"error during formatting: no formatting function for map key of type {_type_name(key)}")
        pairs.append((_member(key), _member(v)))
    pairs.sort(key=lambda p: p[0])
    return "{" + ", ".join(f"{k}:{v}" for k, v in pairs) + "}"


def _clause(kind: str, v: Any, precision: int | None) -> str:
    t = type(v)
    if kind == "s":
        return _as_string(v)
    if kind == "d":
        if t is int or t is UInt:
            return str(int(v))
        raise FormatError(f"error during formatting: decimal clause can only be used on integers, was given {_type_name(v)}")
    if kind in ("f", "e"):
        special = t is str and v in ("NaN", "Infinity", "-Infinity")
        if t is not float and not special:
            what = "fixed-point" if kind == "f" else "scientific"
            raise FormatError(f"error during formatting: {what} clause can only be used on doubles, was given {_type_name(v)}")
        value = float(v.replace("Infinity", "inf")) if special else v
        p = DEFAULT_PRECISION if precision is None else precision
        return _fixed(value, p) if kind == "f" else _scientific(value, p)
    if kind == "b":
        if t is int or t is UInt:
            return format(int(v), "b")
        if t is bool:
            return "1" if v else "0"
        raise FormatError(f"error during formatting: only integers and bools can be formatted as binary, was given {_type_name(v)}")
    if kind in ("x", "X"):
        if t is int or t is UInt:
            out = format(int(v), "x")
        elif t is str:
            out = v.encode().hex()
        elif t is bytes:
            out = v.hex()
        else:
            raise FormatError(
                f"error during formatting: only integers, byte buffers, and strings can be formatted as hex, was given {_type_name(v)}"
            )
        return out.upper() if kind == "X" else out
    if kind == "o":
        if t is int or t is UInt:
            return format(int(v), "o")
        raise FormatError(f"error during formatting: octal clause can only be used on integers, was given {_type_name(v)}")
    raise FormatError(f'could not parse formatting clause: unrecognized formatting clause "{kind}"')


def _walk_format(fmt: str, count: int, clause: Callable[[str, int, int | None], str], static: bool = False) -> tuple[str, int]:
    """Parse a format string, calling ``clause(kind, argument index, precision)`` per clause;
    returns the output and how many arguments were used."""
    out: list[str] = []
    i = 0
    arg_index = 0
    n = len(fmt)
    while i < n:
        ch = fmt[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        if i + 1 < n and fmt[i + 1] == "%":
            out.append("%")
            i += 2
            continue
        # Evaluation fetches the argument first; the compile-time check only counts it.
        if arg_index >= count and not static:
            raise FormatError(f"index {arg_index} out of range")
        if i + 1 >= n:
            raise FormatError("unexpected end of string")
        if arg_index >= count:
            raise FormatError(f"index {arg_index} out of range")
        j = i + 1
        precision: int | None = None
        if fmt[j] == ".":
            j += 1
            start = j
            while j < n and fmt[j].isascii() and fmt[j].isdigit():
                j += 1
            if j >= n:
                raise FormatError(
                    "could not parse formatting clause: error while parsing precision: could not find end of precision specifier"
                )
            try:
                precision = int(fmt[start:j])
            except ValueError:
                raise FormatError(
                    'could not parse formatting clause: error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing "": invalid syntax'
                ) from None
        if fmt[j] not in "sdfebxXo":
            raise FormatError(f'could not parse formatting clause: unrecognized formatting clause "{fmt[j]}"')
        out.append(clause(fmt[j], arg_index, precision))
        i = j + 1
        arg_index += 1
    return "".join(out), arg_index


def string_format(fmt: str, args: list[Any]) -> str:
    return _walk_format(fmt, len(args), lambda kind, index, precision: _clause(kind, args[index], precision))[0]


# Types each clause accepts at compile time (the format validator of cel-go's strings extension).
_CLAUSE_KINDS = {
    "d": ({INT_K, UINT_K}, "decimal clause can only be used on integers, was given {}"),
    "f": ({DOUBLE_K, STRING_K}, "fixed-point clause can only be used on doubles, was given {}"),
    "e": ({DOUBLE_K, STRING_K}, "scientific clause can only be used on doubles, was given {}"),
    "b": ({INT_K, UINT_K, BOOL_K}, "only integers and bools can be formatted as binary, was given {}"),
    "x": ({INT_K, UINT_K, STRING_K, BYTES_K}, "only integers, byte buffers, and strings can be formatted as hex, was given {}"),
    "X": ({INT_K, UINT_K, STRING_K, BYTES_K}, "only integers, byte buffers, and strings can be formatted as hex, was given {}"),
    "o": ({INT_K, UINT_K}, "octal clause can only be used on integers, was given {}"),
}
_STRING_KINDS = {LIST_K, MAP_K, INT_K, UINT_K, DOUBLE_K, BOOL_K, STRING_K, TIMESTAMP_K, BYTES_K, DURATION_K, TYPE_K, NULL_K}
_STRING_CLAUSE = (
    "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given {}"
)


class _StaticFormatError(FormatError):
    def __init__(self, expr_id: int, message: str) -> None:
        super().__init__(message)
        self.expr_id = expr_id


def check_format_call(fmt: str, args: list[Expr], type_of: Callable[[Expr], Type]) -> tuple[int | None, str] | None:
    """Compile-time check of ``"literal".format([literal list])``: the expression id to blame
    (None: the call) and cel-go's message, or None when the call is fine."""

    def kind_of(e: Expr) -> int:
        return type_of(e).kind

    def verify_string(e: Expr) -> None:
        k = kind_of(e)
        if k != DYN_K and k not in _STRING_KINDS:
            raise _StaticFormatError(e.id, "error during formatting: " + _STRING_CLAUSE.format(type_of(e).name))
        if isinstance(e, CreateList):
            for x in e.elements:
                verify_string(x)
        elif isinstance(e, CreateMap):
            for en in e.entries:
                verify_string(en.key)
                verify_string(en.value)

    def clause(kind: str, index: int, precision: int | None) -> str:
        arg = args[index]
        if kind == "s":
            verify_string(arg)
            return ""
        allowed, message = _CLAUSE_KINDS[kind]
        k = kind_of(arg)
        if k != DYN_K and k not in allowed:
            raise _StaticFormatError(arg.id, "error during formatting: " + message.format(type_of(arg).name))
        return ""

    try:
        _, used = _walk_format(fmt, len(args), clause, static=True)
    except _StaticFormatError as exc:
        return exc.expr_id, str(exc)
    except FormatError as exc:
        return None, str(exc)
    if len(args) > used:
        return None, f"too many arguments supplied to string.format (expected {used}, got {len(args)})"
    return None
