"""The table of gated fields: what a disabled gate drops, and when the stored object keeps it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kube.features import KNOWN_FEATURES, FeatureGates, Gate
from kube.gatedfields import (
    CLAIM_SPEC,
    GATED_FIELDS,
    POD,
    SLICE_SPEC,
    GatedField,
    drop_disabled,
    schema_properties,
)

ALL_OFF = FeatureGates({name: False for name, spec in KNOWN_FEATURES.items() if not spec.locked})


class Gates:
    """Gates with every one on but ``off`` (locked ones included, as upstream's tests emulate)."""

    def __init__(self, *off: str) -> None:
        self.off = set(off)

    def enabled(self, gate: str) -> bool:
        return gate not in self.off


def _build(path: str, leaf: Any) -> Any:
    """The smallest object in which ``path`` holds ``leaf``."""
    head, _, rest = path.partition(".")
    key, walk = (head[:-2], head[-2:]) if head.endswith(("[]", "{}")) else (head, "")
    inner = _build(rest, leaf) if rest else leaf
    if walk == "[]":
        inner = [inner]
    elif walk == "{}":
        inner = {"entry": inner}
    return {key: inner}


def _merge(into: Any, more: Any) -> Any:
    if isinstance(into, dict) and isinstance(more, dict):
        for key, value in more.items():
            into[key] = _merge(into[key], value) if key in into else value
        return into
    if isinstance(into, list) and isinstance(more, list):
        return [_merge(into[0], more[0])]
    return more


def _object_with(paths: tuple[str, ...], leaf: Any = "set") -> Any:
    obj: Any = {}
    for path in paths:
        obj = _merge(obj, _build(path, leaf))
    return obj


def _values(obj: Any, path: str) -> list[Any]:
    level = [obj]
    for part in path.split("."):
        key, walk = (part[:-2], part[-2:]) if part.endswith(("[]", "{}")) else (part, "")
        nxt: list[Any] = []
        for node in level:
            if not isinstance(node, dict) or key not in node:
                continue
            value = node[key]
            nxt.extend(value if walk == "[]" else value.values() if walk == "{}" else [value])
        level = nxt
    return level


@pytest.mark.parametrize("row", GATED_FIELDS, ids=lambda r: f"{r.shape}:{r.drops[0]}")
def test_each_row_drops_on_create_keeps_when_on_and_keeps_what_the_stored_object_uses(row: GatedField) -> None:
    new = _object_with(row.drops)
    dropped = copy.deepcopy(new)
    drop_disabled(row.shape, dropped, None, Gates(row.gates[0]))
    for path in row.drops:
        assert _values(dropped, path) == [], path

    kept = copy.deepcopy(new)
    drop_disabled(row.shape, kept, None, Gates())
    assert kept == new

    # Stored with one of the fields that decide "in use": the update keeps them all.
    for path in row.used_if_set or row.used_if_nonempty or row.drops:
        updated = copy.deepcopy(new)
        drop_disabled(row.shape, updated, _object_with((path,)), Gates(row.gates[0]))
        assert all(_values(updated, p) == ["set"] for p in row.drops), path


def test_in_use_is_non_null_or_non_empty_as_the_row_says() -> None:
    taints: Any = {"devices": [{"taints": [{"key": "k"}]}]}
    old_empty: Any = {"devices": [{"taints": []}]}
    new = copy.deepcopy(taints)
    drop_disabled(SLICE_SPEC, new, old_empty, Gates(Gate.DRADeviceTaints))
    assert new == {"devices": [{}]}  # an empty list is not a use (len() > 0)

    admin: Any = {"devices": {"requests": [{"name": "r", "exactly": {"adminAccess": True}}]}}
    old_false: Any = {"devices": {"requests": [{"name": "r", "exactly": {"adminAccess": False}}]}}
    new = copy.deepcopy(admin)
    drop_disabled(CLAIM_SPEC, new, old_false, Gates(Gate.DRAAdminAccess))
    assert new == admin  # false is set (!= nil)


def test_a_row_with_two_gates_drops_when_either_is_off() -> None:
    binding: Any = {"devices": [{"name": "d", "bindsToNode": True}]}
    for off in (Gate.DRADeviceBindingConditions, Gate.DRAResourceClaimDeviceStatus):
        new = copy.deepcopy(binding)
        drop_disabled(SLICE_SPEC, new, None, Gates(off))
        assert new == {"devices": [{"name": "d"}]}


def test_malformed_objects_are_left_to_validation() -> None:
    news: list[Any] = [{"devices": "x"}, {"devices": [1, None, {"taints": "t"}]}, {"devices": {"a": {}}}]
    for new in news:
        before = copy.deepcopy(new)
        drop_disabled(SLICE_SPEC, new, {"devices": 7}, Gates(Gate.DRAListTypeAttributes))
        assert new == before
    drop_disabled(SLICE_SPEC, None, None, ALL_OFF)


def test_pod_status_in_use_follows_the_stored_spec() -> None:
    pod: Any = {"spec": {"resourceClaims": [{"name": "c"}]}, "status": {"resourceClaimStatuses": [{"name": "c"}]}}
    old = {"spec": {"resourceClaims": [{"name": "c"}]}, "status": {}}
    new = copy.deepcopy(pod)
    drop_disabled(POD, new, old, Gates(Gate.DynamicResourceAllocation))
    assert new == pod
    drop_disabled(POD, new, {"spec": {}, "status": {"resourceClaimStatuses": [{"name": "c"}]}}, Gates(Gate.DynamicResourceAllocation))
    assert new == {"spec": {}, "status": {}}


def test_schema_properties_are_the_rows_with_a_schema() -> None:
    spec_only = schema_properties((CLAIM_SPEC,))
    assert "reservedFor" in spec_only["io.k8s.api.resource.v1.ResourceClaimSpec"]
    assert "io.k8s.api.resource.v1.AllocationResult" not in spec_only  # reservedForAnyPod is a ResourceClaim row
    rows = {(row.schema_definition, row.drops[0].rsplit(".", 1)[-1]) for row in GATED_FIELDS if row.schema is not None and row.shape == CLAIM_SPEC}
    assert {(definition, prop) for definition, props in spec_only.items() for prop in props} == rows
    with_rows = {row.schema_definition for row in GATED_FIELDS if row.schema is not None}
    assert set(schema_properties({row.shape for row in GATED_FIELDS})) == with_rows


def test_rows_refuse_unknown_gates_and_schemas_without_a_definition() -> None:
    with pytest.raises(ValueError, match="unknown feature gate"):
        GatedField(("NoSuchGate",), SLICE_SPEC, ("x",))
    with pytest.raises(ValueError, match="names its definition"):
        GatedField((Gate.DRAAdminAccess,), SLICE_SPEC, ("x",), schema={"type": "string"})


def test_several_rows_off_drop_together_and_a_stored_use_keeps_only_its_own_row() -> None:
    shape_rows = [row for row in GATED_FIELDS if row.shape == CLAIM_SPEC]
    spec = _object_with(tuple(path for row in shape_rows for path in row.drops))
    gates = Gates(*{gate for row in shape_rows for gate in row.gates})

    created = copy.deepcopy(spec)
    drop_disabled(CLAIM_SPEC, created, None, gates)  # nothing stored: every row's paths go at once
    for row in shape_rows:
        assert all(_values(created, path) == [] for path in row.drops), row.drops
    assert created == {"devices": {"requests": [{"exactly": {}}], "constraints": [{}]}}

    # The stored spec uses the tolerations only: they stay, every other row's fields go.
    tolerations = next(row for row in shape_rows if Gate.DRADeviceTaints in row.gates)
    updated = copy.deepcopy(spec)
    drop_disabled(CLAIM_SPEC, updated, _object_with((tolerations.drops[0],)), gates)
    for row in shape_rows:
        for path in row.drops:
            kept = row is tolerations and "firstAvailable" not in path  # firstAvailable itself is dropped
            assert _values(updated, path) == (["set"] if kept else []), path
