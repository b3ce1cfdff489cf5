"""The CEL standard library and the cel-go extensions Kubernetes enables, as declarations with
implementations and runtime costs.

Each function is declared with cel-go's overload ids (the cost rules key on them). The
implementations take evaluated arguments (receiver first) and raise ``EvalError``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from functools import cmp_to_key
from typing import Any

from kube.cel.checker import Function, Overload
from kube.cel.cost import ONE, AstNode, CallEstimate, Estimate, fixed, literal_uint
from kube.cel.format import format_double, string_format
from kube.cel.regex import compile_regex
from kube.cel.types import (
    BOOL,
    BYTES,
    DOUBLE,
    DURATION,
    DYN,
    INT,
    INT64_MAX,
    INT64_MIN,
    NULL,
    OPTIONAL_NONE,
    STRING,
    TIMESTAMP,
    TYPE,
    UINT,
    UINT64_MAX,
    EvalError,
    Optional,
    Type,
    UInt,
    check_int,
    check_uint,
    compare,
    equals,
    from_key,
    list_of,
    map_key,
    map_of,
    no_such_overload,
    optional_of,
    param,
    runtime_type,
    size_of,
    type_of,
)
from kube.cel.types import LIST as LIST_T
from kube.cel.types import MAP as MAP_T

A, B = param("A"), param("B")
K, V, T = param("K"), param("V"), param("T")
LIST_A = list_of(A)
MAP_AB = map_of(A, B)

# --- small helpers ------------------------------------------------------------------------------


def fn(name: str, *overloads: Overload) -> Function:
    return Function(name, list(overloads))


def ov(id: str, args: Iterable[Type], result: Type, impl: Callable[..., Any] | None = None, member: bool = False) -> Overload:
    return Overload(id, tuple(args), result, member, impl)


def _expect(cond: bool, name: str, *values: Any) -> None:
    if not cond:
        raise no_such_overload(name, *values)


# --- Go-compatible text conversions ------------------------------------------------------------


_GO_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_GO_FLOAT_RE = re.compile(
    r"[+-]?(?:(?:[0-9]+(?:_[0-9]+)*)?\.?[0-9]*(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan|0[xX][0-9a-fA-F.]+[pP][+-]?[0-9]+)\Z",
    re.IGNORECASE,
)


def go_parse_int(text: str) -> int | None:
    return int(text) if _GO_INT_RE.match(text) else None


def go_parse_float(text: str) -> float | None:
    if not text or not _GO_FLOAT_RE.match(text) or text in ("+", "-", ".", "+.", "-.") or "_" in text:
        return None
    try:
        if "x" in text.lower() and "inf" not in text.lower():
            return float.fromhex(text)
        return float(text)
    except ValueError:
        return None


_GO_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
             "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}  # fmt: skip


# --- arithmetic ---------------------------------------------------------------------------------


def _int_div(a: int, b: int) -> int:
    if b == 0:
        raise EvalError("division by zero")
    if a == INT64_MIN and b == -1:
        raise EvalError("integer overflow")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _int_mod(a: int, b: int) -> int:
    if b == 0:
        raise EvalError("modulus by zero")
    if a == INT64_MIN and b == -1:
        raise EvalError("integer overflow")
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def _uint_div(a: int, b: int) -> UInt:
    if b == 0:
        raise EvalError("division by zero")
    return UInt(a // b)


def _uint_mod(a: int, b: int) -> UInt:
    if b == 0:
        raise EvalError("modulus by zero")
    return UInt(a % b)


def _double_div(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1, b)


def _double_mul(a: float, b: float) -> float:
    return a * b


def _negate_int(a: int) -> int:
    if a == INT64_MIN:
        raise EvalError("integer overflow")
    return -a


# --- conversions ---------------------------------------------------------------------------------


def _double_to_int(v: float) -> int:
    if math.isinf(v) or math.isnan(v) or v <= -(2.0**63) or v >= 2.0**63:
        raise EvalError("integer overflow")
    return int(v)


def _double_to_uint(v: float) -> UInt:
    if math.isinf(v) or math.isnan(v) or v < 0 or v >= 2.0**64:
        raise EvalError("unsigned integer overflow")
    return UInt(int(v))


def _string_to(target: str) -> Callable[[str], Any]:
    def convert(s: str) -> Any:
        if target == "int":
            v = go_parse_int(s)
            if v is not None and INT64_MIN <= v <= INT64_MAX:
                return v
        elif target == "uint":
            v = go_parse_int(s) if not s.startswith(("-", "+")) else None
            if v is not None and 0 <= v <= UINT64_MAX:
                return UInt(v)
        elif target == "double":
            f = go_parse_float(s)
            if f is not None:
                return f
        elif target == "bool" and s in _GO_BOOLS:
            return _GO_BOOLS[s]
        raise EvalError(f"type conversion error from 'string' to '{target}'")

    return convert


def _bytes_to_string(b: bytes) -> str:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        raise EvalError("invalid UTF-8 in bytes, cannot convert to string") from None


def _type_of(v: Any) -> Type:
    return runtime_type(v)


# --- collections --------------------------------------------------------------------------------


def index_value(obj: Any, key: Any) -> Any:
    """``obj[key]`` for lists and maps (maps answer numerically equal keys)."""
    if isinstance(obj, dict):
        k = map_key(key)
        try:
            return obj[k]
        except KeyError:
            pass
        except TypeError:
            raise EvalError(f"unsupported key type: {type(key).__name__}") from None
        if type(key) is float and key.is_integer():
            for candidate in (int(key), UInt(int(key)) if key >= 0 else None):
                if candidate is not None and candidate in obj:
                    return obj[candidate]
        getter = getattr(obj, "cel_missing", None)
        if getter is not None:
            return getter(key)
        raise EvalError(f"no such key: {_key_text(key)}")
    if isinstance(obj, list | tuple):
        i = _list_index(key)
        if not 0 <= i < len(obj):
            raise EvalError(f"index '{i}' out of range in list size '{len(obj)}'")
        return obj[i]
    raise no_such_overload("_[_]", obj, key)


def _key_text(key: Any) -> str:
    if key is True or key is False:
        return "true" if key else "false"
    return str(key)


def _list_index(key: Any) -> int:
    t = type(key)
    if t is int or t is UInt:
        return int(key)
    if t is float:
        if key.is_integer():
            return int(key)
        raise EvalError(f"unsupported index value {format_double(key)} in list")
    raise EvalError(f"unsupported index type '{runtime_type(key).name}' in list")


def has_key(obj: Any, key: Any) -> bool:
    if isinstance(obj, dict):
        try:
            if map_key(key) in obj:
                return True
        except TypeError:
            return False
        if type(key) is float and key.is_integer():
            return int(key) in obj or (key >= 0 and UInt(int(key)) in obj)
        return False
    raise no_such_overload("@in", key, obj)


def in_list(v: Any, lst: list[Any]) -> bool:
    return any(equals(v, x) for x in lst)


def _add_list(a: list[Any], b: list[Any]) -> list[Any]:
    return [*a, *b]


def _size(v: Any) -> int:
    t = type(v)
    if t is str or t is bytes or isinstance(v, list | tuple | dict):
        return len(v)
    raise no_such_overload("size", v)


# --- strings ------------------------------------------------------------------------------------


def _matches(s: str, pattern: str) -> bool:
    return compile_regex(pattern).search(s) is not None


def _char_at(s: str, i: int) -> str:
    if i < 0 or i > len(s):
        raise EvalError(f"index out of range: {i}")
    return s[i : i + 1]


def _offset_answer(s: str, sub: str, offset: int) -> int | None:
    """What indexOf/lastIndexOf answer without searching: an error for a negative offset, the
    offset itself (at most the length) for an empty needle, -1 past the end."""
    if offset < 0:
        raise EvalError(f"index out of range: {offset}")
    if sub == "":
        return min(offset, len(s))
    if offset >= len(s):
        return -1
    return None


def _index_of(s: str, sub: str, offset: int = 0) -> int:
    early = _offset_answer(s, sub, offset)
    return early if early is not None else s.find(sub, offset)


def _last_index_of(s: str, sub: str, offset: int | None = None) -> int:
    if offset is None:
        return len(s) if sub == "" else s.rfind(sub)
    early = _offset_answer(s, sub, offset)
    return early if early is not None else s.rfind(sub, 0, offset + len(sub))


def _ascii_case(upper: bool) -> Callable[[str], str]:
    table = {c: c + (-32 if upper else 32) for c in (range(97, 123) if upper else range(65, 91))}
    return lambda s: s.translate(table)


def _go_replace(s: str, old: str, new: str, n: int = -1) -> str:
    if n < 0:
        n = -1
    if old == "":
        # Go inserts the replacement before every code point and at the end.
        out = []
        count = 0
        for ch in s:
            if n != -1 and count >= n:
                out.append(ch)
                continue
            out.append(new + ch)
            count += 1
        result = "".join(out)
        if n == -1 or count < n:
            result += new
        return result
    return s.replace(old, new, n)


def _go_split(s: str, sep: str, n: int = -1) -> list[str]:
    if n == 0:
        return []
    if sep == "":
        parts = list(s)
        if n > 0 and len(parts) > n:
            parts = [*parts[: n - 1], "".join(parts[n - 1 :])]
        return parts
    return s.split(sep, n - 1 if n > 0 else -1)


def _substring(s: str, start: int, end: int | None = None) -> str:
    if end is None:
        if start < 0 or start > len(s):
            raise EvalError(f"index out of range: {start}")
        return s[start:]
    if start > end:
        raise EvalError(f"invalid substring range. start: {start}, end: {end}")
    if start < 0 or start > len(s):
        raise EvalError(f"index out of range: {start}")
    if end < 0 or end > len(s):
        raise EvalError(f"index out of range: {end}")
    return s[start:end]


_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def _trim(s: str) -> str:
    return s.strip(_GO_SPACE)


def _join(lst: list[Any], sep: str = "") -> str:
    for x in lst:
        if type(x) is not str:
            raise EvalError(f"join: invalid input: {x}")
    return sep.join(lst)


_QUOTE_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v", "\\": "\\\\", '"': '\\"'}


def quote(s: str) -> str:
    return '"' + "".join(_QUOTE_ESCAPES.get(c, c) for c in s) + '"'


# --- lists extension ---------------------------------------------------------------------------


def _slice(lst: list[Any], start: int, end: int) -> list[Any]:
    if start < 0 or end < 0:
        raise EvalError(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        raise EvalError(f"cannot slice({start}, {end}), start index must be less than or equal to end index")
    if len(lst) < end:
        raise EvalError(f"cannot slice({start}, {end}), list is length {len(lst)}")
    return list(lst[start:end])


def _flatten(lst: list[Any] | tuple[Any, ...], depth: int = 1) -> list[Any]:
    if depth < 0:
        raise EvalError("level must be non-negative")
    out: list[Any] = []
    for x in lst:
        if isinstance(x, list | tuple) and depth > 0:
            out.extend(_flatten(x, depth - 1))
        else:
            out.append(x)
    return out


def _sort_by_keys(lst: list[Any], keys: list[Any]) -> list[Any]:
    if len(lst) != len(keys):
        raise EvalError(
            f"@sortByAssociatedKeys() expected a list of the same size as the associated keys list, but got {len(lst)} and {len(keys)} elements respectively"
        )
    if not lst:
        return list(lst)
    first = type(keys[0])
    if any(type(k) is not first for k in keys):
        raise EvalError("list elements must have the same type")

    def by_key(i: int, j: int) -> int:
        return compare(keys[i], keys[j], "sort")

    order: list[int] = sorted(range(len(lst)), key=cmp_to_key(by_key))
    return [lst[i] for i in order]


def _lists_range(n: int) -> list[int]:
    return list(range(n)) if n > 0 else []


def _distinct(lst: list[Any]) -> list[Any]:
    out: list[Any] = []
    for x in lst:
        if not any(equals(x, y) for y in out):
            out.append(x)
    return out


# --- optional -----------------------------------------------------------------------------------


def _opt_value(o: Optional) -> Any:
    if not o.present:
        raise EvalError("optional.none() dereference")
    return o.value


def _is_zero(v: Any) -> bool:
    if v is None or v is False:
        return True
    t = type(v)
    if t in (int, UInt, float):
        return bool(v == 0)
    if t in (str, bytes, list, tuple, dict) or isinstance(v, dict | list):
        return len(v) == 0
    zero = getattr(v, "cel_is_zero", None)
    return bool(zero()) if zero is not None else False


def _of_non_zero(v: Any) -> Optional:
    return OPTIONAL_NONE if _is_zero(v) else Optional(True, v)


def _unwrap_opt(lst: list[Any]) -> list[Any]:
    out = []
    for x in lst:
        if type(x) is not Optional:
            raise EvalError(f"value {x} is not optional")
        if x.present:
            out.append(x.value)
    return out


def opt_index(obj: Any, key: Any) -> Optional:
    if type(obj) is Optional:
        if not obj.present:
            return obj
        obj = obj.value
    if isinstance(obj, dict):
        if has_key(obj, key):
            return Optional(True, index_value(obj, key))
        return OPTIONAL_NONE
    if isinstance(obj, list | tuple):
        i = _list_index(key)
        return Optional(True, obj[i]) if 0 <= i < len(obj) else OPTIONAL_NONE
    raise no_such_overload("_[?_]", obj, key)


def map_insert(m: dict[Any, Any], k: Any, v: Any = None, *rest: Any) -> dict[Any, Any]:
    """``cel.@mapInsert``: (map, key, value) or (map, map); duplicate keys are errors."""
    updates = [(k, v)] if not (isinstance(k, dict) and v is None and not rest) else [(from_key(x), y) for x, y in k.items()]
    out = dict(m)
    for key, value in updates:
        if has_key(out, key):
            raise EvalError(f"insert failed: key {_key_text(key)} already exists")
        out[map_key(key)] = value
    return out


# --- sets extension -----------------------------------------------------------------------------


def _sets_contains(a: list[Any], b: list[Any]) -> bool:
    return all(in_list(x, a) for x in b)


def _sets_intersects(a: list[Any], b: list[Any]) -> bool:
    return any(in_list(x, b) for x in a)


def _sets_equivalent(a: list[Any], b: list[Any]) -> bool:
    return _sets_contains(a, b) and _sets_contains(b, a)


# --- declarations -------------------------------------------------------------------------------

_NUMERIC = {"int64": INT, "uint64": UINT, "double": DOUBLE}
_ORDERED = [
    ("bool", BOOL),
    ("int64", INT),
    ("uint64", UINT),
    ("double", DOUBLE),
    ("string", STRING),
    ("bytes", BYTES),
    ("timestamp", TIMESTAMP),
    ("duration", DURATION),
]
_RELATIONS = {
    "less": ("_<_", lambda c: c < 0),
    "less_equals": ("_<=_", lambda c: c <= 0),
    "greater": ("_>_", lambda c: c > 0),
    "greater_equals": ("_>=_", lambda c: c >= 0),
}


def _relation(name: str, test: Callable[[int], bool]) -> Callable[[Any, Any], bool]:
    return lambda a, b: test(compare(a, b, name))


def standard_library(cross_type_numeric: bool = True) -> list[Function]:
    """CEL's standard functions and operators (timestamps and durations are in ``kube.cel.time``)."""
    out: list[Function] = [
        fn("_?_:_", ov("conditional", (BOOL, A, A), A)),
        fn("_&&_", ov("logical_and", (BOOL, BOOL), BOOL)),
        fn("_||_", ov("logical_or", (BOOL, BOOL), BOOL)),
        fn("!_", ov("logical_not", (BOOL,), BOOL, lambda a: not a)),
        fn("@not_strictly_false", ov("not_strictly_false", (BOOL,), BOOL)),
        fn("__not_strictly_false__", ov("__not_strictly_false__", (BOOL,), BOOL)),
        fn("_==_", ov("equals", (A, A), BOOL, equals)),
        fn("_!=_", ov("not_equals", (A, A), BOOL, lambda a, b: not equals(a, b))),
        fn(
            "_+_",
            ov("add_bytes", (BYTES, BYTES), BYTES, lambda a, b: a + b),
            ov("add_double", (DOUBLE, DOUBLE), DOUBLE, lambda a, b: a + b),
            ov("add_int64", (INT, INT), INT, lambda a, b: check_int(a + b)),
            ov("add_list", (LIST_A, LIST_A), LIST_A, _add_list),
            ov("add_string", (STRING, STRING), STRING, lambda a, b: a + b),
            ov("add_uint64", (UINT, UINT), UINT, lambda a, b: check_uint(a + b)),
        ),
        fn(
            "_-_",
            ov("subtract_double", (DOUBLE, DOUBLE), DOUBLE, lambda a, b: a - b),
            ov("subtract_int64", (INT, INT), INT, lambda a, b: check_int(a - b)),
            ov("subtract_uint64", (UINT, UINT), UINT, lambda a, b: check_uint(a - b)),
        ),
        fn(
            "_*_",
            ov("multiply_double", (DOUBLE, DOUBLE), DOUBLE, _double_mul),
            ov("multiply_int64", (INT, INT), INT, lambda a, b: check_int(a * b)),
            ov("multiply_uint64", (UINT, UINT), UINT, lambda a, b: check_uint(a * b)),
        ),
        fn(
            "_/_",
            ov("divide_double", (DOUBLE, DOUBLE), DOUBLE, _double_div),
            ov("divide_int64", (INT, INT), INT, _int_div),
            ov("divide_uint64", (UINT, UINT), UINT, _uint_div),
        ),
        fn("_%_", ov("modulo_int64", (INT, INT), INT, _int_mod), ov("modulo_uint64", (UINT, UINT), UINT, _uint_mod)),
        fn("-_", ov("negate_double", (DOUBLE,), DOUBLE, lambda a: -a), ov("negate_int64", (INT,), INT, _negate_int)),
        fn("_[_]", ov("index_list", (LIST_A, INT), A, index_value), ov("index_map", (MAP_AB, A), B, index_value)),
        fn("@in", ov("in_list", (A, LIST_A), BOOL, in_list), ov("in_map", (A, MAP_AB), BOOL, lambda k, m: has_key(m, k))),
        fn(
            "size",
            ov("size_bytes", (BYTES,), INT, _size),
            ov("bytes_size", (BYTES,), INT, _size, member=True),
            ov("size_list", (LIST_A,), INT, _size),
            ov("list_size", (LIST_A,), INT, _size, member=True),
            ov("size_map", (MAP_AB,), INT, _size),
            ov("map_size", (MAP_AB,), INT, _size, member=True),
            ov("size_string", (STRING,), INT, _size),
            ov("string_size", (STRING,), INT, _size, member=True),
        ),
        fn("type", ov("type", (A,), type_of(A), _type_of)),
        fn("bool", ov("bool_to_bool", (BOOL,), BOOL, lambda v: v), ov("string_to_bool", (STRING,), BOOL, _string_to("bool"))),
        fn("bytes", ov("bytes_to_bytes", (BYTES,), BYTES, lambda v: v), ov("string_to_bytes", (STRING,), BYTES, lambda s: s.encode())),
        fn(
            "double",
            ov("double_to_double", (DOUBLE,), DOUBLE, lambda v: v),
            ov("int64_to_double", (INT,), DOUBLE, float),
            ov("string_to_double", (STRING,), DOUBLE, _string_to("double")),
            ov("uint64_to_double", (UINT,), DOUBLE, float),
        ),
        fn("dyn", ov("to_dyn", (A,), DYN, lambda v: v)),
        fn(
            "int",
            ov("int64_to_int64", (INT,), INT, lambda v: v),
            ov("double_to_int64", (DOUBLE,), INT, _double_to_int),
            ov("string_to_int64", (STRING,), INT, _string_to("int")),
            ov("uint64_to_int64", (UINT,), INT, lambda v: check_int(int(v))),
        ),
        fn(
            "string",
            ov("string_to_string", (STRING,), STRING, lambda v: v),
            ov("bool_to_string", (BOOL,), STRING, lambda v: "true" if v else "false"),
            ov("bytes_to_string", (BYTES,), STRING, _bytes_to_string),
            ov("double_to_string", (DOUBLE,), STRING, format_double),
            ov("int64_to_string", (INT,), STRING, str),
            ov("uint64_to_string", (UINT,), STRING, lambda v: str(int(v))),
        ),
        fn(
            "uint",
            ov("uint64_to_uint64", (UINT,), UINT, lambda v: v),
            ov("double_to_uint64", (DOUBLE,), UINT, _double_to_uint),
            ov("int64_to_uint64", (INT,), UINT, check_uint),
            ov("string_to_uint64", (STRING,), UINT, _string_to("uint")),
        ),
        fn("contains", ov("contains_string", (STRING, STRING), BOOL, lambda s, x: x in s, member=True)),
        fn("endsWith", ov("ends_with_string", (STRING, STRING), BOOL, lambda s, x: s.endswith(x), member=True)),
        fn("startsWith", ov("starts_with_string", (STRING, STRING), BOOL, lambda s, x: s.startswith(x), member=True)),
        fn("matches", ov("matches", (STRING, STRING), BOOL, _matches), ov("matches_string", (STRING, STRING), BOOL, _matches, member=True)),
    ]
    for rel, (op, test) in _RELATIONS.items():
        overloads = []
        for tname, t in _ORDERED:
            if t in (TIMESTAMP, DURATION):
                continue
            overloads.append(ov(f"{rel}_{tname}", (t, t), BOOL, _relation(op, test)))
        if cross_type_numeric:
            for (an, at), (bn, bt) in [(a, b) for a in _NUMERIC.items() for b in _NUMERIC.items() if a[0] != b[0]]:
                overloads.append(ov(f"{rel}_{an}_{bn}", (at, bt), BOOL, _relation(op, test)))
        out.append(Function(op, overloads))
    return out


