"""Field sets of managedFields, after sigs.k8s.io/structured-merge-diff: trees keyed by FieldsV1
path elements (``f:name``, ``k:{"name":"c"}``, ``v:"x"``), where the key ``.`` marks the node itself
as owned; their set operations, their FieldsV1 form and the paths conflict messages print.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, Final

import orjson

FieldSet = dict[str, Any]

# Final: compiled, a constant rather than a lookup in the module dict at each use.
_MEMBER: Final = "."


# --------------------------------------------------------------------------------------------------
# Field sets


def _insert(tree: FieldSet, path: Sequence[str]) -> None:
    if not path:
        return
    node = tree
    for element in path:
        node = node.setdefault(element, {})
    node[_MEMBER] = {}


def set_union(a: FieldSet, b: FieldSet) -> FieldSet:
    """Paths in either set. Inputs are not modified; sub-trees may be shared."""
    if not a:
        return b
    if not b:
        return a
    out = dict(a)
    for key, child in b.items():
        if key == _MEMBER:
            out[_MEMBER] = {}
        else:
            out[key] = set_union(a[key], child) if key in a else child
    return out


def set_difference(a: FieldSet, b: FieldSet) -> FieldSet:
    """Paths in ``a`` that are not in ``b`` (exact paths; descendants of ``b``'s paths stay).

    ``a`` itself when nothing is removed (callers recognise unchanged sets by identity).
    """
    if not b:
        return a
    out: FieldSet = {}
    removed = False
    for key, child in a.items():
        if key == _MEMBER:
            if _MEMBER not in b:
                out[_MEMBER] = {}
            else:
                removed = True
        elif key in b:
            rest = set_difference(child, b[key])
            if rest is not child:
                removed = True
            if rest:
                out[key] = rest
            else:
                removed = True
        else:
            out[key] = child
    return out if removed else a


def set_intersection(a: FieldSet, b: FieldSet) -> FieldSet:
    """Paths in both sets."""
    out: FieldSet = {}
    for key, child in a.items():
        if key not in b:
            continue
        if key == _MEMBER:
            out[_MEMBER] = {}
        else:
            both = set_intersection(child, b[key])
            if both:
                out[key] = both
    return out


def set_recursive_difference(a: FieldSet, b: FieldSet) -> FieldSet:
    """Paths in ``a`` that are neither in ``b`` nor below a path of ``b``."""
    if not b:
        return a
    out: FieldSet = {}
    for key, child in a.items():
        if key == _MEMBER:
            out[_MEMBER] = {}
            continue
        other = b.get(key)
        if other is None:
            out[key] = child
        elif _MEMBER not in other:
            rest = set_recursive_difference(child, other)
            if rest:
                out[key] = rest
    return out


def _sort_key(element: str) -> tuple[int, Any]:
    kind = element[:2]
    if kind == "f:":
        return 0, element[2:]
    if kind == "k:":
        return 1, element[2:]
    if kind == "v:":
        return 2, element[2:]
    if kind == "i:":
        try:
            return 3, int(element[2:])
        except ValueError:
            return 3, 0
    return 4, element


def _members(tree: FieldSet, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every owned path, in upstream's path order."""
    if _MEMBER in tree and prefix:
        yield prefix
    for key in sorted((k for k in tree if k != _MEMBER), key=_sort_key):
        yield from _members(tree[key], (*prefix, key))


def to_fields_v1(tree: FieldSet) -> dict[str, Any]:
    """Serialize a field set the way ``metadata.managedFields[].fieldsV1`` stores it."""
    out: dict[str, Any] = {}
    size = len(tree)
    member = _MEMBER in tree
    if size == int(member):
        return out  # a leaf (most paths are)
    if member:
        out[_MEMBER] = {}
    children = [k for k in tree if k != _MEMBER]
    if len(children) > 1:
        children.sort()
        first, last = children[0][:2], children[-1][:2]
        if first != last or first == "i:":
            # Plain string order equals _sort_key's when all elements share a kind (but for indexes).
            children.sort(key=_sort_key)
    for key in children:
        out[key] = to_fields_v1(tree[key])
    return out


def _canonical_element(element: str) -> str:
    if element[:2] in ("k:", "v:"):
        try:
            return element[:2] + _json(json.loads(element[2:]))
        except ValueError:
            return element
    return element


def from_fields_v1(fields: Any) -> FieldSet:
    """Parse a FieldsV1 object into a field set."""
    if not isinstance(fields, dict):
        raise ValueError("FieldsV1 must be an object")
    out: FieldSet = {}
    for key, child in fields.items():
        if key == _MEMBER:
            out[_MEMBER] = {}
            continue
        if not isinstance(key, str) or key[:2] not in ("f:", "k:", "v:", "i:"):
            raise ValueError(f"unexpected path element {key!r}")
        parsed = from_fields_v1(child)
        out[_canonical_element(key)] = parsed if parsed else {_MEMBER: {}}
    return out


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # integers beyond 64 bits
        return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _go_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return str(value)
    return _json(value)


def path_string(path: Sequence[str]) -> str:
    """A path as structured-merge-diff prints it: ``.spec.containers[name="c"].image``."""
    parts: list[str] = []
    for element in path:
        kind, body = element[:2], element[2:]
        if kind == "f:":
            parts.append("." + body)
        elif kind == "k:":
            try:
                key = json.loads(body)
            except ValueError:
                key = {}
            parts.append("[" + ",".join(f"{k}={_go_value(key[k])}" for k in sorted(key)) + "]")
        elif kind == "v:":
            try:
                parts.append("[=" + _go_value(json.loads(body)) + "]")
            except ValueError:
                parts.append("[=" + body + "]")
        else:
            parts.append(f"[{body}]")
    return "".join(parts)
