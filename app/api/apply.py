"""Server-side apply and ``metadata.managedFields``, after sigs.k8s.io/structured-merge-diff.

Field sets are trees keyed by FieldsV1 path elements (``f:name``, ``k:{"name":"c"}``, ``v:"x"``); the
key ``.`` marks the node itself as owned. A manager is identified like upstream: name, operation,
apiVersion (Update only) and subresource.

Apply (``apply_patch``) merges the configuration into the live object by schema (granular maps and
structs merge per field, ``x-kubernetes-list-type: map``/``set`` lists per item, atomic lists and maps
are replaced), prunes what the applier owned before and no longer applies unless another manager
owns it, and refuses (409) to change fields other managers own unless forced, in which case it
takes them over. Other writes (``update_managed_fields``) give the writer every field it added or
changed and take those fields from the other managers, as upstream's Update does.

Corner cases left out or simplified:

* managed fields are always kept in the request's apiVersion; there is no conversion between versions;
* the ``kubectl.kubernetes.io/last-applied-configuration`` interplay (LastAppliedManager and
  LastAppliedUpdater) is not modelled;
* unions/discriminators are not normalized;
* upstream compares a create against the zero value of the Go type, which holds empty nested
  structs; here only the top-level ``metadata``/``spec``/``status`` are taken as pre-existing, so
  nested structs created by a write may get a ``.`` entry upstream would not record;
* list-map items that omit a key field use the known default for ``protocol`` ("TCP") and otherwise
  leave the field out of the key (upstream rejects such items unless the schema has a default);
* schema type mismatches in an applied configuration are merged as opaque values instead of being
  rejected; only undeclared fields, key-less or duplicated list items are rejected.
"""

from __future__ import annotations

import functools
import json
import math
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import orjson

from app import protobuf
from app.api.bodies import kind_conversion_error
from app.api.fieldsets import (
    _MEMBER,
    FieldSet,
    _insert,
    _json,
    _members,
    from_fields_v1,
    path_string,
    set_difference,
    set_intersection,
    set_recursive_difference,
    set_union,
    to_fields_v1,
)
from app.api.patch import go_format, go_type_name
from app.api.schemas import SchemaNode, schema_for_kind
from app.protobuf import go_json_type
from app.storage.cache import DECODED
from kube.errors import ApiError, bad_request
from kube.objects import clone

# Module constants are Final: compiled (kube/compiled.py), a Final is a constant or a C static,
# where any other module name is looked up in the module's dict at each use (the field set walks
# read several per node).
MAX_UPDATE_MANAGERS: Final = 10
ANCIENT_CHANGES_MANAGER: Final = "ancient-changes"

_LEAF: Final = "leaf"
_STRUCT: Final = "struct"
_MAP: Final = "map"
_ASSOC: Final = "assoc"
_SET: Final = "set"
_KEY_DEFAULTS: Final = {"protocol": "TCP"}
_MISSING: Final[Any] = object()
_JSON_TYPES: Final = (dict, list, str, int, float, bool, type(None))


def _path_tree(paths: Iterable[Sequence[str]]) -> FieldSet:
    tree: FieldSet = {}
    for path in paths:
        node = tree
        for name in path:
            node = node.setdefault("f:" + name, {})
        node[_MEMBER] = {}
    return tree


# Paths no manager ever owns (upstream's stripMetaManager); exact paths, not sub-trees.
_STRIPPED: Final = _path_tree(
    [
        ("apiVersion",),
        ("kind",),
        ("metadata",),
        ("metadata", "name"),
        ("metadata", "namespace"),
        ("metadata", "creationTimestamp"),
        ("metadata", "selfLink"),
        ("metadata", "uid"),
        ("metadata", "clusterName"),
        ("metadata", "generation"),
        ("metadata", "managedFields"),
        ("metadata", "resourceVersion"),
    ]
)


# --------------------------------------------------------------------------------------------------
# Schema-directed walking


def _shape(node: SchemaNode) -> tuple[str, str]:
    """(value kind the schema expects, how structured-merge-diff tracks it), computed once per node."""
    try:
        return node.memo["smd_shape"]  # type: ignore[no-any-return]
    except KeyError:
        pass
    shape: tuple[str, str]
    if node.is_free_form:
        shape = ("free", _MAP)
    elif node.is_array:
        shape = ("list", _list_kind(node))
    elif node.is_object:
        if node.map_type == "atomic":
            shape = ("dict", _LEAF)
        elif node.has_properties or node.additional_properties() is None:
            shape = ("dict", _STRUCT)
        else:
            shape = ("dict", _MAP)
    else:
        shape = ("scalar", _LEAF)
    node.memo["smd_shape"] = shape
    return shape


def _type_of(node: SchemaNode | None, value: Any) -> str:
    """How structured-merge-diff treats ``value`` at ``node``."""
    if node is None:
        return _MAP if type(value) is dict else _LEAF
    expected, kind = _shape(node)
    if expected == "dict":
        return kind if type(value) is dict else _LEAF
    if expected == "list":
        return kind if type(value) is list else _LEAF
    if expected == "free":
        return _MAP if type(value) is dict else _LEAF
    return _LEAF


def _list_kind(node: SchemaNode) -> str:
    list_type = node.list_type
    if list_type == "map":
        return _ASSOC
    if list_type == "set":
        return _SET
    if list_type is None:
        strategy, merge_key = node.patch_strategy
        if strategy and "merge" in strategy.split(","):
            return _ASSOC if merge_key else _SET
    return _LEAF


def _list_keys(node: SchemaNode | None) -> tuple[str, ...]:
    if node is None:
        return ()
    keys = node.list_map_keys
    if keys:
        return keys
    merge_key = node.patch_strategy[1]
    return (merge_key,) if merge_key else ()