def strings_extension(version: int = 2) -> list[Function]:
    """cel-go's string extension (Kubernetes enables version 2)."""
    out = [
        fn("charAt", ov("string_char_at_int", (STRING, INT), STRING, _char_at, member=True)),
        fn(
            "indexOf",
            ov("string_index_of_string", (STRING, STRING), INT, _index_of, member=True),
            ov("string_index_of_string_int", (STRING, STRING, INT), INT, _index_of, member=True),
        ),
        fn(
            "lastIndexOf",
            ov("string_last_index_of_string", (STRING, STRING), INT, _last_index_of, member=True),
            ov("string_last_index_of_string_int", (STRING, STRING, INT), INT, _last_index_of, member=True),
        ),
        fn("lowerAscii", ov("string_lower_ascii", (STRING,), STRING, _ascii_case(False), member=True)),
        fn(
            "replace",
            ov("string_replace_string_string", (STRING, STRING, STRING), STRING, _go_replace, member=True),
            ov("string_replace_string_string_int", (STRING, STRING, STRING, INT), STRING, _go_replace, member=True),
        ),
        fn(
            "split",
            ov("string_split_string", (STRING, STRING), list_of(STRING), _go_split, member=True),
            ov("string_split_string_int", (STRING, STRING, INT), list_of(STRING), _go_split, member=True),
        ),
        fn(
            "substring",
            ov("string_substring_int", (STRING, INT), STRING, _substring, member=True),
            ov("string_substring_int_int", (STRING, INT, INT), STRING, _substring, member=True),
        ),
        fn("trim", ov("string_trim", (STRING,), STRING, _trim, member=True)),
        fn("upperAscii", ov("string_upper_ascii", (STRING,), STRING, _ascii_case(True), member=True)),
    ]
    if version >= 1:
        out.append(fn("format", ov("string_format", (STRING, list_of(DYN)), STRING, string_format, member=True)))
        out.append(fn("strings.quote", ov("strings_quote", (STRING,), STRING, quote)))
    if version >= 2:
        out.append(
            fn(
                "join",
                ov("list_join", (list_of(STRING),), STRING, _join, member=True),
                ov("list_join_string", (list_of(STRING), STRING), STRING, _join, member=True),
            )
        )
    if version >= 3:
        out.append(fn("reverse", ov("string_reverse", (STRING,), STRING, lambda s: s[::-1], member=True)))
    return out


