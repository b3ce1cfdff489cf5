"""PATCH bodies: JSON patch (RFC 6902), merge patch (RFC 7386) and strategic merge patch.

Behaviour and error answers follow kube-apiserver's patch handler, which uses evanphx/json-patch v4
for the first two and k8s.io/apimachinery's strategicpatch for the third:

* a patch document that cannot be decoded answers 400 BadRequest;
* a JSON patch operation that cannot be applied (failed ``test``, missing path, bad index, unknown
  op) answers 422 with reason Invalid and the generic message upstream uses, without causes;
* malformed strategic-merge directives answer 400 (``invalid patch format of ...``) or 422
  (``lists of lists are not supported``). Other strategic-merge failures (missing merge key, unknown
  ``$patch`` value, element types that differ) surface upstream as plain errors, a 500 with an empty
  reason; this server answers them 400 BadRequest with upstream's message: they are the client's
  mistakes, and a server error would tell it to retry;
* with fieldValidation Warn or Strict (Warn is the default) upstream first decodes a JSON patch into
  its typed operations and a merge patch into an object: other shapes are a 400
  (``check_patch_types``). Repeated keys of the patch and unknown fields of the result are strict
  decoding errors (``patch_strict_errors``), a 422 on the field ``patch`` under Strict.

Inputs are never modified: the document is copied once and patched in place, values taken from a
patch are copied as they are inserted. The result therefore shares nothing with either input.

Known quirks kept on purpose because upstream has them: a JSON patch ``replace`` of a missing object
member adds it, ``copy`` from a missing member copies ``null``, negative array indices count from the
end, and a strategic merge of a merge-strategy list places patched items before the untouched ones
unless ``$setElementOrder`` says otherwise.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from app.api import bodies
from app.api.schemas import SchemaNode
from app.protobuf import go_json_type
from kube.errors import ApiError, bad_request
from kube.objects import clone

MAX_JSON_PATCH_OPERATIONS = 10000

_GENERIC_INVALID = "the server rejected our request due to an error in our request"

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"
_SET_ELEMENT_ORDER = "$setElementOrder"

ERR_BAD_PRIMITIVE_LIST = "invalid patch format of primitive list"
ERR_BAD_RETAIN_KEYS = "invalid patch format of retainKeys"
ERR_BAD_SET_ELEMENT_ORDER = "invalid patch format of setElementOrder list"
ERR_NO_LIST_OF_LISTS = "lists of lists are not supported"


class PatchApplyError(Exception):
    """The upstream library's own message for a failed patch step; kept as the ApiError's cause."""


def _unprocessable(reason_text: str) -> ApiError:
    """422 as kube-apiserver answers when a patch does not apply (NewGenericServerResponse)."""
    err = ApiError(422, "Invalid", _GENERIC_INVALID, {})
    err.__cause__ = PatchApplyError(reason_text)
    return err


def _internal(message: str) -> ApiError:
    """A plain (non-Status) error of upstream's strategic merge, a 500 there: a 400 here, with its message."""
    return bad_request(message)


def go_type_name(value: Any) -> str:
    """The Go reflect type name a decoded JSON value has (for mergepatch.ErrBadArgType)."""
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    return "<nil>"


def go_format(value: Any) -> str:
    """Render a JSON value like Go's ``%v`` does for decoded JSON (maps sorted by key)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_format(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_format(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return str(value)


# --------------------------------------------------------------------------------------------------
# JSON patch (RFC 6902)


def _decode_pointer_token(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _parse_index(token: str) -> int | None:
    """Go's strconv.Atoi: optional sign, decimal digits only."""
    body = token[1:] if token[:1] in ("+", "-") else token
    if not body or not body.isdigit() or not body.isascii():
        return None
    return int(token)


