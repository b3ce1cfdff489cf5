"""OpenAPI documents (v3 per group-version, v2 for everything) generated from the registry.

Schemas come from the official v1.37 definitions that ``kubernetes-validate`` ships
(JSON Schema 2020-12) and are converted to OpenAPI 3.0 / Swagger 2.0; paths are
generated from the served kinds. kubectl needs, per kind, a PATCH operation carrying
the kind's ``x-kubernetes-group-version-kind`` (an object) and a ``fieldValidation``
query parameter, or it falls back to protobuf ``/openapi/v2`` and fails
(kubectl's OpenAPI v3 client needs both). Create, patch and delete bodies carry an ``example`` that the server
accepts (see "request body examples"). Documents are built once, then served from cached bytes.

The returned dicts are shared caches: callers must not mutate them.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib.resources
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from app.api.discovery import resource_verbs
from app.registry import group_versions, kinds_in
from app.registry.base import KindStrategy, Subresource
from kube.objects import Obj

_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
STATUS = _META + "Status"
DELETE_OPTIONS = _META + "DeleteOptions"
PATCH = _META + "Patch"
WATCH_EVENT = _META + "WatchEvent"
API_RESOURCE_LIST = _META + "APIResourceList"

JSON = "application/json"
YAML = "application/yaml"
WATCH_JSON = "application/json;stream=watch"
JSON_PATCH = "application/json-patch+json"
PATCH_CONTENT_TYPES = (
    "application/apply-patch+yaml",
    JSON_PATCH,
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)
_BODY_CONTENT_TYPES = (JSON, YAML)
_RESPONSE_CONTENT_TYPES = (JSON, YAML)

_V3_REF = "#/components/schemas/"
_V2_REF = "#/definitions/"
_SRC_REF = "#/$defs/"

# RFC 6902 operations: a JSON patch body is an array, not the object that meta.v1.Patch describes.
_JSON_PATCH_SCHEMA: Obj = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["op", "path"],
        "properties": {
            "op": {"type": "string", "enum": ["add", "remove", "replace", "move", "copy", "test"]},
            "path": {"type": "string"},
            "from": {"type": "string"},
            "value": {},
        },
    },
}

_SECURITY_DESCRIPTION = "Bearer Token authentication"


# ---- request body examples ---------------------------------------------------------
# Each kind declares a minimal object the server accepts on create (``create_example``), so that
# clients and fuzzers (schemathesis mixes examples into what it generates) reach the states
# behind a successful create. tests/app/api/test_openapi_examples.py creates every one of them.

_EXAMPLE_METADATA: Obj = {"generateName": "example-"}
# Valid for every kind and subresource: labels (ignored by status updates, which still succeed).
_MERGE_PATCH_EXAMPLE: Obj = {"metadata": {"labels": {"example": "true"}}}
_JSON_PATCH_EXAMPLE: list[Obj] = [{"op": "add", "path": "/metadata/labels", "value": {"example": "true"}}]
_DELETE_OPTIONS_EXAMPLE: Obj = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}


def create_example(strategy: KindStrategy) -> Obj | None:
    """A minimal object of the kind that creating succeeds for (``generateName``), or None when there is none."""
    if strategy.create_example is None:
        return None
    return {"apiVersion": strategy.api_version, "kind": strategy.kind, "metadata": dict(_EXAMPLE_METADATA), **copy.deepcopy(strategy.create_example)}


def _patch_example(content_type: str) -> Any:
    if content_type == JSON_PATCH:
        return copy.deepcopy(_JSON_PATCH_EXAMPLE)
    if content_type in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
        return copy.deepcopy(_MERGE_PATCH_EXAMPLE)
    return None  # an apply patch must name the object it applies to


# ---- official schemas ----------------------------------------------------------


@functools.cache
def source_definitions() -> dict[str, Obj]:
    """The official v1.37 definitions (JSON Schema 2020-12 ``$defs``), read once."""
    resource = importlib.resources.files("kubernetes_validate").joinpath(
        "kubernetes-json-schema", "v1.37.0-local", "_definitions.json"
    )
    defs: dict[str, Obj] = json.loads(resource.read_text(encoding="utf-8"))["$defs"]
    return defs


@functools.cache
def _definitions_by_gvk() -> dict[tuple[str, str, str], str]:
    index: dict[tuple[str, str, str], str] = {}
    for name, schema in source_definitions().items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            index.setdefault((gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", "")), name)
    return index


def definition_name(group: str, version: str, kind: str) -> str:
    """The definition name of a kind (``io.k8s.api.resource.v1.ResourceClaim``)."""
    try:
        return _definitions_by_gvk()[(group, version, kind)]
    except KeyError:
        raise LookupError(f"no official schema for {group or 'core'}/{version} {kind}") from None


def _served_group_versions() -> frozenset[tuple[str, str]]:
    return frozenset(group_versions())


def _served_api_versions() -> frozenset[str]:
    return frozenset(f"{g}/{v}" if g else v for g, v in group_versions())


def _trim_shared(schema: Obj) -> Obj:
    """Narrow definitions shared by every group (DeleteOptions, WatchEvent) to what this server serves."""
    gvks = schema.get("x-kubernetes-group-version-kind")
    if not isinstance(gvks, list) or len(gvks) <= 1:
        return schema
    served = _served_group_versions()
    schema = copy.deepcopy(schema)
    kept = [g for g in gvks if (g.get("group", ""), g.get("version", "")) in served]
    schema["x-kubernetes-group-version-kind"] = kept or gvks
    api_version = (schema.get("properties") or {}).get("apiVersion")
    if isinstance(api_version, dict) and isinstance(api_version.get("enum"), list):
        api_versions = _served_api_versions()
        api_version["enum"] = [v for v in api_version["enum"] if v in api_versions] or api_version["enum"]
    return schema


def _refs(node: Any) -> Iterator[str]:
    """Definition names referenced anywhere in ``node`` (any of the three ref styles)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value.rsplit("/", 1)[-1]
            elif not key.startswith("x-"):
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _closure(roots: Iterable[str]) -> list[str]:
    defs = source_definitions()
    seen: set[str] = set()
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        if name not in defs:
            raise LookupError(f"schema {name} is referenced but not defined")
        seen.add(name)
        pending.extend(_refs(defs[name]))
    return sorted(seen)