def sets_extension() -> list[Function]:
    lt = list_of(T)
    return [
        fn("sets.contains", ov("list_sets_contains_list", (lt, lt), BOOL, _sets_contains)),
        fn("sets.equivalent", ov("list_sets_equivalent_list", (lt, lt), BOOL, _sets_equivalent)),
        fn("sets.intersects", ov("list_sets_intersects_list", (lt, lt), BOOL, _sets_intersects)),
    ]


COMPARABLE_TYPES = [
    ("int", INT),
    ("uint", UINT),
    ("double", DOUBLE),
    ("bool", BOOL),
    ("duration", DURATION),
    ("timestamp", TIMESTAMP),
    ("string", STRING),
    ("bytes", BYTES),
]


def lists_extension(version: int = 3) -> list[Function]:
    """cel-go's list extension (Kubernetes enables version 3)."""
    lt = list_of(T)
    out = [fn("slice", ov("list_slice", (lt, INT, INT), lt, _slice, member=True))]
    if version >= 1:
        out.append(
            fn(
                "flatten",
                ov("list_flatten", (list_of(lt),), lt, _flatten, member=True),
                ov("list_flatten_int", (list_of(DYN), INT), list_of(DYN), _flatten, member=True),
            )
        )
    if version >= 2:
        out.append(
            fn(
                "sort",
                *[
                    ov(f"list_{n}_sort", (list_of(t),), list_of(t), lambda lst: _sort_by_keys(lst, lst), member=True)
                    for n, t in COMPARABLE_TYPES
                ],
            )
        )
        out.append(
            fn(
                "@sortByAssociatedKeys",
                *[ov(f"list_{n}_sortByAssociatedKeys", (lt, list_of(t)), lt, _sort_by_keys, member=True) for n, t in COMPARABLE_TYPES],
            )
        )
        out.append(fn("lists.range", ov("lists_range", (INT,), list_of(INT), _lists_range)))
        out.append(fn("reverse", ov("list_reverse", (lt,), lt, lambda lst: list(reversed(lst)), member=True)))
        out.append(fn("distinct", ov("list_distinct", (lt,), lt, _distinct, member=True)))
    return out