def _find_container(doc: Any, path: str) -> tuple[Any, str] | None:
    """The container holding the last token of ``path`` and that token, or None if unreachable."""
    parts = path.split("/")
    if len(parts) < 2:
        return None
    current = doc
    for raw in parts[1:-1]:
        token = _decode_pointer_token(raw)
        if isinstance(current, dict):
            current = current.get(token)
        elif isinstance(current, list):
            index = _parse_index(token)
            if index is None or index >= len(current) or index < -len(current):
                return None
            current = current[index]
        else:
            return None
        if not isinstance(current, dict | list):
            return None
    return current, _decode_pointer_token(parts[-1])


def _array_index(container: list[Any], key: str, *, allow_end: bool) -> int:
    index = _parse_index(key)
    if index is None:
        raise PatchApplyError(f"value was not a proper array index: '{key}'")
    size = len(container) + (1 if allow_end else 0)
    if index >= size or index < -size:
        raise PatchApplyError(f"Unable to access invalid index: {index}")
    return index + size if index < 0 else index


def _get(container: Any, key: str) -> Any:
    if isinstance(container, dict):
        return container.get(key)
    index = _array_index(container, key, allow_end=False)
    return container[index]


def _add(container: Any, key: str, value: Any, path: str) -> None:
    if isinstance(container, dict):
        container[key] = value
        return
    if key == "-":
        container.append(value)
        return
    try:
        index = _array_index(container, key, allow_end=True)
    except PatchApplyError as exc:
        raise PatchApplyError(f"error in add for path: '{path}': {exc}") from None
    container.insert(index, value)


def _remove(container: Any, key: str, path: str) -> Any:
    if isinstance(container, dict):
        if key not in container:
            raise PatchApplyError(
                f"error in remove for path: '{path}': Unable to remove nonexistent key: {key}: missing value"
            )
        return container.pop(key)
    try:
        index = _array_index(container, key, allow_end=False)
    except PatchApplyError as exc:
        raise PatchApplyError(f"error in remove for path: '{path}': {exc}") from None
    return container.pop(index)


def _op_string(op: dict[str, Any], field: str) -> str | None:
    value = op.get(field)
    return value if isinstance(value, str) else None


def _apply_operation(doc: Any, op: dict[str, Any]) -> None:
    kind = _op_string(op, "op") or "unknown"
    if kind not in ("add", "remove", "replace", "move", "copy", "test"):
        raise PatchApplyError(f"Unexpected kind: {kind}")
    path = _op_string(op, "path")
    if path is None:
        raise PatchApplyError(f"{kind} operation failed to decode path: missing value")
    value = op.get("value")
    if kind in ("move", "copy"):
        source = _op_string(op, "from")
        if source is None:
            raise PatchApplyError(f"{kind} operation failed to decode from: missing value")
        found = _find_container(doc, source)
        if found is None:
            raise PatchApplyError(f"{kind} operation does not apply: doc is missing from path: {source}: missing value")
        container, key = found
        moved = _remove(container, key, source) if kind == "move" else clone(_get(container, key))
        target = _find_container(doc, path)
        if target is None:
            raise PatchApplyError(
                f"{kind} operation does not apply: doc is missing destination path: {path}: missing value"
            )
        _add(target[0], target[1], moved, path)
        return
    found = _find_container(doc, path)
    if found is None:
        raise PatchApplyError(f"{kind} operation does not apply: doc is missing path: {path}: missing value")
    container, key = found
    if kind == "add":
        _add(container, key, clone(value), path)
    elif kind == "remove":
        _remove(container, key, path)
    elif kind == "replace":
        if isinstance(container, dict):
            container[key] = clone(value)
        else:
            try:
                index = _array_index(container, key, allow_end=False)
            except PatchApplyError as exc:
                raise PatchApplyError(f"replace operation does not apply: doc is missing key: {path}: {exc}") from None
            container[index] = clone(value)
    else:
        current = _get(container, key)
        if current is None and value is None:
            return
        if current is None or "value" not in op or not _json_equal(current, value):
            raise PatchApplyError(f"testing value {path} failed: test failed")


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def apply_json_patch(doc: dict[str, Any], ops: Any, *, owned: bool = False) -> dict[str, Any]:
    """Apply an RFC 6902 JSON patch (already parsed from JSON) to ``doc`` and return the result.

    ``owned``: ``doc`` is the caller's own copy, changed in place rather than copied first."""
    if ops is None:
        return doc if owned else clone(doc)
    if not isinstance(ops, list):
        raise bad_request(f"json: cannot unmarshal {go_json_type(ops)} into Go value of type jsonpatch.Patch")
    for op in ops:
        if op is not None and not isinstance(op, dict):
            raise bad_request(f"json: cannot unmarshal {go_json_type(op)} into Go value of type jsonpatch.Operation")
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise ApiError(
            413,
            "RequestEntityTooLarge",
            "Request entity too large: The allowed maximum operations in a JSON patch is "
            f"{MAX_JSON_PATCH_OPERATIONS}, got {len(ops)}",
        )
    result = doc if owned else clone(doc)
    for op in ops:
        try:
            _apply_operation(result, op or {})
        except PatchApplyError as exc:
            raise _unprocessable(str(exc)) from exc
    if not isinstance(result, dict):
        raise _invalid_patch_result(result)
    return result