# ---- schema conversion -----------------------------------------------------------

_SCHEMA_MAPS = ("properties", "patternProperties")
_SCHEMA_VALUES = ("items", "additionalProperties", "not")
_SCHEMA_LISTS = ("oneOf", "anyOf", "allOf")
_DROPPED = ("$schema", "$id", "$defs")


def _split_type(value: Any) -> tuple[Any, bool]:
    """``["string", "null"]`` -> ("string", True); a plain type -> (type, False)."""
    if not isinstance(value, list):
        return value, False
    types = [t for t in value if t != "null"]
    return (types[0] if len(types) == 1 else types), "null" in value


def _to_v3(node: Any, in_one_of: bool = False) -> Any:
    if not isinstance(node, dict):
        return node
    out: Obj = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key.startswith("x-"):
            out[key] = copy.deepcopy(value)
        elif key == "type":
            out["type"], nullable = _split_type(value)
            # OpenAPI 3.0 cannot make a oneOf nullable per branch: null would match every branch.
            if nullable and not in_one_of:
                out["nullable"] = True
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _to_v3(sub) for name, sub in value.items()}
        elif key in _SCHEMA_VALUES and isinstance(value, dict):
            out[key] = _to_v3(value)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_to_v3(sub, in_one_of=key == "oneOf") for sub in value]
        elif key == "$ref" and isinstance(value, str):
            out[key] = _V3_REF + value.removeprefix(_SRC_REF)
        else:
            out[key] = copy.deepcopy(value)
    if "$ref" in out and len(out) > 1:
        # Siblings of $ref are ignored in OpenAPI 3.0; allOf keeps the descriptions visible to kubectl explain.
        ref = out.pop("$ref")
        out = {"allOf": [{"$ref": ref}], **out}
    return out