def optional_library() -> list[Function]:
    ov_v = optional_of(V)
    return [
        fn("optional.of", ov("optional_of", (V,), ov_v, lambda v: Optional(True, v))),
        fn("optional.ofNonZeroValue", ov("optional_ofNonZeroValue", (V,), ov_v, _of_non_zero)),
        fn("optional.none", ov("optional_none", (), ov_v, lambda: OPTIONAL_NONE)),
        fn("value", ov("optional_value", (ov_v,), V, _opt_value, member=True)),
        fn("hasValue", ov("optional_hasValue", (ov_v,), BOOL, lambda o: o.present, member=True)),
        fn("or", ov("optional_or_optional", (ov_v, ov_v), ov_v, lambda a, b: a if a.present else b, member=True)),
        fn("orValue", ov("optional_orValue_value", (ov_v, V), V, lambda a, b: a.value if a.present else b, member=True)),
        fn("_?._", ov("select_optional_field", (DYN, STRING), ov_v)),
        fn(
            "_[?_]",
            ov("list_optindex_optional_int", (list_of(V), INT), ov_v, opt_index),
            ov("optional_list_optindex_optional_int", (optional_of(list_of(V)), INT), ov_v, opt_index),
            ov("map_optindex_optional_value", (map_of(K, V), K), ov_v, opt_index),
            ov("optional_map_optindex_optional_value", (optional_of(map_of(K, V)), K), ov_v, opt_index),
        ),
        fn(
            "_[_]",
            ov("optional_list_index_int", (optional_of(list_of(V)), INT), ov_v, opt_index),
            ov("optional_map_index_value", (optional_of(map_of(K, V)), K), ov_v, opt_index),
        ),
        fn("last", ov("list_last", (list_of(V),), ov_v, lambda lst: Optional(True, lst[-1]) if lst else OPTIONAL_NONE, member=True)),
        fn("first", ov("list_first", (list_of(V),), ov_v, lambda lst: Optional(True, lst[0]) if lst else OPTIONAL_NONE, member=True)),
        fn("optional.unwrap", ov("optional_unwrap", (list_of(ov_v),), list_of(V), _unwrap_opt)),
        fn("unwrapOpt", ov("optional_unwrapOpt", (list_of(ov_v),), list_of(V), _unwrap_opt, member=True)),
    ]