def invalid_patch(shown: str, detail: str) -> ApiError:
    """upstream's 422 for a patched document it cannot decode: an Invalid error on the field
    ``patch`` of no kind, the value being the patched document (or the patch) as text."""
    message = f"Invalid value: {json.dumps(shown, ensure_ascii=False)}: {detail}"
    return ApiError(
        422,
        "Invalid",
        f' "" is invalid: patch: {message}',
        {"causes": [{"reason": "FieldValueInvalid", "message": message, "field": "patch"}]},
    )


def undecodable_patch(patched: Any, patch: Any, patch_type: str, error: str) -> ApiError:
    """upstream's 422 for a patched object Go cannot decode into the kind's type (``error``):
    a strategic merge patch shows the patch, the others the patched object."""
    shown = go_format(patch) if patch_type == "strategic" else orjson.dumps(patched, option=orjson.OPT_SORT_KEYS).decode()
    return invalid_patch(shown, error)


def _invalid_patch_result(result: Any) -> ApiError:
    """422 for a patched document that is not an object (upstream fails decoding it)."""
    rendered = json.dumps(result, separators=(",", ":"))
    return invalid_patch(rendered, f"json: cannot unmarshal {go_json_type(result)} into Go value of type map[string]interface {{}}")


_JSON_PATCH_FIELDS = ("op", "path", "from", "value")


def check_patch_types(patch: Any, patch_type: str) -> None:
    """The typed decoding upstream's patchers do first under fieldValidation Warn or Strict: a JSON
    patch into a list of operations whose op, path and from are strings, a merge patch into an
    object (400 ``error decoding patch: ...``)."""
    if patch is None:
        return
    if patch_type == "json":
        if not isinstance(patch, list):
            raise bad_request(f"error decoding patch: json: cannot unmarshal {go_json_type(patch)} into Go value of type []handlers.jsonPatchOp")
        for op in patch:
            if op is not None and not isinstance(op, dict):
                raise bad_request(f"error decoding patch: json: cannot unmarshal {go_json_type(op)} into Go value of type handlers.jsonPatchOp")
            for field in ("op", "path", "from"):
                value = (op or {}).get(field)
                if value is not None and not isinstance(value, str):
                    raise bad_request(f"error decoding patch: json: cannot unmarshal {go_json_type(value)} into Go struct field jsonPatchOp.{field} of type string")
    elif patch_type == "merge" and not isinstance(patch, dict):
        raise bad_request(f"error decoding patch: json: cannot unmarshal {go_json_type(patch)} into Go value of type map[string]interface {{}}")


