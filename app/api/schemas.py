"""The official v1.37 OpenAPI definitions, navigable for patching, apply and strict field validation.

The definitions ship with ``kubernetes-validate`` (JSON Schema 2020-12 under ``$defs``). They are read
once, on first use. ``SchemaNode`` wraps one schema (a property, an item type or a definition) and
follows ``$ref`` transparently; nodes and their children are cached so repeated look-ups are cheap.
"""

from __future__ import annotations

import importlib.resources
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from app.registry import ALL_KINDS
from app.registry.base import KindStrategy

_DEFINITIONS_PATH = ("kubernetes-json-schema", "v1.37.0-local", "_definitions.json")
_REF_PREFIX = "#/$defs/"

# Definitions that hold arbitrary JSON: anything below them is neither known nor unknown.
_FREE_FORM = frozenset(
    {
        "io.k8s.apimachinery.pkg.runtime.RawExtension",
        "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
        "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray",
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool",
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray",
    }
)

_MISSING: Any = object()

_lock = threading.Lock()
_definitions: dict[str, dict[str, Any]] | None = None
_kinds: dict[tuple[str, str], str] = {}
_nodes: dict[str, SchemaNode] = {}
# definition name -> property name -> schema: what the served kinds add for their gated fields.
_extra_properties: dict[str, dict[str, dict[str, Any]]] = {}


def _load() -> dict[str, dict[str, Any]]:
    global _definitions
    if _definitions is not None:
        return _definitions
    with _lock:
        if _definitions is None:
            resource = importlib.resources.files("kubernetes_validate")
            for part in _DEFINITIONS_PATH:
                resource = resource.joinpath(part)
            defs: dict[str, dict[str, Any]] = orjson.loads(resource.read_bytes())["$defs"]
            for name, schema in defs.items():
                for gvk in schema.get("x-kubernetes-group-version-kind") or ():
                    group, version = gvk.get("group", ""), gvk.get("version", "")
                    api_version = f"{group}/{version}" if group else version
                    _kinds.setdefault((api_version, gvk.get("kind", "")), name)
            _extra_properties.update(merged_extra_properties(ALL_KINDS))
            _definitions = defs
    return _definitions


def merged_extra_properties(kinds: Iterable[KindStrategy]) -> dict[str, dict[str, dict[str, Any]]]:
    """The extra schema properties the kinds declare, by definition name; kinds that share a
    definition may both declare a property, but only with the same schema."""
    merged: dict[str, dict[str, dict[str, Any]]] = {}
    for strategy in kinds:
        for definition_name, properties in strategy.extra_schema_properties.items():
            known = merged.setdefault(definition_name, {})
            for prop, schema in properties.items():
                if known.setdefault(prop, schema) != schema:
                    raise ValueError(f"{strategy.kind} declares {definition_name}.{prop} unlike another kind")
    return merged


def definition(name: str) -> dict[str, Any] | None:
    """The raw schema of one definition (without the kinds' extra properties)."""
    return _load().get(name)


def property_description(definition_name: str, prop: str) -> str:
    """The official documentation of one property of a definition ("" when there is none)."""
    schema = definition(definition_name) or {}
    return str(((schema.get("properties") or {}).get(prop) or {}).get("description") or "")


def _definition_node(name: str) -> SchemaNode | None:
    node = _nodes.get(name)
    if node is None:
        raw = _load().get(name)
        if raw is None:
            return None
        node = SchemaNode(raw, name)
        _nodes[name] = node
    return node


def schema_for_kind(api_version: str, kind: str) -> SchemaNode | None:
    """The schema of a top-level kind such as (``resource.k8s.io/v1``, ``ResourceClaim``), if known."""
    _load()
    name = _kinds.get((api_version, kind))
    return _definition_node(name) if name else None


def _ref_name(schema: dict[str, Any]) -> str | None:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
        return ref[len(_REF_PREFIX) :]
    return None


def _has_type(schema: dict[str, Any], wanted: str) -> bool:
    t = schema.get("type")
    if isinstance(t, list):
        return wanted in t
    return t == wanted