def two_var_comprehension_library() -> list[Function]:
    mkv = map_of(K, V)
    return [
        fn(
            "cel.@mapInsert",
            ov("@mapInsert_map_key_value", (mkv, K, V), mkv, map_insert),
            ov("@mapInsert_map_map", (mkv, mkv), mkv, map_insert),
        )
    ]


# Type identifiers every environment knows (their type is type(T)).
STANDARD_TYPE_IDENTS: dict[str, Type] = {
    "bool": type_of(BOOL),
    "bytes": type_of(BYTES),
    "double": type_of(DOUBLE),
    "int": type_of(INT),
    "list": type_of(list_of(A)),
    "map": type_of(map_of(A, B)),
    "null_type": type_of(NULL),
    "string": type_of(STRING),
    "type": type_of(TYPE),
    "uint": type_of(UINT),
    "google.protobuf.Duration": type_of(DURATION),
    "google.protobuf.Timestamp": type_of(TIMESTAMP),
}
STANDARD_TYPE_VALUES: dict[str, Type] = {
    "bool": BOOL, "bytes": BYTES, "double": DOUBLE, "int": INT, "list": LIST_T, "map": MAP_T, "null_type": NULL,
    "string": STRING, "type": TYPE, "uint": UINT, "google.protobuf.Duration": DURATION, "google.protobuf.Timestamp": TIMESTAMP,
}  # fmt: skip