def patch_strict_errors(patch: Any, patch_type: str, duplicates: list[str]) -> list[str]:
    """The strict decoding errors of the patch itself, in document order: its repeated keys, and
    for a JSON patch the operations' unknown fields (both named ``json patch ...``)."""
    if patch_type != "json":
        return [f'duplicate field "{path}"' for path in duplicates]
    unknown = [
        f"[{index}].{key}"
        for index, op in enumerate(patch if isinstance(patch, list) else [])
        if isinstance(op, dict)
        for key in op
        if key not in _JSON_PATCH_FIELDS
    ]
    positions = bodies.document_positions(patch) if duplicates and unknown else None
    found = bodies.DecodeFindings(duplicate_fields=duplicates).strict_errors(unknown, positions)
    return [f"json patch {error}" for error in found]


# --------------------------------------------------------------------------------------------------
# Merge patch (RFC 7386)


def _prune_nulls(value: Any) -> Any:
    """A copy of a value being added, without null object members or null array elements."""
    if isinstance(value, dict):
        return {k: _prune_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_prune_nulls(v) for v in value if v is not None]
    return value


def _merge_patch_docs(doc: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            doc.pop(key, None)
            continue
        current = doc.get(key)
        if key not in doc or not isinstance(current, dict):
            doc[key] = _prune_nulls(value)
        elif isinstance(value, dict):
            _merge_patch_docs(current, value)
        else:
            doc[key] = clone(value)


def apply_merge_patch(doc: dict[str, Any], patch: Any, *, owned: bool = False) -> dict[str, Any]:
    """Apply an RFC 7386 JSON merge patch (already parsed from JSON) to ``doc`` (in place if ``owned``)."""
    if isinstance(patch, list):
        raise _invalid_patch_result(_prune_nulls(patch))
    if not isinstance(patch, dict):
        raise bad_request("Invalid JSON Patch")
    result = doc if owned else clone(doc)
    _merge_patch_docs(result, patch)
    return result


# --------------------------------------------------------------------------------------------------
# Strategic merge patch


def _strategy(node: SchemaNode | None) -> tuple[str, str]:
    """(effective patch strategy, merge key) of a field, with ``retainKeys`` split off."""
    if node is None:
        return "", ""
    strategy, merge_key = node.patch_strategy
    if not strategy:
        return "", merge_key or ""
    parts = strategy.split(",")
    others = [p for p in parts if p != "retainKeys"]
    if len(parts) > 2 or len(others) > 1:
        raise _internal(f"unexpected patch strategy: {go_format(parts)}")
    return (others[0] if others else ""), merge_key or ""


def _strip_added(value: Any) -> tuple[Any, bool]:
    """What upstream keeps of a patch value that has nothing to merge with.

    Null members are dropped, and so is every map carrying a ``$patch`` directive; other ``$``
    keys stay, to be unknown fields of the result (warned of, refused by Strict, else dropped).
    The second item is False when the value itself is to be dropped.
    """
    if isinstance(value, dict):
        if _DIRECTIVE in value:
            return None, False
        out: dict[str, Any] = {}
        for key, child in value.items():
            if child is None:
                continue
            kept, keep = _strip_added(child)
            if keep:
                out[key] = kept
        return out, True
    if isinstance(value, list):
        items = []
        for child in value:
            kept, keep = _strip_added(child)
            if keep:
                items.append(kept)
        return items, True
    return value, True


def _strip_children(value: dict[str, Any]) -> dict[str, Any]:
    """A map used wholesale (``$patch: replace``, a replace strategy, a new list item): upstream
    takes it as it is, but for the ``$patch`` directive itself."""
    return {key: clone(child) for key, child in value.items() if key != _DIRECTIVE}


def _no_merge_key(item: dict[str, Any], merge_key: str) -> ApiError:
    return _internal(f"map: {go_format(item)} does not contain declared merge key: {merge_key}")


def _bad_arg_type(expected: str, actual: Any) -> ApiError:
    return _internal(f"expected a {expected}, but received a {go_type_name(actual)}")


def _element_kind(*lists: list[Any]) -> type | None:
    """The common type of the elements (upstream's sliceElementType), or None if all are empty."""
    kind: type | None = None
    for items in lists:
        for item in items:
            current: type = type(item)
            if kind is None:
                if current is list:
                    raise _unprocessable_smp(ERR_NO_LIST_OF_LISTS)
                kind = current
            elif kind is not current:
                rendered = " ".join(go_format(x) for x in lists)
                raise _internal(f"list element types are not identical: [{rendered}]")
    return kind


def _unprocessable_smp(message: str) -> ApiError:
    err = ApiError(422, "Invalid", _GENERIC_INVALID, {})
    err.__cause__ = PatchApplyError(message)
    return err


def _key_of(item: Any, merge_key: str) -> Any:
    return item.get(merge_key) if isinstance(item, dict) else None


def _index_of(items: list[Any], wanted: Any, merge_key: str, is_map: bool) -> int:
    if is_map:
        value = _key_of(wanted, merge_key)
        for i, item in enumerate(items):
            if _key_of(item, merge_key) == value:
                return i
        return -1
    for i, item in enumerate(items):
        if item == wanted and type(item) is type(wanted):
            return i
    return -1


def _require_merge_keys(merge_key: str, *lists: list[Any]) -> None:
    for items in lists:
        for item in items:
            if not isinstance(item, dict):
                raise _bad_arg_type("map[string]interface {}", item)
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)