def _child(node: SchemaNode | None, kind: str, name: str) -> SchemaNode | None:
    if node is None or _shape(node)[0] == "free":
        return None
    if kind != _STRUCT:
        return node.additional_properties()
    # Struct fields are a small fixed set: memoise the lookup per schema node.
    fields: dict[str, SchemaNode | None] | None = node.memo.get("smd_fields")
    if fields is None:
        fields = node.memo["smd_fields"] = {}
    try:
        return fields[name]
    except KeyError:
        child = node.property(name)
        if len(fields) < 256:  # bounded: a body may name fields the schema does not declare
            fields[name] = child
        return child


class _Shape:
    """What the walks of ``_compare`` and ``_mark_all`` need of one schema node, resolved once
    and held as plain attributes: the node's memo lookups cost more than the walk itself."""

    def __init__(self, node: SchemaNode | None) -> None:
        expected, kind = _shape(node) if node is not None else ("free", _MAP)
        self.node = node
        # A value of this type is tracked as ``kind``; any other value is a leaf.
        self.container: type | None = dict if expected in ("dict", "free") else list if expected == "list" else None
        self.kind = kind
        self.typed = node is not None and expected != "free"
        self.keys: tuple[str, ...] = _list_keys(node) if kind == _ASSOC else ()
        self._fields: dict[str, tuple[str, _Shape]] = {}
        self._other: _Shape | None = None

    def kind_of(self, value: Any) -> str:
        """How structured-merge-diff treats ``value`` here (``_type_of``)."""
        return self.kind if type(value) is self.container else _LEAF

    def field(self, name: str) -> tuple[str, _Shape]:
        """The path element and shape of member ``name`` of a map or struct value (``_child``)."""
        if not self.typed:
            return "f:" + name, _UNTYPED
        if self.kind != _STRUCT:
            return "f:" + name, self.items()
        known = self._fields.get(name)
        if known is None:
            known = ("f:" + name, _shape_of(_child(self.node, _STRUCT, name)))
            if len(self._fields) < 256:  # bounded: a body may name fields the schema does not declare
                self._fields[name] = known
        return known

    def items(self) -> _Shape:
        """The shape of a list's items or a map's values."""
        other = self._other
        if other is None:
            node = self.node
            assert node is not None
            other = self._other = _shape_of(node.items() if self.container is list else node.additional_properties())
        return other


_UNTYPED: Final = _Shape(None)


def _shape_of(node: SchemaNode | None) -> _Shape:
    if node is None:
        return _UNTYPED
    shape: _Shape | None = node.memo.get("smd")
    if shape is None:
        shape = node.memo["smd"] = _Shape(node)
    return shape


def _item_element(kind: str, keys: tuple[str, ...], item: Any) -> str | None:
    if kind == _SET:
        if isinstance(item, dict | list):
            return None
        return "v:" + _json(item)
    if not isinstance(item, dict):
        return None
    key: dict[str, Any] = {}
    for name in keys:
        if name in item and item[name] is not None:
            key[name] = item[name]
        elif name in _KEY_DEFAULTS:
            key[name] = _KEY_DEFAULTS[name]
    if not key:
        return None
    return "k:" + _json(key)


def _index_items(items: list[Any], kind: str, node: SchemaNode) -> tuple[list[str], dict[str, Any]] | None:
    """Path elements of a list's items in order (repeats ignored), or None if an item has none."""
    by_element = _index_by(items, kind, _list_keys(node) if kind == _ASSOC else ())
    return (list(by_element), by_element) if by_element is not None else None


def _index_by(items: list[Any], kind: str, keys: tuple[str, ...]) -> dict[str, Any] | None:
    """A list's items by their path elements, in order (repeats ignored), or None if an item has none."""
    by_element: dict[str, Any] = {}
    for item in items:
        element = _item_element(kind, keys, item)
        if element is None:
            return None
        if element not in by_element:
            by_element[element] = item
    return by_element


def _field_set(value: Any, node: SchemaNode | None, path: tuple[str, ...], out: FieldSet) -> None:
    """Insert every leaf, list item and map entry of ``value`` (upstream's ToFieldSet)."""
    kind = _type_of(node, value)
    if kind == _LEAF:
        _insert(out, path)
        return
    if kind in (_STRUCT, _MAP):
        for key, child_value in value.items():
            child = _child(node, kind, key)
            child_path = (*path, "f:" + key)
            if child_value is None:
                if kind == _MAP or not _is_granular_container(child):
                    _insert(out, child_path)
                continue
            _field_set(child_value, child, child_path, out)
            if kind == _MAP or child is None:
                _insert(out, child_path)
        return
    assert node is not None
    indexed = _index_items(value, kind, node)
    if indexed is None:
        _insert(out, path)
        return
    order, by_element = indexed
    items = node.items()
    for element in order:
        item_path = (*path, element)
        _field_set(by_element[element], items, item_path, out)
        _insert(out, item_path)


def _is_granular_container(node: SchemaNode | None) -> bool:
    if node is None:
        return False
    expected, kind = _shape(node)
    return expected in ("dict", "list") and kind != _LEAF


def _leaf_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if type(a) is dict or type(a) is list:
        return _json_equal(a, b)  # an atomic list or map: ``true`` inside is not ``1``
    return bool(a == b)


@dataclass
class _Comparison:
    added: FieldSet
    modified: FieldSet
    removed: FieldSet

    def filter(self, ignored: FieldSet) -> None:
        self.added = set_recursive_difference(self.added, ignored)
        self.modified = set_recursive_difference(self.modified, ignored)
        self.removed = set_recursive_difference(self.removed, ignored)


def _subtree(tree: FieldSet, path: tuple[str, ...]) -> FieldSet:
    for element in path:
        tree = _subtree_at(tree, element)
    return tree