def _to_v2(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if isinstance(node.get("oneOf"), list):
        # Quantity and IntOrString: Swagger 2.0 has no oneOf; upstream writes them as strings.
        types = {_split_type(branch.get("type"))[0] for branch in node["oneOf"] if isinstance(branch, dict)}
        out: Obj = {k: copy.deepcopy(v) for k, v in node.items() if k != "oneOf"}
        out["type"] = "string"
        if "integer" in types:
            out["format"] = "int-or-string"
        return out
    out = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key.startswith("x-"):
            out[key] = copy.deepcopy(value)
        elif key == "type":
            out["type"] = _split_type(value)[0]
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _to_v2(sub) for name, sub in value.items()}
        elif key in _SCHEMA_VALUES and isinstance(value, dict):
            out[key] = _to_v2(value)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_to_v2(sub) for sub in value]
        elif key == "$ref" and isinstance(value, str):
            out[key] = _V2_REF + value.removeprefix(_SRC_REF)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _converted(names: Iterable[str], v3: bool) -> Obj:
    defs = source_definitions()
    convert = _to_v3 if v3 else _to_v2
    return {name: convert(_trim_shared(defs[name])) for name in names}


# ---- the neutral operation model -----------------------------------------------------


@dataclass(frozen=True)
class _QueryParam:
    type: str
    description: str
    enum: tuple[str, ...] = ()


_QUERY_PARAMS: dict[str, _QueryParam] = {
    "allowWatchBookmarks": _QueryParam("boolean", "Ask for BOOKMARK events on a watch; ignored unless watch is true."),
    "continue": _QueryParam("string", "Opaque token from a previous paginated list response, to fetch the next page."),
    "dryRun": _QueryParam("string", "All: run every stage of the request but persist nothing.", ("All",)),
    "fieldManager": _QueryParam(
        "string", "Name of the actor making the change, recorded in managedFields; required for apply patches."
    ),
    "fieldSelector": _QueryParam("string", "Restrict the returned objects by field values (default: all)."),
    "fieldValidation": _QueryParam(
        "string",
        "How to treat unknown or duplicate fields in the body: Ignore (drop silently), Warn (drop and add a "
        "Warning header, the default) or Strict (reject with 400).",
        ("Ignore", "Warn", "Strict"),
    ),
    "force": _QueryParam("boolean", "Apply patches only: take over fields owned by other managers."),
    "gracePeriodSeconds": _QueryParam(
        "integer", "Seconds before the object is deleted; 0 deletes immediately, unset uses the kind's default."
    ),
    "labelSelector": _QueryParam("string", "Restrict the returned objects by labels (default: all)."),
    "limit": _QueryParam(
        "integer", "Maximum number of items in a list response; more are announced by metadata.continue."
    ),
    "orphanDependents": _QueryParam(
        "boolean", "Deprecated in favour of propagationPolicy: whether dependents are orphaned."
    ),
    "pretty": _QueryParam("string", "If 'true', the output is indented."),
    "propagationPolicy": _QueryParam(
        "string", "Whether and how dependents are garbage collected.", ("Orphan", "Background", "Foreground")
    ),
    "resourceVersion": _QueryParam(
        "string", "Constrain which resource version the response is served from (see resourceVersionMatch)."
    ),
    "resourceVersionMatch": _QueryParam(
        "string", "How resourceVersion applies to a list: NotOlderThan or Exact.", ("NotOlderThan", "Exact")
    ),
    "sendInitialEvents": _QueryParam(
        "boolean",
        "With watch=true and resourceVersionMatch=NotOlderThan: start the stream with the current objects, "
        "then a BOOKMARK annotated k8s.io/initial-events-end.",
    ),
    "timeoutSeconds": _QueryParam("integer", "Close the list or watch call after this many seconds."),
    "watch": _QueryParam("boolean", "Stream add, update and delete notifications instead of returning a list."),
}