def _normalize_order(
    patch_items: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    merge_key: str,
    is_map: bool,
) -> list[Any]:
    """Order patched items as the patch does and server-only items as the live list, interleaved."""
    if is_map:
        _require_merge_keys(merge_key, patch_items, patch_order, server_only, server_order)

    def by(order: list[Any]) -> Any:
        def key(item: Any) -> int:
            index = _index_of(order, item, merge_key, is_map)
            return index if index >= 0 else len(order)

        return key

    patch_items = sorted(patch_items, key=by(patch_order))
    server_only = sorted(server_only, key=by(server_order))
    merged: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(patch_items):
        if i >= len(server_only):
            merged.append(patch_items[j])
            j += 1
        elif j >= len(patch_items):
            merged.append(server_only[i])
            i += 1
        else:
            left = _index_of(server_order, server_only[i], merge_key, is_map)
            right = _index_of(server_order, patch_items[j], merge_key, is_map)
            if left >= 0 and right >= 0 and left < right:
                merged.append(server_only[i])
                i += 1
            else:
                merged.append(patch_items[j])
                j += 1
    return merged


def _partition(merged: list[Any], by: list[Any], merge_key: str) -> tuple[list[Any], list[Any]]:
    in_patch: list[Any] = []
    server_only: list[Any] = []
    if merge_key:
        for item in merged:
            if not isinstance(item, dict):
                raise _bad_arg_type("map[string]interface {}", item)
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
            found = any(isinstance(p, dict) and p.get(merge_key) == item[merge_key] for p in by)
            (in_patch if found else server_only).append(item)
    else:
        for item in merged:
            (in_patch if _index_of(by, item, "", False) >= 0 else server_only).append(item)
    return in_patch, server_only


def _dedupe_scalars(items: list[Any]) -> list[Any]:
    seen: list[Any] = []
    for item in items:
        if _index_of(seen, item, "", False) < 0:
            seen.append(item)
    return seen


