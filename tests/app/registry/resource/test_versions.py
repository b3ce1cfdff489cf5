"""The older versions of the resource.k8s.io kinds: which exist, and that converting an object
between any two served versions loses nothing.

The conversions are identities on the fields because v1.37's v1beta2 and v1alpha3 have exactly
v1's fields; ``test_older_versions_have_exactly_the_fields_of_v1`` checks that claim against the
official schemas, so a schema in which they part ways fails here and names the field to convert.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.api import schemas
from app.api.openapi import definition_name
from app.registry import ALL_KINDS, KINDS
from app.registry.base import KindStrategy
from kube.objects import Obj

REF = "#/$defs/"
RESOURCE_KINDS = [k for k in KINDS if k.group == "resource.k8s.io"]


def _versions(kind: KindStrategy) -> list[KindStrategy]:
    """The kind in every version it can be served in, the stored one first."""
    return [kind] + [k for k in ALL_KINDS if k.converts and (k.group, k.kind) == (kind.group, kind.kind)]


def test_each_kind_is_served_in_the_versions_upstream_serves_it_in() -> None:
    served = {k.kind: [v.version for v in _versions(k)] for k in RESOURCE_KINDS}
    assert served == {
        "DeviceClass": ["v1", "v1beta2"],
        "ResourceClaim": ["v1", "v1beta2"],
        "ResourceClaimTemplate": ["v1", "v1beta2"],
        "ResourceSlice": ["v1", "v1beta2"],
        "DeviceTaintRule": ["v1", "v1beta2", "v1alpha3"],
        "ResourcePoolStatusRequest": ["v1alpha3"],
    }


def _resolve(schema: Obj) -> tuple[str | None, Obj]:
    """(definition name, schema) behind a ``$ref`` (directly or as the one ``allOf`` entry)."""
    ref = schema.get("$ref")
    if ref is None and isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
        ref = schema["allOf"][0].get("$ref")
    if isinstance(ref, str) and ref.startswith(REF):
        name = ref[len(REF) :]
        return name, schemas.definition(name) or {}
    return None, schema


def _field_tree(schema: Obj, seen: frozenset[str] = frozenset()) -> Any:
    """The field names below ``schema``, recursively (definition names left out: they name the version)."""
    name, schema = _resolve(schema)
    if name is not None:
        if name in seen:
            return "<recursive>"
        seen = seen | {name}
    if isinstance(schema.get("items"), dict):
        return ["items", _field_tree(schema["items"], seen)]
    if isinstance(schema.get("additionalProperties"), dict):
        return ["map", _field_tree(schema["additionalProperties"], seen)]
    properties = schema.get("properties") or {}
    return {prop: _field_tree(sub, seen) for prop, sub in properties.items() if prop != "apiVersion"}


@pytest.mark.parametrize("older", [k for k in ALL_KINDS if k.converts], ids=lambda k: f"{k.version}-{k.kind}")
def test_older_versions_have_exactly_the_fields_of_v1(older: KindStrategy) -> None:
    stored = definition_name(older.group, older.storage_version, older.kind)
    served = definition_name(older.group, older.version, older.kind)
    assert _field_tree({"$ref": REF + served}) == _field_tree({"$ref": REF + stored})


# ---- fuzzed objects ------------------------------------------------------------------------


def _from_schema(schema: Obj, extra: dict[str, dict[str, Obj]], depth: int) -> st.SearchStrategy[Any]:
    """Values of a JSON schema (and the kinds' extra properties), small and a few levels deep."""
    name, schema = _resolve(schema)
    properties = dict(schema.get("properties") or {})
    if name is not None:
        properties.update(extra.get(name, {}))
    types = schema.get("type") or []
    types = [types] if isinstance(types, str) else [t for t in types if t != "null"]
    if properties:
        if depth <= 0:
            return st.just({})
        optional = {p: _from_schema(s, extra, depth - 1) for p, s in properties.items() if p not in ("apiVersion", "kind")}
        return st.fixed_dictionaries({}, optional=optional)
    if isinstance(schema.get("items"), dict):
        return st.lists(_from_schema(schema["items"], extra, depth - 1), max_size=2) if depth > 0 else st.just([])
    if isinstance(schema.get("additionalProperties"), dict):
        values = _from_schema(schema["additionalProperties"], extra, depth - 1)
        return st.dictionaries(st.text("abc", min_size=1, max_size=3), values, max_size=2) if depth > 0 else st.just({})
    if "integer" in types:
        return st.integers(-(2**31), 2**31)
    if "number" in types:
        return st.floats(allow_nan=False, allow_infinity=False)
    if "boolean" in types:
        return st.booleans()
    if "string" in types:
        return st.text(max_size=6)
    # Free-form (raw extensions, quantities without a type): any small JSON.
    return st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=4), lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2), max_leaves=4)


def _stored_objects(kind: KindStrategy) -> st.SearchStrategy[Obj]:
    root = {"$ref": REF + definition_name(kind.group, kind.version, kind.kind)}
    body = _from_schema(root, kind.extra_schema_properties, depth=7)
    return body.map(lambda fields: {**fields, "apiVersion": kind.api_version, "kind": kind.kind})


@pytest.mark.parametrize("kind", RESOURCE_KINDS, ids=lambda k: k.kind)
def test_fuzzed_objects_survive_every_round_trip_between_versions(kind: KindStrategy) -> None:
    versions = _versions(kind)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example])
    @given(stored=_stored_objects(kind))
    def round_trip(stored: Obj) -> None:
        original = copy.deepcopy(stored)
        for first, second in itertools.permutations(versions, 2):
            in_first = first.from_stored(stored)
            in_second = second.from_stored(first.to_stored(in_first))
            assert in_second["apiVersion"] == second.api_version
            # Everything the object has is a field of the version it is now in ...
            assert schemas.unknown_fields(copy.deepcopy(in_second), second.api_version, kind.kind) == []
            # ... and coming back gives the same object in the first version and in storage.
            back = first.from_stored(second.to_stored(in_second))
            assert back == in_first
            assert first.to_stored(back) == original
        assert stored == original  # converting never changes what it converts

    round_trip()