_LIST_PARAMS = (
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
)
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
_PATCH_PARAMS = ("dryRun", "fieldManager", "fieldValidation", "force")
_DELETE_PARAMS = ("dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy")
_DELETECOLLECTION_PARAMS = tuple(sorted(set(_LIST_PARAMS) - {"allowWatchBookmarks", "watch"} | set(_DELETE_PARAMS)))


@dataclass(frozen=True)
class _Body:
    schema: str
    required: bool
    patch: bool = False
    example: Obj | None = None


@dataclass(frozen=True)
class _Response:
    description: str
    schemas: tuple[str, ...]  # more than one: the body is any of them
    watch: bool = False


@dataclass(frozen=True)
class _Operation:
    method: str
    operation_id: str
    description: str
    action: str
    gvk: tuple[str, str, str]
    tag: str
    params: tuple[str, ...]
    body: _Body | None
    responses: dict[str, _Response]


@dataclass
class _PathItem:
    path_params: list[tuple[str, str]]
    operations: dict[str, _Operation] = field(default_factory=dict)


def group_camel(group: str) -> str:
    """``resource.k8s.io`` -> ``Resource``, ``rbac.authorization.k8s.io`` -> ``RbacAuthorization``, core -> ``Core``."""
    if not group:
        return "Core"
    return "".join(part[:1].upper() + part[1:] for part in group.removesuffix(".k8s.io").replace("-", ".").split("."))


def operation_tag(group: str, version: str) -> str:
    """Upstream's tag: ``resource_v1``, ``core_v1``."""
    camel = group_camel(group)
    return f"{camel[:1].lower()}{camel[1:]}_{version}"


def _prefix(group: str, version: str) -> str:
    return f"/apis/{group}/{version}" if group else f"/api/{version}"


def _ok(schema: str, *codes: str, watch: bool = False) -> dict[str, _Response]:
    names = {"200": "OK", "201": "Created", "202": "Accepted"}
    return {code: _Response(names[code], (schema,), watch) for code in codes}


def _delete_responses(strategy: KindStrategy, obj: str) -> dict[str, _Response]:
    """The deleted object, or the object as it is while finalizers or a grace period keep it.

    Kinds that do not return the deleted object answer 200 with a Status once it is gone, and, as
    upstream, 200 with the object while finalizers or a grace period keep it (after
    ``propagationPolicy=Orphan``, say). Swagger 2.0 shows only the first, Status, as upstream's does.
    """
    if strategy.return_deleted_object:
        return _ok(obj, "200", "202")
    return {"200": _Response("OK", (STATUS, obj)), **_ok(obj, "202")}