def _merge_list(
    original: list[Any],
    patch: list[Any],
    node: SchemaNode | None,
    merge_key: str,
    is_delete_list: bool,
) -> list[Any]:
    """Merge a list whose patch strategy is ``merge``."""
    if not original and not patch:
        return original
    kind = _element_kind(original, patch)
    if kind is not dict:
        if is_delete_list:
            return [item for item in original if _index_of(patch, item, "", False) < 0]
        merged = _dedupe_scalars(original + [clone(p) for p in patch])
        in_patch, server_only = _partition(merged, patch, "")
        return _normalize_order(in_patch, server_only, patch, original, "", False)
    if not merge_key:
        raise _internal("cannot merge lists without merge key for type map")
    item_node = node.items() if node is not None else None
    plain: list[dict[str, Any]] = []
    replace = False
    for item in patch:
        if _DIRECTIVE not in item:
            plain.append(item)
            continue
        directive = item[_DIRECTIVE]
        if directive == "delete":
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
            original = [o for o in original if not (isinstance(o, dict) and o.get(merge_key) == item[merge_key])]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise _internal("merging lists cannot yet be specified in the patch")
        else:
            raise _internal(f"unknown patch type: {go_format(directive)} in map: {go_format(item)}")
    if replace:
        original = [_strip_children(p) for p in plain]
        plain = []
    merged = list(original)
    for item in plain:
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
        for index, existing in enumerate(merged):
            if not isinstance(existing, dict):
                raise _internal(f"value for key {index} is not a map.")
            if merge_key in existing and existing[merge_key] == item[merge_key]:
                merged[index] = _merge_map(existing, item, item_node)
                break
        else:
            merged.append(_strip_children(item))
    in_patch, server_only = _partition(merged, plain, merge_key)
    return _normalize_order(in_patch, server_only, plain, original, merge_key, True)


def _merge_list_field(
    original: list[Any],
    patch: list[Any],
    node: SchemaNode | None,
    is_delete_list: bool,
) -> list[Any]:
    strategy, merge_key = _strategy(node)
    # A deletion list is merged whatever the field's strategy; any other list is replaced by
    # the patch's as it is.
    if strategy == "merge" or is_delete_list:
        return _merge_list(original, patch, node, merge_key, is_delete_list)
    return clone(patch)


def _extract_key(key: str, prefix: str, error: str) -> str:
    head, sep, rest = key.partition("/")
    if not sep or head != prefix:
        raise bad_request(error)
    return rest


def _validate_set_order(patch_list: list[Any], order: list[Any], merge_key: str) -> None:
    """The patch list must follow the ``$setElementOrder`` list (deleted items aside)."""
    if not order or not patch_list:
        return
    if merge_key:
        for item in patch_list:
            if not isinstance(item, dict):
                raise _bad_arg_type("map[string]interface {}", item)
        candidates = [p for p in patch_list if p.get(_DIRECTIVE) != "delete"]
    else:
        candidates = patch_list
    p = s = 0
    while p < len(candidates) and s < len(order):
        current = candidates[p]
        if isinstance(current, dict) and _DIRECTIVE in current:
            p += 1
            continue
        if merge_key:
            if not isinstance(order[s], dict):
                raise _bad_arg_type("map[string]interface {}", order[s])
            if merge_key not in current:
                raise _no_merge_key(current, merge_key)
            if merge_key not in order[s]:
                raise _no_merge_key(order[s], merge_key)
            equal = current[merge_key] == order[s][merge_key]
        else:
            equal = current == order[s]
        if equal:
            p += 1
        s += 1
    if p < len(candidates) and s >= len(order):
        raise _internal(
            f"the order in patch list:\n{go_format(patch_list)}\n doesn't match {_SET_ELEMENT_ORDER} list:\n"
            f"{go_format(order)}"
        )


def _apply_set_element_order(
    original: dict[str, Any],
    patch: dict[str, Any],
    node: SchemaNode | None,
    handled: set[str],
) -> None:
    for key, order in patch.items():
        if not key.startswith(_SET_ELEMENT_ORDER):
            continue
        if not isinstance(order, list):
            raise _bad_arg_type("[]interface {}", order)
        field = _extract_key(key, _SET_ELEMENT_ORDER, ERR_BAD_SET_ELEMENT_ORDER)
        if node is not None and node.has_properties and node.property(field) is None:
            # upstream looks the list up in the Go struct before anything else.
            struct = (node.definition_name or "").rsplit(".", 1)[-1]
            raise _internal(f'unable to find api field in struct {struct} for the json field "{field}"')
        has_original = field in original and original[field] is not None
        has_patch = field in patch and patch[field] is not None
        original_list = original.get(field) if has_original else []
        patch_list = patch.get(field) if has_patch else []
        if not isinstance(original_list, list):
            raise _bad_arg_type("[]interface {}", original_list)
        if not isinstance(patch_list, list):
            raise _bad_arg_type("[]interface {}", patch_list)
        child = node.child(field) if node is not None else None
        _, merge_key = _strategy(child)
        _validate_set_order(patch_list, order, merge_key)
        if has_original and has_patch:
            merged = _merge_list_field(original_list, patch_list, child, False)
        elif has_original:
            merged = original_list
        elif has_patch:
            stripped, _ = _strip_added(patch_list)
            merged = list(stripped)
        else:
            continue
        kind = _element_kind(original_list, patch_list)
        if kind is None:
            raise _internal("no elements in any of the given slices")
        in_patch, server_only = _partition(merged, order, merge_key)
        original[field] = _normalize_order(in_patch, server_only, order, original_list, merge_key, kind is dict)
        handled.add(field)


