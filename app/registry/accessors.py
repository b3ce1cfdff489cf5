"""Lenient readers of decoded JSON for validation, and helpers for reporting field errors.

Objects are plain JSON dicts; every reader tolerates wrong JSON types and reports them as field
errors instead of raising, because a malformed request must answer 422, never 500.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from app.registry.base import Obj
from kube.errors import FieldError, duplicate, invalid, too_many
from kube.quantity import Quantity, QuantityError

Errs = list[FieldError]


# --- readers of a key (the resource.k8s.io kinds): absent is None, a wrong type is reported as
# "must be of type object, not string" -----------------------------------------------------------


def sub_dict(obj: Any, key: str) -> Obj:
    """``obj[key]`` when both are objects, else an empty dict (for lenient look-ups)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def type_error(path: str, value: Any, wanted: str) -> FieldError:
    return invalid(path, value, f"must be of type {wanted}, not {_json_type(value)}")


def get_dict(obj: Any, key: str, path: str, errs: Errs) -> Obj | None:
    """``obj[key]`` when it is an object; None when absent; a type error otherwise."""
    if not isinstance(obj, dict):
        return None
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        errs.append(type_error(f"{path}.{key}" if path else key, value, "object"))
        return None
    return value


def get_list(obj: Any, key: str, path: str, errs: Errs) -> list[Any] | None:
    if not isinstance(obj, dict):
        return None
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        errs.append(type_error(f"{path}.{key}" if path else key, value, "array"))
        return None
    return value


def get_str(obj: Any, key: str, path: str, errs: Errs) -> str | None:
    if not isinstance(obj, dict):
        return None
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        errs.append(type_error(f"{path}.{key}" if path else key, value, "string"))
        return None
    return value


def get_int(obj: Any, key: str, path: str, errs: Errs) -> int | None:
    if not isinstance(obj, dict):
        return None
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        errs.append(type_error(f"{path}.{key}" if path else key, value, "integer"))
        return None
    return value


def get_bool(obj: Any, key: str, path: str, errs: Errs) -> bool | None:
    if not isinstance(obj, dict):
        return None
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        errs.append(type_error(f"{path}.{key}" if path else key, value, "boolean"))
        return None
    return value


def read_quantity(value: Any, path: str, errs: Errs) -> Quantity | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        errs.append(type_error(path, value, "string"))
        return None
    try:
        return Quantity.parse(value)
    except (QuantityError, ValueError) as exc:
        errs.append(invalid(path, value, str(exc)))
        return None


def dict_entries(value: list[Any], path: str, errs: Errs) -> Iterable[tuple[int, Obj, str]]:
    """(index, item, item path) for every object item; non-objects become type errors."""
    for i, item in enumerate(value):
        p = f"{path}[{i}]"
        if not isinstance(item, dict):
            errs.append(type_error(p, item, "object"))
            continue
        yield i, item, p


# --- readers of a value (the core kinds): absent reads as empty, a wrong type is reported as
# "must be an object" -------------------------------------------------------------------------------


def as_dict(value: object, path: str, errs: list[FieldError]) -> Obj:
    """``value`` as an object; None reads as empty, another type is reported."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        errs.append(invalid(path, value, "must be an object"))
        return {}
    return value


def as_list(value: object, path: str, errs: list[FieldError]) -> list[Any]:
    """``value`` as a list; None reads as empty, another type is reported."""
    if value is None:
        return []
    if not isinstance(value, list):
        errs.append(invalid(path, value, "must be a list"))
        return []
    return value


def as_str(value: object, path: str, errs: list[FieldError]) -> str:
    """``value`` as a string; None reads as empty, another type is reported."""
    if value is None:
        return ""
    if not isinstance(value, str):
        errs.append(invalid(path, value, "must be a string"))
        return ""
    return value


def as_dict_entries(value: object, path: str, errs: list[FieldError]) -> Iterator[tuple[int, Obj, str]]:
    """(index, entry, entry path) for a list of objects; bad entries are reported and skipped."""
    for index, entry in enumerate(as_list(value, path, errs)):
        entry_path = f"{path}[{index}]"
        if not isinstance(entry, dict):
            errs.append(invalid(entry_path, entry, "must be an object"))
            continue
        yield index, entry, entry_path


def parse_quantity_field(value: object, path: str, errs: list[FieldError]) -> Quantity | None:
    """A quantity field; an unparsable one is reported with upstream's decoding message."""
    try:
        return Quantity.parse(value)  # type: ignore[arg-type]
    except (QuantityError, TypeError) as exc:
        errs.append(invalid(path, value, str(exc)))
        return None


# --- reporting --------------------------------------------------------------------------------


def truncate_key(key: str, limit: int) -> str:
    """Upstream shortens long map keys in field paths, keeping both ends."""
    limit = max(limit, 16)
    if len(key) <= limit:
        return key
    remaining = limit - 3
    return key[: (remaining + 1) // 2] + "..." + key[len(key) - remaining // 2 :]


def over_limit(value: list[Any] | dict[str, Any] | None, limit: int, path: str, errs: Errs) -> bool:
    """Upstream stops validating a list/map that exceeds its limit (DOS protection)."""
    if value is not None and len(value) > limit:
        errs.append(too_many(path, len(value), limit))
        return True
    return False


def report_duplicates(keys: list[tuple[int, Any]], path: str, errs: Errs) -> None:
    seen: set[Any] = set()
    for i, key in keys:
        if key in seen:
            errs.append(duplicate(f"{path}[{i}]", key))
        else:
            seen.add(key)