def _kind_paths(strategy: KindStrategy) -> dict[str, _PathItem]:
    group, version, kind = strategy.group, strategy.version, strategy.kind
    gvk = (group, version, kind)
    camel = f"{group_camel(group)}{version[:1].upper()}{version[1:]}"
    scope = "Namespaced" if strategy.namespaced else ""
    tag = operation_tag(group, version)
    obj = definition_name(group, version, kind)
    verbs = set(resource_verbs(strategy))
    # Kinds that are only ever created (the reviews) have no list kind.
    obj_list = definition_name(group, version, strategy.list_kind) if "list" in verbs else ""

    def op(
        method: str,
        verb: str,
        action: str,
        description: str,
        params: tuple[str, ...],
        body: _Body | None,
        responses: dict[str, _Response],
        *,
        infix: str = "",
        suffix: str = "",
        op_gvk: tuple[str, str, str] = gvk,
        op_scope: str = scope,
    ) -> _Operation:
        return _Operation(
            method,
            f"{verb}{camel}{infix}{op_scope}{kind}{suffix}",
            description,
            action,
            op_gvk,
            tag,
            params,
            body,
            responses,
        )

    ns_param = [("namespace", "namespace of the objects")]
    name_param = [("name", f"name of the {kind}")]
    base = _prefix(group, version)
    collection_path = (
        f"{base}/namespaces/{{namespace}}/{strategy.plural}" if strategy.namespaced else f"{base}/{strategy.plural}"
    )
    scope_params = ns_param if strategy.namespaced else []
    paths: dict[str, _PathItem] = {}

    collection = _PathItem(list(scope_params))
    def list_op(suffix: str = "", op_scope: str = scope) -> _Operation:
        return op(
            "get", "list", "list", f"list or watch objects of kind {kind}", _LIST_PARAMS, None, _ok(obj_list, "200", watch=True),
            suffix=suffix, op_scope=op_scope,
        )

    if "list" in verbs:
        collection.operations["get"] = list_op()
    if "create" in verbs:
        collection.operations["post"] = op(
            "post",
            "create",
            "post",
            f"create a {kind}",
            _WRITE_PARAMS,
            _Body(obj, True, example=create_example(strategy)),
            _ok(obj, "200", "201", "202"),
        )
    if "deletecollection" in verbs:
        collection.operations["delete"] = op(
            "delete",
            "delete",
            "deletecollection",
            f"delete collection of {kind}",
            _DELETECOLLECTION_PARAMS,
            _Body(DELETE_OPTIONS, False, example=_DELETE_OPTIONS_EXAMPLE),
            {"200": _Response("OK", (STATUS, obj_list))},
            infix="Collection",
        )
    paths[collection_path] = collection

    item = _PathItem(name_param + scope_params)
    if "get" in verbs:
        item.operations["get"] = op("get", "read", "get", f"read the specified {kind}", (), None, _ok(obj, "200"))
    if "update" in verbs:
        item.operations["put"] = op(
            "put",
            "replace",
            "put",
            f"replace the specified {kind}",
            _WRITE_PARAMS,
            _Body(obj, True),
            _ok(obj, "200", "201"),
        )
    if "patch" in verbs:
        item.operations["patch"] = op(
            "patch",
            "patch",
            "patch",
            f"partially update the specified {kind}",
            _PATCH_PARAMS,
            _Body(PATCH, True, patch=True),
            _ok(obj, "200", "201"),
        )
    if "delete" in verbs:
        item.operations["delete"] = op(
            "delete",
            "delete",
            "delete",
            f"delete a {kind}",
            _DELETE_PARAMS,
            _Body(DELETE_OPTIONS, False, example=_DELETE_OPTIONS_EXAMPLE),
            _delete_responses(strategy, obj),
        )
    paths[f"{collection_path}/{{name}}"] = item

    for sub in strategy.subresources:
        paths[f"{collection_path}/{{name}}/{sub.name}"] = _subresource_item(strategy, sub, op, scope_params)

    if strategy.namespaced and "list" in verbs:
        everywhere = _PathItem([])
        everywhere.operations["get"] = list_op(suffix="ForAllNamespaces", op_scope="")
        paths[f"{base}/{strategy.plural}"] = everywhere
    return {path: entry for path, entry in paths.items() if entry.operations}