def _merge_map(original: dict[str, Any], patch: dict[str, Any], node: SchemaNode | None) -> dict[str, Any]:
    """Merge ``patch`` into ``original`` (owned by the caller and changed in place)."""
    if _DIRECTIVE in patch:
        directive = patch[_DIRECTIVE]
        if directive == "replace":
            return _strip_children(patch)
        if directive == "delete":
            return {}
        raise _internal(f"unknown patch type: {go_format(directive)} in map: {go_format(patch)}")

    if _RETAIN_KEYS in patch:
        retain = patch[_RETAIN_KEYS]
        if not isinstance(retain, list):
            raise bad_request(ERR_BAD_RETAIN_KEYS)
        for key, value in patch.items():
            if key == _RETAIN_KEYS or value is None:
                continue
            if key.startswith(_DELETE_FROM_PRIMITIVE_LIST) or key.startswith(_SET_ELEMENT_ORDER):
                continue
            if key not in retain:
                raise bad_request(ERR_BAD_RETAIN_KEYS)
        for key in [k for k in original if k not in retain]:
            del original[key]

    handled: set[str] = set()
    _apply_set_element_order(original, patch, node, handled)

    for key, value in patch.items():
        if key == _RETAIN_KEYS or key.startswith(_SET_ELEMENT_ORDER) or key in handled:
            continue
        is_delete_list = False
        if key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            key = _extract_key(key, _DELETE_FROM_PRIMITIVE_LIST, ERR_BAD_PRIMITIVE_LIST)
            is_delete_list = True
        if value is None:
            original.pop(key, None)
            continue
        current = original.get(key)
        if key not in original or current is None or type(current) is not type(value):
            if not is_delete_list:
                kept, keep = _strip_added(value)
                if keep:
                    original[key] = kept
                else:
                    original.pop(key, None)
            continue
        child = node.child(key) if node is not None else None
        if isinstance(current, dict):
            strategy, _ = _strategy(child)
            if strategy == "replace":
                original[key] = clone(value)
            else:
                original[key] = _merge_map(current, value, child)
        elif isinstance(current, list):
            original[key] = _merge_list_field(current, value, child, is_delete_list)
        else:
            original[key] = value
    return original


def apply_strategic_merge_patch(doc: dict[str, Any], patch: Any, schema: SchemaNode | None, *, owned: bool = False) -> dict[str, Any]:
    """Apply a strategic merge patch using the kind's schema for list strategies and merge keys.

    Without a schema (or below fields without patch metadata) lists are replaced and maps merged,
    which is what upstream does for such fields; the ``$patch``/``$retainKeys``/``$setElementOrder``/
    ``$deleteFromPrimitiveList`` directives are honoured everywhere. ``owned``: ``doc`` is the
    caller's own copy, changed in place rather than copied first.
    """
    if patch is None:
        return doc if owned else clone(doc)
    if not isinstance(patch, dict):
        raise bad_request(
            f"json: cannot unmarshal {go_json_type(patch)} into Go value of type map[string]interface {{}}"
        )
    return _merge_map(doc if owned else clone(doc), patch, schema)