class SchemaNode:
    """One schema: a definition, or a property / item / map value schema that may ``$ref`` one."""

    __slots__ = ("_canonical_node", "_children", "_definition_name", "_raw", "_target", "memo")

    def __init__(self, raw: dict[str, Any], definition_name: str | None = None) -> None:
        self._raw = raw
        self._definition_name = definition_name
        self._children: dict[str, SchemaNode | None] = {}
        # Derived facts consumers compute once per node.
        self.memo: dict[str, Any] = {}
        ref = _ref_name(raw)
        target = raw
        if ref is not None:
            self._definition_name = ref
            target = _load().get(ref, {})
        self._target = target
        self._canonical_node: SchemaNode | None = None

    def __repr__(self) -> str:
        return f"SchemaNode({self._definition_name or self._raw.get('type')!r})"

    def _canonical(self) -> SchemaNode:
        """The shared node of the referenced definition, so child caches are shared across refs."""
        node = self._canonical_node
        if node is None:
            node = self
            if self._definition_name is not None and self._target is not self._raw:
                node = _definition_node(self._definition_name) or self
            self._canonical_node = node
        return node

    def _ext(self, key: str) -> Any:
        value = self._raw.get(key, _MISSING)
        if value is _MISSING:
            value = self._target.get(key)
        return value

    @property
    def definition_name(self) -> str | None:
        """The ``$defs`` name this schema is or refers to."""
        return self._definition_name

    @property
    def raw(self) -> dict[str, Any]:
        """The resolved schema dict (the referenced definition when this node is a ``$ref``)."""
        return self._target

    @property
    def is_object(self) -> bool:
        try:
            return bool(self.memo["is_object"])
        except KeyError:
            value = self.memo["is_object"] = _has_type(self._target, "object")
            return value

    @property
    def is_array(self) -> bool:
        try:
            return bool(self.memo["is_array"])
        except KeyError:
            value = self.memo["is_array"] = _has_type(self._target, "array")
            return value

    @property
    def is_free_form(self) -> bool:
        """Whether the value holds arbitrary JSON (RawExtension, preserve-unknown-fields, ...)."""
        try:
            return bool(self.memo["is_free_form"])
        except KeyError:
            pass
        value = (
            self._ext("x-kubernetes-preserve-unknown-fields") is True
            or self._target.get("additionalProperties") is True
            or self._definition_name in _FREE_FORM
        )
        self.memo["is_free_form"] = value
        return value

    @property
    def patch_strategy(self) -> tuple[str | None, str | None]:
        """(``x-kubernetes-patch-strategy``, ``x-kubernetes-patch-merge-key``) of this field."""
        return self._raw.get("x-kubernetes-patch-strategy"), self._raw.get("x-kubernetes-patch-merge-key")

    @property
    def list_type(self) -> str | None:
        return self._ext("x-kubernetes-list-type")

    @property
    def list_map_keys(self) -> tuple[str, ...]:
        keys = self._ext("x-kubernetes-list-map-keys")
        return tuple(keys) if keys else ()

    @property
    def map_type(self) -> str | None:
        return self._ext("x-kubernetes-map-type")

    def property_names(self) -> Iterator[str]:
        """Every property the object schema declares, the kinds' extra properties included."""
        yield from self._target.get("properties") or ()
        if self._definition_name is not None:
            yield from _extra_properties.get(self._definition_name, ())

    @property
    def has_properties(self) -> bool:
        if self._target.get("properties"):
            return True
        return bool(self._definition_name and _extra_properties.get(self._definition_name))

    def property(self, name: str) -> SchemaNode | None:
        """The schema of property ``name``, or None when the object does not declare it."""
        canonical = self._canonical()
        if canonical is not self:
            return canonical.property(name)
        key = "p:" + name
        try:
            return self._children[key]
        except KeyError:
            pass
        raw = (self._target.get("properties") or {}).get(name)
        if raw is None and self._definition_name is not None:
            raw = _extra_properties.get(self._definition_name, {}).get(name)
        node = SchemaNode(raw) if isinstance(raw, dict) else None
        self._children[key] = node
        return node

    def items(self) -> SchemaNode | None:
        """The schema of the array's items."""
        canonical = self._canonical()
        if canonical is not self:
            return canonical.items()
        try:
            return self._children["items"]
        except KeyError:
            pass
        raw = self._target.get("items")
        node = SchemaNode(raw) if isinstance(raw, dict) else None
        self._children["items"] = node
        return node

    def additional_properties(self) -> SchemaNode | None:
        """The schema of the values of a map (``additionalProperties``)."""
        canonical = self._canonical()
        if canonical is not self:
            return canonical.additional_properties()
        try:
            return self._children["additionalProperties"]
        except KeyError:
            pass
        raw = self._target.get("additionalProperties")
        node = SchemaNode(raw) if isinstance(raw, dict) else None
        self._children["additionalProperties"] = node
        return node

    def child(self, name: str) -> SchemaNode | None:
        """The schema of key ``name`` of an object: a declared property, else the map value schema."""
        node = self.property(name)
        if node is None:
            node = self.additional_properties()
        return node


def unknown_fields(obj: dict[str, Any], api_version: str, kind: str) -> list[str]:
    """Paths of fields the kind's schema does not declare, as upstream strict decoding names them.

    Paths look like ``spec.x`` or ``spec.devices.requests[0].foo``; free-form values (labels and other
    maps, RawExtension) are not searched. An unknown kind yields no paths.
    """
    return _unknown(obj, api_version, kind, prune=False)