def _subresource_item(strategy: KindStrategy, sub: Subresource, op: Callable[..., _Operation], scope_params: list[tuple[str, str]]) -> _PathItem:
    """The operations of a subresource path, from the verbs the kind declares for it."""
    kind = strategy.kind
    sub_gvk = sub.group_version_kind(strategy)
    sub_obj = definition_name(*sub_gvk)
    suffix = sub.name[:1].upper() + sub.name[1:]
    item = _PathItem([("name", f"name of the {sub_gvk[2]}"), *scope_params])
    if "get" in sub.verbs:
        item.operations["get"] = op(
            "get", "read", "get", f"read {sub.name} of the specified {kind}", (), None, _ok(sub_obj, "200"), suffix=suffix
        )
    if "update" in sub.verbs:
        item.operations["put"] = op(
            "put",
            "replace",
            "put",
            f"replace {sub.name} of the specified {kind}",
            _WRITE_PARAMS,
            _Body(sub_obj, True),
            _ok(sub_obj, "200", "201"),
            suffix=suffix,
        )
    if "patch" in sub.verbs:
        item.operations["patch"] = op(
            "patch",
            "patch",
            "patch",
            f"partially update {sub.name} of the specified {kind}",
            _PATCH_PARAMS,
            _Body(PATCH, True, patch=True),
            _ok(sub_obj, "200", "201"),
            suffix=suffix,
        )
    if "create" in sub.verbs:
        item.operations["post"] = op(
            "post",
            "create",
            "post",
            f"create {sub.name} of a {kind}",
            _WRITE_PARAMS,
            _Body(sub_obj, True),
            {"201": _Response("Created", (STATUS,))} if sub.answers_status else _ok(sub_obj, "200", "201", "202"),
            suffix=suffix,
            op_gvk=sub_gvk,
        )
    return item


def _paths(group_version_pairs: Iterable[tuple[str, str]]) -> dict[str, _PathItem]:
    paths: dict[str, _PathItem] = {}
    for group, version in group_version_pairs:
        for strategy in kinds_in(group, version):
            paths.update(_kind_paths(strategy))
    return dict(sorted(paths.items()))


def _roots(group_version_pairs: Iterable[tuple[str, str]], paths: dict[str, _PathItem]) -> set[str]:
    roots = {STATUS, DELETE_OPTIONS, PATCH, WATCH_EVENT, API_RESOURCE_LIST}
    for group, version in group_version_pairs:
        for strategy in kinds_in(group, version):
            roots.add(definition_name(group, version, strategy.kind))
            if "list" in resource_verbs(strategy):
                roots.add(definition_name(group, version, strategy.list_kind))
            roots.update(definition_name(*sub.group_version_kind(strategy)) for sub in strategy.subresources)
    for entry in paths.values():
        for operation in entry.operations.values():
            if operation.body is not None:
                roots.add(operation.body.schema)
            for response in operation.responses.values():
                roots.update(response.schemas)
    return roots


def _gvk_object(gvk: tuple[str, str, str]) -> Obj:
    return {"group": gvk[0], "kind": gvk[2], "version": gvk[1]}


# ---- OpenAPI 3.0 rendering --------------------------------------------------------


def _v3_ref(name: str) -> Obj:
    return {"$ref": _V3_REF + name}


def _v3_query(name: str) -> Obj:
    spec = _QUERY_PARAMS[name]
    schema: Obj = {"type": spec.type}
    if spec.enum:
        schema["enum"] = list(spec.enum)
    return {"name": name, "in": "query", "description": spec.description, "schema": schema}


def _v3_response(response: _Response) -> Obj:
    refs = [_v3_ref(name) for name in response.schemas]
    schema = refs[0] if len(refs) == 1 else {"anyOf": refs}
    content = {ct: {"schema": schema} for ct in _RESPONSE_CONTENT_TYPES}
    if response.watch:
        content[WATCH_JSON] = {"schema": _v3_ref(WATCH_EVENT)}
    return {"description": response.description, "content": content}


def _v3_status_default() -> Obj:
    return {"description": "Error", "content": {ct: {"schema": _v3_ref(STATUS)} for ct in _RESPONSE_CONTENT_TYPES}}