# --- runtime costs (cel-go's defaults, keyed by overload id) -------------------------------------

STRING_FACTOR = 0.1
REGEX_FACTOR = 0.25


def _ceil(x: float) -> int:
    return math.ceil(x)


RuntimeCost = Callable[[list[Any], Any], int]

DEFAULT_RUNTIME_COSTS: dict[str, RuntimeCost] = {}
for _id in ("starts_with_string", "ends_with_string", "string_to_bytes", "bytes_to_string", "strings_quote", "string_format"):
    DEFAULT_RUNTIME_COSTS[_id] = lambda args, result: _ceil(size_of(args[0]) * STRING_FACTOR)
DEFAULT_RUNTIME_COSTS["in_list"] = lambda args, result: size_of(args[1])
for _id in (
    "less_string", "greater_string", "less_equals_string", "greater_equals_string",
    "less_bytes", "greater_bytes", "less_equals_bytes", "greater_equals_bytes", "equals", "not_equals",
):  # fmt: skip
    DEFAULT_RUNTIME_COSTS[_id] = lambda args, result: _ceil(min(size_of(args[0]), size_of(args[1])) * STRING_FACTOR)
for _id in ("add_string", "add_bytes"):
    DEFAULT_RUNTIME_COSTS[_id] = lambda args, result: _ceil((size_of(args[0]) + size_of(args[1])) * STRING_FACTOR)