def prune_unknown_fields(obj: dict[str, Any], api_version: str, kind: str) -> list[str]:
    """Like ``unknown_fields``, and also delete those fields from ``obj`` (as decoding upstream drops them)."""
    return _unknown(obj, api_version, kind, prune=True)


def _unknown(obj: dict[str, Any], api_version: str, kind: str, prune: bool) -> list[str]:
    plan = known_fields_of_kind(api_version, kind)
    if plan is None or not isinstance(obj, dict):
        return []
    found = UnknownFields()
    collect_unknown(obj, plan, None, found, prune)
    if prune:
        found.drop()
    return found.paths


class UnknownFields:
    """What the unknown-field walk found: the unknown fields' paths in document order, and the
    fields to drop from the object (unknown ones, and nulls when pruning), dropped only by
    ``drop``: a body's walk runs with its Go-type check, before the request looks at its type
    and place, which fills in some of those nulls (kind, metadata, its namespace)."""

    __slots__ = ("nulls", "paths", "unknown")

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.unknown: list[tuple[dict[str, Any], str]] = []
        self.nulls: list[tuple[dict[str, Any], str]] = []

    def add(self, obj: dict[str, Any], key: str, path: FieldPath) -> None:
        """``obj[key]`` is unknown; ``path`` is ``obj``'s."""
        self.paths.append(render_field_path((path, key)))
        self.unknown.append((obj, key))

    def drop(self) -> None:
        """Delete the unknown fields, and the nulls still null (decoding into upstream's Go types
        reads null as "not set"; store it that way)."""
        for obj, key in self.unknown:
            obj.pop(key, None)
        for obj, key in self.nulls:
            if key in obj and obj[key] is None:
                del obj[key]


# A field path built only when an unknown field is found: (parent, key or list index), or None at the root.
FieldPath = tuple[Any, str | int] | None


def render_field_path(path: FieldPath) -> str:
    """A path as upstream's strict decoding errors name fields: ``spec.devices.requests[0].name``."""
    parts: list[str | int] = []
    while path is not None:
        path, segment = path
        parts.append(segment)
    text = ""
    for segment in reversed(parts):
        if isinstance(segment, int):
            text += f"[{segment}]"
        else:
            text = f"{text}.{segment}" if text else segment
    return text


class KnownFields:
    """What the unknown-field walk needs of one schema, worked out once: whether it holds
    arbitrary JSON, whether it is an object, its declared properties' plans, its map values' and
    list items' plans. Plans point at their children's plans, so the walk looks nothing up but keys."""

    __slots__ = ("declared", "extra", "free_form", "is_object", "items")

    def __init__(self, node: SchemaNode) -> None:
        self.free_form = node.is_free_form
        self.is_object = node.is_object
        self.declared: dict[str, KnownFields] = {}
        self.extra: KnownFields | None = None
        self.items: KnownFields | None = None


def _known_fields(node: SchemaNode) -> KnownFields:
    """The plan of ``node``, made once (schemas refer to themselves: a plan is remembered before
    its children's are made)."""
    plan: KnownFields | None = node.memo.get("known_fields")
    if plan is not None:
        return plan
    plan = KnownFields(node)
    node.memo["known_fields"] = plan
    if plan.free_form:
        return plan
    if node.has_properties:
        for name in node.property_names():
            child = node.property(name)
            if child is not None:
                plan.declared[name] = _known_fields(child)
    extra = node.additional_properties()
    plan.extra = _known_fields(extra) if extra is not None else None
    items = node.items()
    plan.items = _known_fields(items) if items is not None else None
    return plan


def known_fields_of_kind(api_version: str, kind: str) -> KnownFields | None:
    """The unknown-field walk's plan of a top-level kind's schema, if the kind is known."""
    node = schema_for_kind(api_version, kind)
    return _known_fields(node) if node is not None else None


def collect_unknown(value: Any, plan: KnownFields, path: FieldPath, found: UnknownFields, prune: bool) -> None:
    """Note the fields below ``value`` (at ``path``) that ``plan`` does not know, and with
    ``prune`` its nulls, in ``found``."""
    if plan.free_form:
        return
    if type(value) is dict:
        if not plan.is_object:
            return
        declared = plan.declared
        extra = plan.extra
        for key, child_value in value.items():
            if child_value is None and prune:
                found.nulls.append((value, key))
                continue
            child = declared.get(key) or extra
            if child is not None:
                if type(child_value) is dict or type(child_value) is list:
                    collect_unknown(child_value, child, (path, key), found, prune)
            else:
                # Also reached for an object schema without properties: an empty struct knows no field.
                found.add(value, key, path)
    elif type(value) is list:
        items = plan.items
        if items is None:
            return
        for index, item in enumerate(value):
            if type(item) is dict or type(item) is list:
                collect_unknown(item, items, (path, index), found, prune)