def _v3_operation(operation: _Operation) -> Obj:
    out: Obj = {"description": operation.description, "operationId": operation.operation_id}
    if operation.params:
        out["parameters"] = [_v3_query(name) for name in operation.params]
    body = operation.body
    if body is not None:
        if body.patch:
            content = {
                ct: {"schema": copy.deepcopy(_JSON_PATCH_SCHEMA) if ct == JSON_PATCH else _v3_ref(body.schema)}
                for ct in PATCH_CONTENT_TYPES
            }
            for ct, media in content.items():
                example = _patch_example(ct)
                if example is not None:
                    media["example"] = example
        else:
            content = {ct: {"schema": _v3_ref(body.schema)} for ct in _BODY_CONTENT_TYPES}
            if body.example is not None:
                for media in content.values():
                    media["example"] = copy.deepcopy(body.example)
        out["requestBody"] = {"content": content, "required": body.required}
    responses = {code: _v3_response(r) for code, r in operation.responses.items()}
    responses["default"] = _v3_status_default()
    out["responses"] = responses
    out["tags"] = [operation.tag]
    out["x-kubernetes-action"] = operation.action
    out["x-kubernetes-group-version-kind"] = _gvk_object(operation.gvk)
    return out


def _v3_path_item(entry: _PathItem) -> Obj:
    out: Obj = {method: _v3_operation(op) for method, op in sorted(entry.operations.items())}
    params = [
        {"name": name, "in": "path", "description": description, "required": True, "schema": {"type": "string"}}
        for name, description in entry.path_params
    ]
    params.append(_v3_query("pretty"))
    out["parameters"] = params
    return out


def _build_v3(group: str, version: str) -> Obj:
    if (group, version) not in _served_group_versions():
        raise KeyError(f"{group or 'core'}/{version} is not served")
    pairs = [(group, version)]
    paths = _paths(pairs)
    schemas = _converted(_closure(_roots(pairs, paths)), v3=True)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": {path: _v3_path_item(entry) for path, entry in paths.items()},
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "BearerToken": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "authorization",
                    "description": _SECURITY_DESCRIPTION,
                }
            },
        },
        "security": [{"BearerToken": []}],
    }


# ---- Swagger 2.0 rendering --------------------------------------------------------


def _v2_ref(name: str) -> Obj:
    return {"$ref": _V2_REF + name}


def _v2_query(name: str) -> Obj:
    spec = _QUERY_PARAMS[name]
    out: Obj = {"name": name, "in": "query", "description": spec.description, "type": spec.type}
    if spec.enum:
        out["enum"] = list(spec.enum)
    return out


def _v2_operation(operation: _Operation) -> Obj:
    out: Obj = {"description": operation.description}
    body = operation.body
    if body is not None:
        out["consumes"] = list(PATCH_CONTENT_TYPES if body.patch else _BODY_CONTENT_TYPES)
    produces = list(_RESPONSE_CONTENT_TYPES)
    if any(r.watch for r in operation.responses.values()):
        produces.append(WATCH_JSON)
    out["produces"] = produces
    out["schemes"] = ["https"]
    out["tags"] = [operation.tag]
    out["operationId"] = operation.operation_id
    params = [_v2_query(name) for name in operation.params]
    if body is not None:
        params.insert(0, {"name": "body", "in": "body", "required": body.required, "schema": _v2_ref(body.schema)})
    if params:
        out["parameters"] = params
    # Swagger 2.0 has no anyOf: the first schema is the documented one.
    responses: Obj = {
        code: {"description": r.description, "schema": _v2_ref(r.schemas[0])} for code, r in operation.responses.items()
    }
    responses["default"] = {"description": "Error", "schema": _v2_ref(STATUS)}
    out["responses"] = responses
    out["x-kubernetes-action"] = operation.action
    out["x-kubernetes-group-version-kind"] = _gvk_object(operation.gvk)
    return out


def _v2_path_item(entry: _PathItem) -> Obj:
    out: Obj = {method: _v2_operation(op) for method, op in sorted(entry.operations.items())}
    params: list[Obj] = [
        {"name": name, "in": "path", "description": description, "required": True, "type": "string"}
        for name, description in entry.path_params
    ]
    params.append(_v2_query("pretty"))
    out["parameters"] = params
    return out


