"""CEL types and runtime values shared by the checker, the cost estimator and the evaluator.

Runtime values are plain Python objects where they fit: ``bool``, ``int`` (int64), ``UInt``,
``float``, ``str``, ``bytes``, ``None`` (null), ``list``, ``dict`` (map), plus ``Optional``,
``Type`` (type values) and the library value types registered in ``LIBRARY_TYPES``.
Map keys of type bool are stored as ``BoolKey`` so that ``true`` and ``1`` stay distinct keys.
"""

from __future__ import annotations

import math
from typing import Any

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1


class EvalError(Exception):
    """A CEL runtime error value: absorbed by ``&&``, ``||`` and the comprehension macros."""


class UInt(int):
    """CEL ``uint`` (Python has one int type)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


class BoolKey:
    """A bool map key: Python would otherwise merge ``true`` with ``1``."""

    __slots__ = ("value",)

    def __init__(self, value: bool) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BoolKey) and other.value is self.value

    def __hash__(self) -> int:
        return hash(("bool", self.value))

    def __repr__(self) -> str:
        return "true" if self.value else "false"


TRUE_KEY, FALSE_KEY = BoolKey(True), BoolKey(False)


def map_key(value: Any) -> Any:
    """The dict key for a CEL map key value."""
    if value is True:
        return TRUE_KEY
    if value is False:
        return FALSE_KEY
    return value


def from_key(key: Any) -> Any:
    return key.value if type(key) is BoolKey else key


class Optional:
    """CEL ``optional_type`` values."""

    __slots__ = ("present", "value")

    def __init__(self, present: bool, value: Any = None) -> None:
        self.present = present
        self.value = value

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.present else "optional.none()"


OPTIONAL_NONE = Optional(False)

# --- types -------------------------------------------------------------------------------------

# Kinds, as cel-go distinguishes them.
DYN_K, ERROR_K, BOOL_K, INT_K, UINT_K, DOUBLE_K, STRING_K, BYTES_K, NULL_K = range(9)
LIST_K, MAP_K, TYPE_K, OPAQUE_K, STRUCT_K, PARAM_K, ANY_K, TIMESTAMP_K, DURATION_K = range(9, 18)


class Type:
    """A CEL type: kind, name and type parameters. Also the runtime value of ``type(x)``."""

    __slots__ = ("_hash", "kind", "name", "params")

    def __init__(self, kind: int, name: str, params: tuple[Type, ...] = ()) -> None:
        self.kind = kind
        self.name = name
        self.params = params
        self._hash = hash((kind, name, params))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Type) and self.kind == other.kind and self.name == other.name and self.params == other.params

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Type({self})"

    def __str__(self) -> str:
        return format_type(self)


OPTIONAL_NAME = "optional_type"
DYN = Type(DYN_K, "dyn")
ERROR = Type(ERROR_K, "*error*")
BOOL = Type(BOOL_K, "bool")
INT = Type(INT_K, "int")
UINT = Type(UINT_K, "uint")
DOUBLE = Type(DOUBLE_K, "double")
STRING = Type(STRING_K, "string")
BYTES = Type(BYTES_K, "bytes")
NULL = Type(NULL_K, "null_type")
ANY = Type(ANY_K, "google.protobuf.Any")
TIMESTAMP = Type(TIMESTAMP_K, "google.protobuf.Timestamp")
DURATION = Type(DURATION_K, "google.protobuf.Duration")
TYPE = Type(TYPE_K, "type")
LIST = Type(LIST_K, "list")
MAP = Type(MAP_K, "map")
OPTIONAL = Type(OPAQUE_K, OPTIONAL_NAME)


def list_of(elem: Type) -> Type:
    return Type(LIST_K, "list", (elem,))


def map_of(key: Type, value: Type) -> Type:
    return Type(MAP_K, "map", (key, value))


def type_of(t: Type) -> Type:
    return Type(TYPE_K, "type", (t,))


def optional_of(t: Type) -> Type:
    return Type(OPAQUE_K, OPTIONAL_NAME, (t,))


def opaque(name: str, *params: Type) -> Type:
    return Type(OPAQUE_K, name, params)


def struct(name: str) -> Type:
    return Type(STRUCT_K, name)


def param(name: str) -> Type:
    return Type(PARAM_K, name)


def format_type(t: Type) -> str:
    """cel-go's rendering of a type in messages (``list(int)``, ``map(string, dyn)``, ``null``)."""
    k = t.kind
    if k == NULL_K:
        return "null"
    if k == ERROR_K:
        return "!error!"
    if k == ANY_K:
        return "any"
    if k == TIMESTAMP_K:
        return "timestamp"
    if k == DURATION_K:
        return "duration"
    if k == OPAQUE_K and t.name == "function":
        return format_signature(t.params[1:], False, t.params[0])
    if not t.params:
        return t.name
    return f"{t.name}({', '.join(format_type(p) for p in t.params)})"


def type_string(t: Type) -> str:
    """``Type.String()`` of cel-go (used in "must evaluate to ..., not X")."""
    k = t.kind
    if k == NULL_K:
        return "null_type"
    if k == TIMESTAMP_K:
        return "google.protobuf.Timestamp"
    if k == DURATION_K:
        return "google.protobuf.Duration"
    if k == ANY_K:
        return "google.protobuf.Any"
    if k == ERROR_K:
        return "*error*"
    if not t.params:
        return t.name
    return f"{t.name}({', '.join(type_string(p) for p in t.params)})"