def _mark_all(value: Any, shape: _Shape, tree: FieldSet) -> None:
    """Mark ``tree``'s path and every path below it in ``value``: what ``_compare`` records when
    one side is absent, built in place instead of inserting each path from the root."""
    tree[_MEMBER] = {}
    kind = shape.kind_of(value)
    if kind in (_STRUCT, _MAP):
        fields: dict[str, Any] = value
        for key, child_value in fields.items():
            element, child = shape.field(key)
            _mark_all(child_value, child, _subtree_at(tree, element))
    elif kind in (_ASSOC, _SET) and value:
        by_element = _index_by(value, kind, shape.keys)
        if by_element is not None:
            items = shape.items()
            for element, item in by_element.items():
                _mark_all(item, items, _subtree_at(tree, element))


def _subtree_at(tree: FieldSet, element: str) -> FieldSet:
    child: FieldSet | None = tree.get(element)
    if child is None:
        child = tree[element] = {}
    return child


def _strictly_equal(lhs: Any, rhs: Any) -> bool:
    """Equal JSON values; unlike ``==``, ``true`` is not ``1`` (nor ``1.0``)."""
    if lhs != rhs:
        return False
    try:
        return orjson.dumps(lhs, option=orjson.OPT_SORT_KEYS) == orjson.dumps(rhs, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # integers beyond 64 bits
        return bool(json.dumps(lhs, sort_keys=True) == json.dumps(rhs, sort_keys=True))


def _json_equal(lhs: Any, rhs: Any) -> bool:
    """``_strictly_equal`` (the same JSON once serialized) in one walk: no serializing, and a
    sub-tree shared by both sides (a write keeps the stored spec or status) is equal at once."""
    if lhs is rhs:
        return True
    kind = type(lhs)
    if kind is not type(rhs):
        if kind in _JSON_TYPES and type(rhs) in _JSON_TYPES:
            return False  # 1 is not 1.0 nor true once serialized
        return _strictly_equal(lhs, rhs)
    if kind is dict:
        return _dicts_equal(lhs, rhs)
    if kind is list:
        return _lists_equal(lhs, rhs)
    if kind is float:
        # 0.0 and -0.0 are equal numbers but not the same JSON.
        return bool(lhs == rhs) and (lhs != 0.0 or math.copysign(1.0, lhs) == math.copysign(1.0, rhs))
    if kind in _JSON_TYPES:
        return bool(lhs == rhs)
    return _strictly_equal(lhs, rhs)


def _dicts_equal(lhs: dict[Any, Any], rhs: dict[Any, Any]) -> bool:
    if len(lhs) != len(rhs):
        return False
    for key, value in lhs.items():
        other = rhs.get(key, _MISSING)
        if other is _MISSING or not _json_equal(value, other):
            return False
    return True


def _lists_equal(lhs: list[Any], rhs: list[Any]) -> bool:
    if len(lhs) != len(rhs):
        return False
    return all(_json_equal(lhs[i], rhs[i]) for i in range(len(lhs)))


def _compare(lhs: Any, rhs: Any, shape: _Shape, path: tuple[str, ...], acc: _Comparison) -> None:
    """Record what changed from ``lhs`` to ``rhs``, like upstream's Compare: both are present,
    and below the root they are not the same JSON (the callers settle that)."""
    kind = shape.kind_of(rhs)
    if kind != _LEAF and shape.kind_of(lhs) != kind:
        kind = _LEAF
    if kind in (_STRUCT, _MAP):
        if lhs or rhs:
            _compare_fields(lhs, rhs, shape, path, acc)
            return
    elif kind in (_ASSOC, _SET) and (lhs or rhs):
        left = _index_by(lhs, kind, shape.keys)
        right = _index_by(rhs, kind, shape.keys)
        if left is not None and right is not None:
            _compare_items(left, right, shape.items(), path, acc)
            return
    if not _leaf_equal(lhs, rhs):
        _insert(acc.modified, path)


def _compare_fields(left: dict[str, Any], right: dict[str, Any], shape: _Shape, path: tuple[str, ...], acc: _Comparison) -> None:
    """The members of two maps or structs; a member that is null counts as absent."""
    for key, lhs in left.items():
        rhs = right.get(key)
        if lhs is not None and rhs is not None:
            if lhs is rhs:
                continue
            value_type = type(lhs)
            if value_type is str:
                if lhs != rhs:
                    _insert(acc.modified, (*path, "f:" + key))
            elif value_type is dict or value_type is list:
                if not _json_equal(lhs, rhs):
                    element, child = shape.field(key)
                    _compare(lhs, rhs, child, (*path, element), acc)
            elif not _leaf_equal(lhs, rhs):
                _insert(acc.modified, (*path, "f:" + key))
        else:
            # Whole sub-trees added or removed are the common case (creates): marked at once.
            element, child = shape.field(key)
            if lhs is None:
                _mark_all(rhs, child, _subtree(acc.added, (*path, element)))
            else:
                _mark_all(lhs, child, _subtree(acc.removed, (*path, element)))
    for key, rhs in right.items():
        if key not in left:
            element, child = shape.field(key)
            _mark_all(rhs, child, _subtree(acc.added, (*path, element)))


def _compare_items(left: dict[str, Any], right: dict[str, Any], items: _Shape, path: tuple[str, ...], acc: _Comparison) -> None:
    """The items of two associative lists or sets, by their path elements."""
    for element, lhs in left.items():
        rhs = right.get(element)
        if lhs is not None and rhs is not None:
            if lhs is rhs:
                continue
            value_type = type(lhs)
            if value_type is dict or value_type is list:
                if not _json_equal(lhs, rhs):
                    _compare(lhs, rhs, items, (*path, element), acc)
            elif not _leaf_equal(lhs, rhs):
                _insert(acc.modified, (*path, element))
        elif lhs is None:
            _mark_all(rhs, items, _subtree(acc.added, (*path, element)))
        else:
            _mark_all(lhs, items, _subtree(acc.removed, (*path, element)))
    for element, rhs in right.items():
        if element not in left:
            _mark_all(rhs, items, _subtree(acc.added, (*path, element)))


def _mark_created(zero: dict[str, Any], value: dict[str, Any], shape: _Shape, tree: FieldSet) -> None:
    """Mark in ``tree`` what ``_compare`` records as added or modified from ``zero`` (a kind's
    zero-value structs, ``zero_structs``) to ``value``, the struct or map at ``shape`` a create
    writes: every path ``value`` sets, but the structs both hold, which the writer only fills in.
    One walk with no paths built nor removals recorded (a create removes only from other
    managers, and on this path there are none); tests hold it to ``_compare``'s answers."""
    for key, zero_value in zero.items():
        created = value.get(key)
        if created is None or created is zero_value or _json_equal(zero_value, created):
            continue
        element, child = shape.field(key)
        kind = child.kind_of(created)
        if kind in (_STRUCT, _MAP):
            below: FieldSet = {}
            _mark_created(zero_value, created, child, below)
            if below:
                tree[element] = below
        else:
            tree[element] = {_MEMBER: {}}  # a value of another type in place of the struct
    for key, created in value.items():
        if key not in zero:
            element, child = shape.field(key)
            below = tree[element] = {}  # a new path: each key of ``value`` is one
            _mark_all(created, child, below)


def _without_nulls(value: Any) -> Any:
    """A copy of an applied value as the typed decode leaves it: null map members are dropped."""
    if type(value) is dict:
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if type(value) is list:
        return [_without_nulls(v) for v in value]
    return value


def _merge(lhs: Any, rhs: Any, node: SchemaNode | None) -> Any:
    """Merge an applied value into a live one (rhs wins on leaves); the result shares nothing."""
    if lhs is None:
        return _without_nulls(rhs)
    kind = _type_of(node, rhs)
    if kind != _LEAF and _type_of(node, lhs) != kind:
        return _without_nulls(rhs)
    if kind in (_STRUCT, _MAP):
        out: dict[str, Any] = {}
        for key, live_value in lhs.items():
            if key in rhs:
                applied_value = rhs[key]
                if applied_value is not None:
                    out[key] = _merge(live_value, applied_value, _child(node, kind, key))
            else:
                out[key] = clone(live_value)
        for key, applied_value in rhs.items():
            if key not in lhs and applied_value is not None:
                out[key] = _without_nulls(applied_value)
        return out
    if kind in (_ASSOC, _SET):
        assert node is not None
        left_index = _index_items(lhs, kind, node)
        right_index = _index_items(rhs, kind, node)
        if left_index is None or right_index is None or not (lhs or rhs):
            return _without_nulls(rhs)
        items = node.items()
        return [
            _merge(left, right, items) if right is not _MISSING else clone(left)
            for left, right in _merge_list_order(left_index, right_index)
        ]
    return _without_nulls(rhs)


def _merge_list_order(
    left_index: tuple[list[str], dict[str, Any]],
    right_index: tuple[list[str], dict[str, Any]],
) -> Iterator[tuple[Any, Any]]:
    """Pairs (live item or None, applied item or _MISSING) in the order upstream's merge emits them."""
    left_order, left_items = left_index
    right_order, right_items = right_index
    shared = [e for e in right_order if e in left_items]
    shared_pos = 0
    next_shared = shared[0] if shared else None
    li = ri = 0
    while li < len(left_order) or ri < len(right_order):
        progressed = False
        if li < len(left_order) and ri < len(right_order):
            element = left_order[li]
            if element == right_order[ri]:
                yield left_items[element], right_items[element]
                li += 1
                ri += 1
                shared_pos += 1
                next_shared = shared[shared_pos] if shared_pos < len(shared) else None
                continue
            if element in right_items and next_shared is not None and next_shared != element:
                li += 1
                continue
        if li < len(left_order):
            element = left_order[li]
            if element not in right_items:
                yield left_items[element], _MISSING
                li += 1
                continue
        if ri < len(right_order):
            element = right_order[ri]
            yield left_items.get(element), right_items[element]
            ri += 1
            progressed = True
            if next_shared is not None and next_shared == element:
                shared_pos += 1
                next_shared = shared[shared_pos] if shared_pos < len(shared) else None
        if not progressed:
            # Only reachable with inconsistent input; never loop forever.
            li += 1


def _remove_items(value: Any, removal: FieldSet, node: SchemaNode | None) -> Any:
    """``value`` without the owned paths of ``removal`` (each removed with everything below it)."""
    kind = _type_of(node, value)
    if kind in (_STRUCT, _MAP):
        out: dict[str, Any] = {}
        for key, child_value in value.items():
            sub = removal.get("f:" + key)
            if sub is None:
                out[key] = child_value
            elif _MEMBER not in sub:
                out[key] = _remove_items(child_value, sub, _child(node, kind, key))
        return out
    if kind in (_ASSOC, _SET):
        assert node is not None
        keys = _list_keys(node) if kind == _ASSOC else ()
        items = node.items()
        kept = []
        for item in value:
            element = _item_element(kind, keys, item)
            sub = removal.get(element) if element is not None else None
            if sub is None:
                kept.append(item)
            elif _MEMBER not in sub:
                kept.append(_remove_items(item, sub, items))
        return kept
    return value


def _ensure_named_fields(tree: FieldSet, node: SchemaNode | None) -> FieldSet:
    """``tree`` plus every struct field that has owned descendants (upstream's EnsureNamedFieldsAreMembers)."""
    out: FieldSet = {}
    shape = _shape(node) if node is not None else ("free", _MAP)
    typed = node is not None and shape[0] != "free"
    for key, child in tree.items():
        if key == _MEMBER:
            out[_MEMBER] = {}
            continue
        child_node: SchemaNode | None = None
        named = False
        if key.startswith("f:"):
            if typed and node is not None:
                child_node = node.property(key[2:])
                named = child_node is not None and shape[1] == _STRUCT
                if child_node is None:
                    child_node = node.additional_properties()
        elif typed and node is not None:
            child_node = node.items()
        new_child = _ensure_named_fields(child, child_node)
        if named and len(child) > (1 if _MEMBER in child else 0):
            new_child[_MEMBER] = {}
        out[key] = new_child
    return out


# --------------------------------------------------------------------------------------------------
# managedFields entries

ManagerId = tuple[str, str, str, str]  # manager, operation, apiVersion (Update only), subresource


@dataclass
class _Entry:
    fields: FieldSet
    api_version: str
    time: str | None
    # (fields as decoded, the stored fieldsV1 they came from): re-encoding an entry a write left
    # alone would give the same fieldsV1, so that is reused (stored objects are never mutated).
    stored: tuple[FieldSet, dict[str, Any]] | None = None


def _manager_id(manager: str, operation: str, api_version: str, subresource: str) -> ManagerId:
    return manager, operation, api_version if operation == "Update" else "", subresource


def _identifier_json(manager_id: ManagerId) -> str:
    manager, operation, api_version, subresource = manager_id
    parts = [f'"manager":{json.dumps(manager)}', f'"operation":{json.dumps(operation)}']
    if api_version:
        parts.append(f'"apiVersion":{json.dumps(api_version)}')
    if subresource:
        parts.append(f'"subresource":{json.dumps(subresource)}')
    return "{" + ",".join(parts) + "}"


def _print_manager(manager_id: ManagerId) -> str:
    manager, operation, api_version, subresource = manager_id
    text = json.dumps(manager, ensure_ascii=False)
    if subresource:
        text += f" with subresource {json.dumps(subresource, ensure_ascii=False)}"
    if operation == "Update":
        text += f" using {api_version}"
    return text


# Decoded managers of recently stored managedFields lists, by the list's identity (the list is
# kept too, so its id is not reused while remembered). Stored objects are never mutated, and the
# next write to an object starts from its stored list: decoding it again would give the same.
# The watch cache keeps only its most recently read objects decoded: a list of any other object is
# a new one at each read, so remembering more would only hold memory.
# Twice the watch cache's count: a write remembers the list it stores, and a read of a version the
# cache no longer holds decoded remembers the one it decodes.
_DECODED_CAPACITY: Final = 2 * DECODED.max_items
# An OrderedDict: a plain dict's oldest key is found by skipping every slot deleted before it.
_decoded: Final[OrderedDict[int, tuple[list[Any], dict[ManagerId, _Entry]]]] = OrderedDict()


def _remember_decoded(entries: list[Any], managers: dict[ManagerId, _Entry]) -> None:
    if len(_decoded) >= _DECODED_CAPACITY:
        _decoded.popitem(last=False)
    _decoded[id(entries)] = (entries, managers)


def _copy_entries(managers: dict[ManagerId, _Entry]) -> dict[ManagerId, _Entry]:
    """Entries a write may reassign; field sets themselves are never changed in place."""
    return {m: _Entry(e.fields, e.api_version, e.time, e.stored) for m, e in managers.items()}


def _decode_managed_fields(entries: Any, stored: bool = False) -> dict[ManagerId, _Entry]:
    """Managers from ``metadata.managedFields``; raises ValueError for a malformed list.

    ``stored``: the entries are a stored object's (which this server encoded canonically).
    """
    if stored and type(entries) is list:
        known = _decoded.get(id(entries))
        if known is not None and known[0] is entries:
            return _copy_entries(known[1])
    managers: dict[ManagerId, _Entry] = {}
    if entries is None:
        return managers
    if not isinstance(entries, list):
        raise ValueError("managedFields must be a list")
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ValueError(f"invalid managed fields entry {index}")
        operation = entry.get("operation")
        if operation not in ("Apply", "Update"):
            raise ValueError("operation must be `Apply` or `Update`")
        api_version = entry.get("apiVersion")
        if not isinstance(api_version, str) or not api_version:
            raise ValueError("apiVersion must not be empty")
        fields_type = entry.get("fieldsType")
        if not fields_type:
            raise ValueError(f"missing fieldsType in managed fields entry {index}")
        if fields_type != "FieldsV1":
            raise ValueError(f"invalid fieldsType {json.dumps(fields_type)} in managed fields entry {index}")
        manager_id = _manager_id(
            str(entry.get("manager") or ""), operation, api_version, str(entry.get("subresource") or "")
        )
        time = entry.get("time")
        fields_v1 = entry.get("fieldsV1") or {}
        fields = from_fields_v1(fields_v1)
        managers[manager_id] = _Entry(
            fields, api_version, time if isinstance(time, str) else None, (fields, fields_v1) if stored else None
        )
    if stored:
        _remember_decoded(entries, _copy_entries(managers))
    return managers


@functools.lru_cache(maxsize=1024)
def _time_seconds(time: str | None) -> float:
    if not time:
        return 0.0
    try:
        return datetime.fromisoformat(time.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _encode_managed_fields(managers: dict[ManagerId, _Entry]) -> list[dict[str, Any]]:
    rows = []
    for manager_id, entry in managers.items():
        manager, operation, _, subresource = manager_id
        row: dict[str, Any] = {"manager": manager, "operation": operation, "apiVersion": entry.api_version}
        if entry.time:
            row["time"] = entry.time
        row["fieldsType"] = "FieldsV1"
        stored = entry.stored
        if stored is None or stored[0] is not entry.fields:
            stored = entry.stored = (entry.fields, to_fields_v1(entry.fields))
        row["fieldsV1"] = stored[1]
        if subresource:
            row["subresource"] = subresource
        rows.append(row)
    if len(rows) > 1:
        rows.sort(
            key=lambda r: (
                r["operation"],
                int(_time_seconds(r.get("time"))),
                r["manager"],
                r["apiVersion"],
                r.get("subresource", ""),
            )
        )
    return rows


def _cap_update_managers(managers: dict[ManagerId, _Entry]) -> None:
    """Fold the oldest Update managers into ``ancient-changes`` buckets beyond the upstream cap."""
    updaters = [m for m in managers if m[1] == "Update"]
    if len(updaters) <= MAX_UPDATE_MANAGERS:
        return
    updaters.sort(key=lambda m: (int(_time_seconds(managers[m].time)), _identifier_json(m)))
    first_by_version: dict[str, ManagerId] = {}
    remaining = len(updaters)
    for manager_id in updaters:
        if remaining <= MAX_UPDATE_MANAGERS:
            break
        entry = managers[manager_id]
        version = entry.api_version
        bucket = _manager_id(ANCIENT_CHANGES_MANAGER, "Update", version, "")
        first = first_by_version.get(version)
        if first is None:
            first_by_version[version] = manager_id
            continue
        if bucket not in managers:
            managers[bucket] = managers.pop(first)
        bucket_entry = managers[bucket]
        managers[bucket] = _Entry(set_union(entry.fields, bucket_entry.fields), version, entry.time)
        if manager_id != bucket:
            del managers[manager_id]
        remaining -= 1


def _without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """A shallow copy of ``obj`` whose metadata lacks managedFields."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or "managedFields" not in metadata:
        return obj
    out = dict(obj)
    out["metadata"] = {k: v for k, v in metadata.items() if k != "managedFields"}
    return out


def _set_managed_fields(obj: dict[str, Any], managers: dict[ManagerId, _Entry]) -> None:
    """Store ``managers`` in ``obj``; they are the write's last use of them, kept from here on."""
    metadata = obj.setdefault("metadata", {})
    rows = _encode_managed_fields(managers)
    if rows:
        metadata["managedFields"] = rows
        # This list is what gets stored; the next write to the object decodes it from here. The
        # entries themselves are remembered: this write is done with them, and a decode copies.
        _remember_decoded(rows, managers)
    else:
        metadata.pop("managedFields", None)


def _drop_empty(managers: dict[ManagerId, _Entry]) -> None:
    for manager_id in [m for m, e in managers.items() if not e.fields]:
        del managers[manager_id]


def fields_v1_of(obj: dict[str, Any], schema: SchemaNode | None) -> dict[str, Any]:
    """The FieldsV1 of every field set in ``obj`` (what applying it as a whole would own)."""
    tree: FieldSet = {}
    _field_set(_without_managed_fields(obj), schema, (), tree)
    return to_fields_v1(set_difference(tree, _STRIPPED))


# --------------------------------------------------------------------------------------------------
# Update


def _decode_live_or_new(old: dict[str, Any] | None, new: dict[str, Any], subresource: bool) -> dict[ManagerId, _Entry]:
    live_entries = ((old or {}).get("metadata") or {}).get("managedFields")
    if not subresource:
        new_entries = (new.get("metadata") or {}).get("managedFields")
        if isinstance(new_entries, list) and (not new_entries or (len(new_entries) == 1 and not new_entries[0])):
            return {}  # an explicit reset
        if new_entries is not live_entries and new_entries != live_entries:
            # What a client sends back is usually what it read: then the stored list is decoded.
            try:
                managers = _decode_managed_fields(new_entries)
            except ValueError:
                managers = {}
            if managers:
                return managers
    try:
        return _decode_managed_fields(live_entries, stored=True)
    except ValueError:
        return {}


def zero_structs(api_version: str, kind: str) -> dict[str, Any]:
    """The structs of the Go zero value of ``kind`` as upstream's converter writes it: every
    struct field that is not a pointer, empty, nested (its other fields, zero or null, hold no
    structure). Empty for a kind the Go schema does not know. Shared: never to be changed."""
    message = protobuf.schema().kinds.get((api_version, kind))
    return _zero_skeleton(message) if message is not None else {}


@functools.cache
def _zero_skeleton(message: protobuf.Message) -> dict[str, Any]:
    skeleton: dict[str, Any] = {}
    for field in message.fields:
        if field.message is None or field.label != protobuf.MESSAGE or field.pointer:
            continue
        if field.inline:
            skeleton.update(_zero_skeleton(field.message))
        else:
            skeleton[field.json] = _zero_skeleton(field.message)
    return skeleton


def update_managed_fields(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    manager: str,
    operation: str,
    api_version: str,
    now: str,
    subresource: str = "",
    *,
    schema: SchemaNode | None = None,
    reset_fields: Iterable[Sequence[str]] = (),
) -> None:
    """Record a create/update/patch by ``manager`` in ``new["metadata"]["managedFields"]`` (in place).

    The manager gains the fields the write added or changed (under an ``Update`` entry unless
    ``operation`` is ``"Apply"``); other managers lose those fields and any the write removed.
    ``reset_fields`` are top-level paths the write does not own (e.g. ``("status",)`` on the main
    resource). ``schema`` decides how lists and maps are tracked; by default it is looked up from
    ``new``'s apiVersion and kind (an unknown kind tracks lists as atomic values).
    """
    if schema is None:
        schema = schema_for_kind(str(new.get("apiVersion") or api_version), str(new.get("kind") or ""))
    managers = _decode_live_or_new(old, new, bool(subresource))
    metadata = new.setdefault("metadata", {})
    metadata.pop("managedFields", None)
    if old is not None:
        before = _without_managed_fields(old)
    else:
        # Upstream compares a create with the kind's zero value: its structs exist (empty), so
        # a manager of a create owns the fields within them, not the structs themselves.
        before = zero_structs(str(new.get("apiVersion") or api_version), str(new.get("kind") or ""))
    operation = "Apply" if operation == "Apply" else "Update"
    manager_id = _manager_id(manager, operation, api_version, subresource)
    writer = managers.get(manager_id)
    owned_before = writer.fields if writer is not None else None
    shape = _shape_of(schema)
    ignored = _path_tree(reset_fields)
    if old is None and not managers and shape.kind_of(new) in (_STRUCT, _MAP):
        # A create nobody owns anything of yet: what it added is all that matters.
        changed: FieldSet = {}
        _mark_created(before, new, shape, changed)
        changed = set_recursive_difference(changed, ignored)
    else:
        comparison = _Comparison({}, {}, {})
        _compare(before, new, shape, (), comparison)
        comparison.filter(ignored)
        changed = set_union(comparison.modified, comparison.added)
        for entry in managers.values():
            entry.fields = set_difference(set_difference(entry.fields, changed), comparison.removed)
    mine = set_difference(changed, _STRIPPED)
    if mine:
        if writer is None:
            managers[manager_id] = _Entry(mine, api_version, now)
        else:
            fields = set_union(mine, writer.fields)
            if fields == owned_before:
                # The writer owned all of it already: the same set, whose stored FieldsV1 (in
                # ``writer.stored``) still holds; only the time moves.
                fields = owned_before
            managers[manager_id] = _Entry(fields, api_version, now, writer.stored)
    _drop_empty(managers)
    _cap_update_managers(managers)
    _set_managed_fields(new, managers)


# --------------------------------------------------------------------------------------------------
# Apply


def _gvk_string(api_version: Any, kind: Any) -> str:
    api_version = api_version if isinstance(api_version, str) else ""
    kind = kind if isinstance(kind, str) else ""
    group, _, version = api_version.rpartition("/")
    return f"{group}/{version}, Kind={kind}"


def _expected_kind(live: dict[str, Any] | None, schema: SchemaNode | None, api_version: str) -> str | None:
    if live and isinstance(live.get("kind"), str):
        return str(live["kind"])
    if schema is not None:
        for gvk in schema.raw.get("x-kubernetes-group-version-kind") or ():
            group, version = gvk.get("group", ""), gvk.get("version", "")
            if (f"{group}/{version}" if group else version) == api_version:
                return str(gvk.get("kind"))
    return None


def _validate_applied(value: Any, node: SchemaNode | None, path: tuple[str, ...], errors: list[str]) -> None:
    """What upstream's typed conversion of an apply configuration rejects: values of another
    type than the schema's (structured-merge-diff's words), undeclared fields, list items
    without their keys or repeated."""
    if node is None or value is None:
        return
    expected, kind = _shape(node)
    if expected == "free":
        return
    prefix = f"{path_string(path)}: " if path else ""
    if expected == "dict":
        if type(value) is not dict:
            errors.append(f"{prefix}expected map, got &{{{go_format(value)}}}")
            return
        is_struct = node.has_properties or node.additional_properties() is None
        for key, child_value in value.items():
            child = node.property(key) if is_struct else node.additional_properties()
            child_path = (*path, "f:" + key)
            if child is None and is_struct:
                errors.append(f"{path_string(child_path)}: field not declared in schema")
            elif child_value is not None:
                _validate_applied(child_value, child, child_path, errors)
        return
    if expected == "list":
        if type(value) is not list:
            errors.append(f"{prefix}expected list, got &{{{go_format(value)}}}")
            return
        if kind not in (_ASSOC, _SET):
            for index, item in enumerate(value):
                _validate_applied(item, node.items(), (*path, f"i:{index}"), errors)
            return
        keys = _list_keys(node) if kind == _ASSOC else ()
        seen: set[str] = set()
        for index, item in enumerate(value):
            element = _item_element(kind, keys, item)
            if element is None:
                if kind == _SET or not isinstance(item, dict):
                    what = (
                        "associative list with keys may not have non-map elements"
                        if kind == _ASSOC
                        else ("associative list without keys has an element that's a map type")
                    )
                    errors.append(f"{path_string(path)}: element {index}: {what}")
                else:
                    errors.append(
                        f"{path_string(path)}: element {index}: associative list with keys has an element that "
                        f'omits key field "{keys[0]}" (and doesn\'t have default value)'
                    )
                continue
            if element in seen:
                errors.append(f"{path_string(path)}: duplicate entries for key {path_string((element,))}")
                continue
            seen.add(element)
            _validate_applied(item, node.items(), (*path, element), errors)
        return
    error = _scalar_error(value, node)
    if error is not None:
        errors.append(prefix + error)


def _scalar_error(value: Any, node: SchemaNode) -> str | None:
    """structured-merge-diff's error for a value its scalar type (numeric, string, boolean, or
    any scalar for int-or-string and untyped fields) does not take, in Go's formatting of it."""
    declared = node.raw.get("type")
    if isinstance(declared, list):
        declared = next((t for t in declared if t != "null"), None)
    value_type = type(value)
    if declared in ("integer", "number"):
        if value_type is bool or value_type not in (int, float):
            return f"expected numeric (int or float), got {go_type_name(value)}"
    elif declared == "string" and not node.raw.get("x-kubernetes-int-or-string"):
        if value_type is not str:
            return f"expected string, got &value.valueUnstructured{{Value:{_go_syntax(value)}}}"
    elif declared == "boolean":
        if value_type is not bool:
            return f"expected boolean, got &{{{go_format(value)}}}"
    elif value_type is dict or value_type is list:
        return f"expected any scalar, got &{{{go_format(value)}}}"
    return None


def _go_syntax(value: Any) -> str:
    """A decoded JSON value as Go's ``%#v`` writes it (maps sorted by key)."""
    if type(value) is dict:
        return "map[string]interface {}{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}:{_go_syntax(value[k])}" for k in sorted(value)) + "}"
    if type(value) is list:
        return "[]interface {}{" + ", ".join(_go_syntax(item) for item in value) + "}"
    if type(value) is str:
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return "interface {}(nil)"
    return go_format(value)


def _conflict_error(conflicts: dict[ManagerId, FieldSet]) -> ApiError:
    found: list[tuple[ManagerId, tuple[str, ...]]] = []
    for manager_id in sorted(conflicts, key=_identifier_json):
        found.extend((manager_id, path) for path in _members(conflicts[manager_id]))
    causes = [
        {"reason": "FieldManagerConflict", "message": f"conflict with {_print_manager(m)}", "field": path_string(p)}
        for m, p in found
    ]
    if len(found) == 1:
        manager_id, path = found[0]
        message = f"Apply failed with 1 conflict: conflict with {_print_manager(manager_id)}: {path_string(path)}"
    else:
        lines: list[str] = []
        for manager_id in sorted(conflicts, key=_identifier_json):
            lines.append(f"conflicts with {_print_manager(manager_id)}:")
            lines.extend(f"- {path_string(p)}" for m, p in found if m == manager_id)
        message = f"Apply failed with {len(found)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, {"causes": causes})


def apply_patch(
    live: dict[str, Any] | None,
    applied: Any,
    manager: str,
    force: bool,
    schema: SchemaNode | None,
    api_version: str,
    now: str,
    subresource: str = "",
    *,
    kind: str | None = None,
    reset_fields: Iterable[Sequence[str]] = (),
) -> dict[str, Any]:
    """Server-side apply ``applied`` (the parsed apply configuration) onto ``live`` for ``manager``.

    Returns the new object with ``metadata.managedFields`` updated; with ``live`` None it is the
    object to create. Raises 409 Conflict when the configuration changes fields other managers own
    and ``force`` is false, 400 for a configuration of the wrong kind or carrying managedFields.
    ``kind`` defaults to the live object's kind or the schema's; ``reset_fields`` are top-level
    paths the applier cannot own on this endpoint (e.g. ``("status",)`` on the main resource).
    """
    if applied is None:
        applied = {}  # YAML null decodes to an empty configuration, refused for its type below
    if not isinstance(applied, dict):
        raise bad_request(
            "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal "
            f"{go_json_type(applied)} into Go value of type map[string]interface {{}}"
        )
    expected_kind = kind or _expected_kind(live, schema, api_version)
    if expected_kind is not None and (applied.get("apiVersion"), applied.get("kind")) != (api_version, expected_kind):
        raise bad_request(f"invalid object type: {_gvk_string(applied.get('apiVersion'), applied.get('kind'))}")
    applied_metadata = applied.get("metadata")
    if isinstance(applied_metadata, dict) and applied_metadata.get("managedFields") is not None:
        raise bad_request("metadata.managedFields must be nil")

    try:
        managers = _decode_managed_fields(((live or {}).get("metadata") or {}).get("managedFields"), stored=True)
    except ValueError as exc:
        raise ApiError(500, "", f"failed to decode managed fields: {exc}") from exc

    errors: list[str] = []
    _validate_applied(applied, schema, (), errors)
    metadata = applied_metadata if isinstance(applied_metadata, dict) else {}
    where = f"{metadata.get('namespace') or ''}/{metadata.get('name') or ''}"
    gvk = _gvk_string(applied.get("apiVersion"), applied.get("kind"))
    if errors:
        detail = errors[0] if len(errors) == 1 else "errors:\n" + "\n".join("  " + e for e in errors)
        # A plain error upstream (a 500 with no reason); the configuration is the client's mistake.
        raise bad_request(f"failed to create typed patch object ({where}; {gvk}): {detail}")

    before = _without_managed_fields(live) if live is not None else {}
    merged: dict[str, Any] = _merge(before, applied, schema)

    ignored = _path_tree(reset_fields)
    applied_fields: FieldSet = {}
    _field_set(applied, schema, (), applied_fields)
    applied_fields = set_recursive_difference(applied_fields, ignored)

    applier = _manager_id(manager, "Apply", api_version, subresource)
    last = managers.get(applier)
    managers[applier] = _Entry(applied_fields, api_version, last.time if last else None)

    if last is not None and last.fields:
        owned: FieldSet = {}
        for entry in managers.values():
            owned = set_union(owned, _ensure_named_fields(entry.fields, schema))
        removal = set_difference(_ensure_named_fields(last.fields, schema), owned)
        if removal:
            merged = _remove_items(merged, removal, schema)

    comparison = _Comparison({}, {}, {})
    _compare(before, merged, _shape_of(schema), (), comparison)
    comparison.filter(ignored)
    changed = set_union(comparison.modified, comparison.added)
    conflicts: dict[ManagerId, FieldSet] = {}
    for manager_id, entry in managers.items():
        if manager_id != applier:
            taken = set_intersection(entry.fields, changed)
            if taken:
                conflicts[manager_id] = taken
    if conflicts and not force:
        raise _conflict_error(conflicts)
    for manager_id, entry in managers.items():
        if manager_id != applier:
            entry.fields = set_difference(
                set_difference(entry.fields, conflicts.get(manager_id, {})), comparison.removed
            )

    if expected_kind is not None:
        # The applied object is then converted into the kind's Go type (as a 500 upstream too).
        unconvertible = kind_conversion_error(merged, api_version, expected_kind)
        if unconvertible is not None:
            raise bad_request(f"failed to convert new object ({where}; {gvk}) to proper version: unable to convert unstructured object to {gvk}: {unconvertible}")
    mine = managers[applier]
    mine.fields = set_difference(mine.fields, _STRIPPED)
    if merged != before:
        mine.time = now
    _drop_empty(managers)
    _cap_update_managers(managers)
    _set_managed_fields(merged, managers)
    return merged