def _build_v2() -> Obj:
    pairs = group_versions()
    paths = _paths(pairs)
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": {path: _v2_path_item(entry) for path, entry in paths.items()},
        "definitions": _converted(_closure(_roots(pairs, paths)), v3=False),
        "securityDefinitions": {
            "BearerToken": {
                "type": "apiKey",
                "in": "header",
                "name": "authorization",
                "description": _SECURITY_DESCRIPTION,
            }
        },
        "security": [{"BearerToken": []}],
    }


# ---- cached, serialized documents ------------------------------------------------------


@dataclass(frozen=True)
class SerializedDocument:
    """A built document with its JSON bytes, content hash and HTTP ETag."""

    document: Obj
    body: bytes
    hash: str

    @property
    def etag(self) -> str:
        return f'"{self.hash}"'


def _serialize(document: Obj) -> SerializedDocument:
    body = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    return SerializedDocument(document, body, hashlib.sha512(body).hexdigest().upper())


def openapi_v3(group: str, version: str) -> SerializedDocument:
    """The cached v3 document of one served group-version; KeyError when it is not served."""
    return _openapi_v3(group, version, tuple(group_versions()))


def openapi_v2() -> SerializedDocument:
    """The cached Swagger 2.0 document of everything served."""
    return _openapi_v2(tuple(group_versions()))


# Cached per set of served group-versions (the shared definitions name them), which a server sets once.
@functools.cache
def _openapi_v3(group: str, version: str, _served: tuple[tuple[str, str], ...]) -> SerializedDocument:
    return _serialize(_build_v3(group, version))


@functools.cache
def _openapi_v2(_served: tuple[tuple[str, str], ...]) -> SerializedDocument:
    return _serialize(_build_v2())


def openapi_v3_document(group: str, version: str) -> Obj:
    """OpenAPI 3.0 document of ``group``/``version`` (``""`` for core); KeyError when not served."""
    return openapi_v3(group, version).document


def openapi_v3_bytes(group: str, version: str) -> bytes | None:
    """Serialized v3 document, or None when the group-version is not served (the server answers 404)."""
    if (group, version) not in _served_group_versions():
        return None
    return openapi_v3(group, version).body


def openapi_v3_etag(group: str, version: str) -> str | None:
    """Quoted ETag of the v3 document, or None when the group-version is not served."""
    if (group, version) not in _served_group_versions():
        return None
    return openapi_v3(group, version).etag


def openapi_v2_document() -> Obj:
    """Swagger 2.0 document with the same paths and definitions as the v3 documents together."""
    return openapi_v2().document


def openapi_v2_bytes() -> bytes:
    return openapi_v2().body


def openapi_v2_etag() -> str:
    return openapi_v2().etag


def v3_path_key(group: str, version: str) -> str:
    """The ``/openapi/v3/<key>`` of a group-version: ``api/v1`` or ``apis/resource.k8s.io/v1``."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def v3_group_version(path_key: str) -> tuple[str, str] | None:
    """Inverse of ``v3_path_key`` for served group-versions (leading/trailing slashes tolerated)."""
    key = path_key.strip("/")
    for group, version in group_versions():
        if v3_path_key(group, version) == key:
            return group, version
    return None


def openapi_v3_index(base_hash_source: str = "") -> Obj:
    """``GET /openapi/v3``: one ``serverRelativeURL`` per served group-version.

    The ``hash`` query changes whenever the document changes (client-go caches these
    URLs); ``base_hash_source``, when given, is mixed in so anything else the server
    wants to invalidate clients on (its version, say) does so too.
    """
    paths: Obj = {}
    for group, version in group_versions():
        digest = openapi_v3(group, version).hash
        if base_hash_source:
            digest = hashlib.sha512(f"{base_hash_source}\0{digest}".encode()).hexdigest().upper()
        key = v3_path_key(group, version)
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": paths}