def format_signature(args: tuple[Type, ...] | list[Type], member: bool, result: Type | None = None) -> str:
    parts = list(args)
    out = ""
    if member and parts:
        out = format_type(parts[0]) + "."
        parts = parts[1:]
    out += "(" + ", ".join(format_type(p) for p in parts) + ")"
    if result is not None:
        out += " -> " + format_type(result)
    return out


# --- runtime type of a value -------------------------------------------------------------------

_RUNTIME_TYPES: dict[type, Type] = {
    bool: BOOL,
    int: INT,
    UInt: UINT,
    float: DOUBLE,
    str: STRING,
    bytes: BYTES,
    type(None): NULL,
    list: LIST,
    tuple: LIST,
    dict: MAP,
    Type: TYPE,
    Optional: OPTIONAL,
}

# Library value types register themselves here: Python class -> CEL type.
LIBRARY_TYPES: dict[type, Type] = {}


def runtime_type(value: Any) -> Type:
    t = _RUNTIME_TYPES.get(type(value))
    if t is not None:
        return t
    t = LIBRARY_TYPES.get(type(value))
    if t is not None:
        return t
    if isinstance(value, dict):
        return MAP
    if isinstance(value, list):
        return LIST
    raise EvalError(f"unsupported value type {type(value).__name__}")


def type_name(value: Any) -> str:
    """A value's type as cel-go names it in runtime errors (``int``, ``list``, ``kubernetes.Quantity``)."""
    try:
        return runtime_type(value).name
    except EvalError:
        return type(value).__name__


def no_such_overload(name: str, *values: Any) -> EvalError:
    return EvalError(f"no such overload: {name}({', '.join(type_name(v) for v in values)})" if name else "no such overload")


# --- equality and ordering ---------------------------------------------------------------------


def is_number(v: Any) -> bool:
    t = type(v)
    return t is int or t is float or t is UInt


def equals(a: Any, b: Any) -> bool:
    """CEL runtime equality: numbers compare across int/uint/double, other kinds must agree."""
    ta, tb = type(a), type(b)
    if ta is tb and (ta is str or ta is int or ta is bool or ta is bytes or ta is UInt):
        return bool(a == b)
    if ta is bool or tb is bool:
        return ta is tb and a == b
    if is_number(a):
        return is_number(b) and numeric_compare(a, b) == 0
    if ta is list or ta is tuple:
        if (tb is not list and tb is not tuple) or len(a) != len(b):
            return False
        return all(equals(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        if not isinstance(b, dict) or len(a) != len(b):
            return False
        for k, v in a.items():
            if k in b:
                other = b[k]
            else:
                other = _numeric_lookup(b, k)
                if other is _MISSING:
                    return False
            if not equals(v, other):
                return False
        return True
    if ta is Optional:
        return tb is Optional and a.present == b.present and (not a.present or equals(a.value, b.value))
    if a is None or b is None:
        return a is b
    if ta is not tb:
        return False
    return bool(a == b)


_MISSING = object()


def _numeric_lookup(m: dict[Any, Any], key: Any) -> Any:
    """Maps created with int keys answer uint and whole double keys too (and vice versa)."""
    if type(key) is float and key.is_integer():
        for candidate in (int(key), UInt(int(key)) if key >= 0 else None):
            if candidate is not None and candidate in m:
                return m[candidate]
    return _MISSING


def compare(a: Any, b: Any, op: str) -> int:
    """Ordering for ``<``-style operators: -1, 0, 1; numbers compare across kinds."""
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        if ta is tb:
            return (a > b) - (a < b)
        raise no_such_overload(op, a, b)
    if is_number(a) and is_number(b):
        if (ta is float and math.isnan(a)) or (tb is float and math.isnan(b)):
            raise EvalError("NaN values cannot be ordered")
        return numeric_compare(a, b)
    if ta is tb and ta in (str, bytes):
        return (a > b) - (a < b)
    cmp = getattr(a, "cel_compare", None)
    if cmp is not None and ta is tb:
        return int(cmp(b))
    raise no_such_overload(op, a, b)


_TWO_63 = 2.0**63
_TWO_64 = 2.0**64


def numeric_compare(a: Any, b: Any) -> int:
    """cel-go's cross-kind numeric ordering: an int or uint meets a double as a double, except
    beyond the integer's range (NaN compares as unequal to everything)."""
    ta, tb = type(a), type(b)
    if ta is float and tb is float:
        if a != a or b != b:
            return 2  # NaN: unordered, never equal
        return (a > b) - (a < b)
    if ta is float:
        return -numeric_compare(b, a)
    if tb is float:
        if math.isnan(b):
            return 2  # unordered: never equal
        if ta is UInt:
            if b < 0:
                return 1
            if b > _TWO_64:
                return -1
        else:
            if b < -_TWO_63:
                return 1
            if b > _TWO_63:
                return -1
        fa = float(a)
        return (fa > b) - (fa < b)
    return (a > b) - (a < b)


def check_int(v: int) -> int:
    if not INT64_MIN <= v <= INT64_MAX:
        raise EvalError("integer overflow")
    return v


def check_uint(v: int) -> UInt:
    if not 0 <= v <= UINT64_MAX:
        raise EvalError("unsigned integer overflow")
    return UInt(v)


def size_of(value: Any) -> int:
    """cel-go's actual size: length of strings (code points), bytes, lists and maps, else 1."""
    t = type(value)
    if t is str or t is bytes or t is list or t is dict or t is tuple:
        return len(value)
    if t is Optional:
        return size_of(value.value) if value.present else 1
    sized = getattr(value, "cel_size", None)
    if sized is not None:
        return int(sized())
    if isinstance(value, dict | list):
        return len(value)
    return 1