DEFAULT_RUNTIME_COSTS["matches_string"] = lambda args, result: (
    _ceil((1 + size_of(args[0])) * STRING_FACTOR) * _ceil(size_of(args[1]) * REGEX_FACTOR)
)
DEFAULT_RUNTIME_COSTS["contains_string"] = lambda args, result: (
    _ceil(size_of(args[0]) * STRING_FACTOR) * _ceil(size_of(args[1]) * STRING_FACTOR)
)


def _list_alloc(factor: float, size: int) -> int:
    return int(size * factor) + 1 + 10


def _self_compare(lst: list[Any]) -> int:
    n = len(lst)
    factor = 2.0
    if n and type(lst[0]) in (str, bytes):
        factor += STRING_FACTOR
    return _list_alloc(factor, n * n)


# Overload-specific runtime cost trackers (cel-go ext lists v3 and sets); they win over the
# environment's estimator.
EXTENSION_RUNTIME_COSTS: dict[str, RuntimeCost] = {
    "list_slice": lambda args, result: _list_alloc(1, size_of(result)),
    "list_flatten": lambda args, result: _list_alloc(1.0, size_of(args[0])),
    "list_flatten_int": lambda args, result: _list_alloc(float(args[1]), size_of(args[0])),
    "lists_range": lambda args, result: _list_alloc(1, size_of(result)),
    "list_reverse": lambda args, result: _list_alloc(1, size_of(result)),
    "list_distinct": lambda args, result: _self_compare(args[0]),
    "list_sets_contains_list": lambda args, result: 1 + int(size_of(args[0]) * size_of(args[1]) * 1.0),
    "list_sets_intersects_list": lambda args, result: 1 + int(size_of(args[0]) * size_of(args[1]) * 1.0),
    "list_sets_equivalent_list": lambda args, result: 1 + int(size_of(args[0]) * size_of(args[1]) * 2.0),
}
for _n, _t in COMPARABLE_TYPES:
    EXTENSION_RUNTIME_COSTS[f"list_{_n}_sort"] = lambda args, result: _self_compare(args[0])
    EXTENSION_RUNTIME_COSTS[f"list_{_n}_sortByAssociatedKeys"] = lambda args, result: _self_compare(args[1])

# Costs computable before the call from the arguments alone: checked first so that a call the
# limit forbids is never made (``lists.range(100000000)`` would otherwise allocate first).
PRECHECKED_RUNTIME_COSTS: dict[str, RuntimeCost] = {
    "lists_range": lambda args, result: _list_alloc(1, max(int(args[0]), 0)),
}

# --- cost estimators of the extensions (cel-go's, keyed by overload id) --------------------------

Sizer = Callable[[AstNode], Estimate]


def _alloc_list_estimate(factor: float, size: Estimate) -> CallEstimate:
    return CallEstimate(size.factor(factor) + ONE + fixed(10), size)


def _est_slice(fn_name: str, ov_id: str, target: AstNode | None, args: list[AstNode], size: Sizer) -> CallEstimate | None:
    if target is None or len(args) != 2:
        return None
    sz = size(target)
    start = literal_uint(args[0], 0)
    end = literal_uint(args[1], sz.max)
    return _alloc_list_estimate(1, fixed(max(end - start, 0) if end >= start else (end - start) % 2**64))


def _est_range(fn_name: str, ov_id: str, target: AstNode | None, args: list[AstNode], size: Sizer) -> CallEstimate | None:
    if target is not None or len(args) != 1:
        return None
    return _alloc_list_estimate(1, fixed(literal_uint(args[0], 2**64 - 1)))


def _est_reverse(fn_name: str, ov_id: str, target: AstNode | None, args: list[AstNode], size: Sizer) -> CallEstimate | None:
    if target is None or args:
        return None
    return _alloc_list_estimate(1, size(target))


def _est_flatten(fn_name: str, ov_id: str, target: AstNode | None, args: list[AstNode], size: Sizer) -> CallEstimate | None:
    if target is None or len(args) > 1:
        return None
    depth = literal_uint(args[0], 2**64 - 1) if args else 1
    return _alloc_list_estimate(float(depth), size(target))


def _est_distinct(fn_name: str, ov_id: str, target: AstNode | None, args: list[AstNode], size: Sizer) -> CallEstimate | None:
    if target is None or args:
        return None
    sz = size(target)
    return _alloc_list_estimate(2.0, sz * sz)


def _est_sort(elem: Type, by_keys: bool) -> Callable[..., CallEstimate | None]:
    def estimate(fn_name: str, ov_id: str, target: AstNode | None, args: list[AstNode], size: Sizer) -> CallEstimate | None:
        if target is None or len(args) != (1 if by_keys else 0):
            return None
        sz = size(args[0] if by_keys else target)
        factor = 2.0 + (STRING_FACTOR if elem in (STRING, BYTES) else 0)
        return _alloc_list_estimate(factor, sz * sz)

    return estimate


def _est_sets(factor: float) -> Callable[..., CallEstimate | None]:
    def estimate(fn_name: str, ov_id: str, target: AstNode | None, args: list[AstNode], size: Sizer) -> CallEstimate | None:
        if len(args) != 2:
            return None
        return CallEstimate((size(args[0]) * size(args[1])).factor(factor) + ONE)

    return estimate


EXTENSION_ESTIMATORS: dict[str, Callable[..., CallEstimate | None]] = {
    "list_slice": _est_slice,
    "list_flatten": _est_flatten,
    "list_flatten_int": _est_flatten,
    "lists_range": _est_range,
    "list_reverse": _est_reverse,
    "list_distinct": _est_distinct,
    "list_sets_contains_list": _est_sets(1),
    "list_sets_intersects_list": _est_sets(1),
    "list_sets_equivalent_list": _est_sets(2),
}
for _n, _t in COMPARABLE_TYPES:
    EXTENSION_ESTIMATORS[f"list_{_n}_sort"] = _est_sort(_t, False)
    EXTENSION_ESTIMATORS[f"list_{_n}_sortByAssociatedKeys"] = _est_sort(_t, True)
