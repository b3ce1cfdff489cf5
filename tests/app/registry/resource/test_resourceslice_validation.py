"""ResourceSlice: spec validation on create and update, the driver-name warning, defaults and gate drop rules."""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.registry.resource.resourceslice import STRATEGY as SLICES
from kube.features import Gate, gates_flag
from tests.app.registry.resource.helpers import (
    COUNTER_SLICE,
    DELETE,
    NF,
    NS,
    PARTITIONABLE_SLICE,
    SLICE,
    TL,
    TM,
    D,
    F,
    I,
    Obj,
    R,
    changed,
    check_gate_drop,
    create,
    ctx,
    update,
)


@pytest.mark.parametrize("obj", [SLICE, PARTITIONABLE_SLICE, COUNTER_SLICE])
def test_valid_slices(obj: Obj) -> None:
    assert create(SLICES, obj) == []


# --- ResourceSlice ----------------------------------------------------------------------------

D0 = "spec.devices[0]"


def _slice(*changes: tuple[str, Any], base: Obj = SLICE) -> Obj:
    return changed(base, *changes)


def _devices(n: int, **extra: Any) -> list[Obj]:
    return [{"name": f"dev-{i}", **extra} for i in range(n)]


_POLICY_DEVICE = {"name": "nic", "allowMultipleAllocations": True, "capacity": {"bw": {"value": "10G"}}}

SLICE_CASES: list[tuple[str, Obj, list[tuple[str, str]]]] = [
    ("missing-driver", _slice(("spec.driver", DELETE)), [("spec.driver", I), ("spec.driver", R)]),
    ("driver-too-long", _slice(("spec.driver", "a" * 64)), [("spec.driver", TL)]),
    ("driver-bad-chars", _slice(("spec.driver", "gpu_example")), [("spec.driver", I)]),
    ("missing-pool-name", _slice(("spec.pool.name", DELETE)), [("spec.pool.name", R)]),
    ("bad-pool-name", _slice(("spec.pool.name", "a//b")), [("spec.pool.name", I)]),
    ("zero-slice-count", _slice(("spec.pool.resourceSliceCount", 0)), [("spec.pool.resourceSliceCount", I)]),
    ("negative-generation", _slice(("spec.pool.generation", -1)), [("spec.pool.generation", I)]),
    ("no-node-selection", _slice(("spec.nodeName", DELETE)), [("spec", R)]),
    ("two-node-selections", _slice(("spec.allNodes", True)), [("spec", I)]),
    ("empty-node-name", _slice(("spec.nodeName", "")), [("spec", R), ("spec.nodeName", I)]),
    ("all-nodes-false", _slice(("spec.nodeName", DELETE), ("spec.allNodes", False)), [("spec", R), ("spec.allNodes", I)]),
    (
        "two-selector-terms",
        _slice(("spec.nodeName", DELETE), ("spec.nodeSelector", {"nodeSelectorTerms": [{"matchExpressions": []}, {}]})),
        [("spec.nodeSelector.nodeSelectorTerms", I)],
    ),
    (
        "no-selector-terms",
        _slice(("spec.nodeName", DELETE), ("spec.nodeSelector", {"nodeSelectorTerms": []})),
        [("spec.nodeSelector.nodeSelectorTerms", I), ("spec.nodeSelector.nodeSelectorTerms", R)],
    ),
    (
        "bad-selector-operator",
        _slice(
            ("spec.nodeName", DELETE),
            ("spec.nodeSelector", {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Like", "values": ["a"]}]}]}),
        ),
        [("spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator", I)],
    ),
    ("bad-node-name", _slice(("spec.nodeName", "Node_1")), [("spec.nodeName", I)]),
    ("devices-and-counters", _slice(("spec.sharedCounters", COUNTER_SLICE["spec"]["sharedCounters"])), [("spec", I)]),
    ("too-many-devices", _slice(("spec.devices", _devices(129))), [("spec.devices", TM)]),
    (
        "too-many-devices-with-taints",
        _slice(("spec.devices", _devices(65, taints=[{"key": "k", "effect": "NoSchedule"}]))),
        [("spec.devices", TM)],
    ),
    ("duplicate-devices", _slice(("spec.devices", _devices(1) + _devices(1))), [("spec.devices[1]", D)]),
    ("bad-device-name", _slice((f"{D0}.name", "Large_Cat")), [(f"{D0}.name", I)]),
    ("missing-device-name", _slice((f"{D0}.name", DELETE)), [(f"{D0}.name", R)]),
    ("bad-attribute-name", _slice((f"{D0}.attributes", {"bad key": {"int": 1}})), [(f"{D0}.attributes", I)]),
    ("attribute-two-values", _slice((f"{D0}.attributes.color.int", 1)), [(f"{D0}.attributes[color]", I)]),
    ("attribute-no-value", _slice((f"{D0}.attributes.color", {})), [(f"{D0}.attributes[color]", I)]),
    ("attribute-string-too-long", _slice((f"{D0}.attributes.color.string", "x" * 65)), [(f"{D0}.attributes[color].string", TL)]),
    ("attribute-bad-version", _slice((f"{D0}.attributes.driverVersion.version", "1.2")), [(f"{D0}.attributes[driverVersion].version", I)]),
    ("capacity-without-value", _slice((f"{D0}.capacity.memory", {})), [(f"{D0}.capacity[memory].value", R)]),
    ("capacity-bad-quantity", _slice((f"{D0}.capacity.memory.value", "lots")), [(f"{D0}.capacity[memory].value", I)]),
    (
        "too-many-attributes",
        _slice((f"{D0}.attributes", {f"a{i}": {"int": i} for i in range(33)})),
        [(D0, I)],
    ),
    (
        "request-policy-without-multi",
        _slice((f"{D0}.capacity.memory.requestPolicy", {"default": "1Gi"})),
        [(f"{D0}.capacity[memory].requestPolicy", F)],
    ),
    (
        "request-policy-both",
        _slice(("spec.devices", [{**_POLICY_DEVICE, "capacity": {"bw": {"value": "10G", "requestPolicy": {"default": "1G", "validValues": ["1G"], "validRange": {"min": "1G"}}}}}])),
        [(f"{D0}.capacity[bw].requestPolicy", F)],
    ),
    (
        "request-policy-range-without-default",
        _slice(("spec.devices", [{**_POLICY_DEVICE, "capacity": {"bw": {"value": "10G", "requestPolicy": {"validRange": {"min": "1G"}}}}}])),
        [(f"{D0}.capacity[bw].requestPolicy.default", R)],
    ),
    (
        "request-policy-unsorted",
        _slice(("spec.devices", [{**_POLICY_DEVICE, "capacity": {"bw": {"value": "10G", "requestPolicy": {"default": "1G", "validValues": ["2G", "1G"]}}}}])),
        [(f"{D0}.capacity[bw].requestPolicy.validValues[1]", I)],
    ),
    (
        "request-policy-min-over-capacity",
        _slice(("spec.devices", [{**_POLICY_DEVICE, "capacity": {"bw": {"value": "10G", "requestPolicy": {"default": "20G", "validRange": {"min": "20G"}}}}}])),
        [(f"{D0}.capacity[bw].requestPolicy.validRange.min", I)],
    ),
    ("taint-bad-effect", _slice((f"{D0}.taints", [{"key": "k", "effect": "PreferNoSchedule"}])), [(f"{D0}.taints[0].effect", NS)]),
    ("taint-without-key", _slice((f"{D0}.taints", [{"effect": "NoSchedule"}])), [(f"{D0}.taints[0].key", I), (f"{D0}.taints[0].key", I)]),
    ("too-many-taints", _slice((f"{D0}.taints", [{"key": f"k{i}", "effect": "NoSchedule"} for i in range(17)])), [(f"{D0}.taints", TM)]),
    (
        "consumption-without-counter-set",
        _slice((f"{D0}.consumesCounters[0].counterSet", DELETE), base=PARTITIONABLE_SLICE),
        [(f"{D0}.consumesCounters[0].counterSet", R)],
    ),
    (
        "too-many-consumptions",
        _slice((f"{D0}.consumesCounters", [{"counterSet": f"s{i}", "counters": {"m": {"value": "1"}}} for i in range(3)]), base=PARTITIONABLE_SLICE),
        [(f"{D0}.consumesCounters", TM)],
    ),
    (
        "counter-set-without-name-and-counters",
        _slice(("spec.sharedCounters", [{}]), base=COUNTER_SLICE),
        [("spec.sharedCounters[0].counters", R), ("spec.sharedCounters[0].name", R)],
    ),
    (
        "duplicate-counter-sets",
        _slice(("spec.sharedCounters", COUNTER_SLICE["spec"]["sharedCounters"] * 2), base=COUNTER_SLICE),
        [("spec.sharedCounters[1]", D)],
    ),
    ("device-node-without-per-device", _slice((f"{D0}.allNodes", True)), [(D0, I)]),
    ("per-device-without-node", _slice((f"{D0}.nodeName", DELETE), base=PARTITIONABLE_SLICE), [(D0, R)]),
    ("binding-conditions-alone", _slice((f"{D0}.bindingConditions", ["ready"])), [(f"{D0}.bindingFailureConditions", I)]),
    (
        "binding-conditions-overlap",
        _slice((f"{D0}.bindingConditions", ["ready"]), (f"{D0}.bindingFailureConditions", ["ready"])),
        [(f"{D0}.bindingFailureConditions[0]", I)],
    ),
    ("devices-wrong-type", _slice(("spec.devices", {"name": "x"})), [("spec.devices", I)]),
    ("pool-wrong-type", _slice(("spec.pool", "pool")), [("spec.pool", I)]),
    ("attributes-wrong-type", _slice((f"{D0}.attributes", ["x"])), [(f"{D0}.attributes", I)]),
]


@pytest.mark.parametrize(("name", "obj", "expected"), SLICE_CASES, ids=[c[0] for c in SLICE_CASES])
def test_invalid_slices(name: str, obj: Obj, expected: list[tuple[str, str]]) -> None:
    assert create(SLICES, obj) == sorted(expected)


@pytest.mark.parametrize(
    ("gates", "change", "expected"),
    [
        (
            gates_flag({Gate.DRANodeAllocatableResources: True}),
            {"nvidia.com/gpu": {"overhead": {"perPod": "1"}}},
            [(f"{D0}.nodeAllocatableResources[nvidia.com/gpu]", I)],
        ),
        (gates_flag({Gate.DRANodeAllocatableResources: True}), {"memory": {}}, [(f"{D0}.nodeAllocatableResources[memory]", R)]),
        (
            gates_flag({Gate.DRANodeAllocatableResources: True}),
            {"memory": {"mapping": {"capacityKey": "nope", "capacityMultiplier": "1"}}},
            [(f"{D0}.nodeAllocatableResources[memory].mapping.capacityKey", NF)],
        ),
        (
            gates_flag({Gate.DRANodeAllocatableResources: True}),
            {"cpu": {"mapping": {"deviceMultiplier": "-1"}, "overhead": {}}},
            [(f"{D0}.nodeAllocatableResources[cpu].mapping.deviceMultiplier", I), (f"{D0}.nodeAllocatableResources[cpu].overhead", I)],
        ),
        (gates_flag({Gate.DRANodeAllocatableResources: True}), {"memory": {"mapping": {"capacityKey": "memory", "capacityMultiplier": "1"}}}, []),
    ],
)
def test_node_allocatable_resources(gates: str, change: Obj, expected: list[tuple[str, str]]) -> None:
    obj = _slice((f"{D0}.nodeAllocatableResources", change))
    assert create(SLICES, obj, ctx(gates)) == sorted(expected)


def test_slice_skip_node_operations() -> None:
    obj = _slice(("spec.skipNodeOperations", ["Sometimes"]))
    assert create(SLICES, obj, ctx(gates_flag({Gate.DRAOptionalNodeOperations: True}))) == [("spec.skipNodeOperations[0]", NS)]
    obj = _slice(("spec.skipNodeOperations", ["NodePrepareResources"]))
    assert create(SLICES, obj, ctx(gates_flag({Gate.DRAOptionalNodeOperations: True}))) == [("spec.skipNodeOperations", I)]


def test_slice_update_immutables_and_taint_ratcheting() -> None:
    edited = _slice(("spec.driver", "other.example.com"), ("spec.pool.name", "other"), ("spec.nodeName", "worker-2"))
    assert update(SLICES, edited, SLICE) == [("spec.driver", I), ("spec.nodeName", I), ("spec.pool.name", I)]
    # An unchanged (stored) list of taints is not re-validated.
    old = _slice((f"{D0}.taints", [{"key": "k", "effect": "Bogus", "timeAdded": "2026-01-01T00:00:00Z"}]))
    assert update(SLICES, old, old) == []


def test_slice_warning_and_defaults() -> None:
    obj = _slice(("spec.driver", "GPU.example.com"), (f"{D0}.taints", [{"key": "k", "effect": "NoSchedule"}]))
    c = ctx()
    SLICES.default(obj, c)
    SLICES.validate_create(obj, c)
    assert c.warnings == ['spec.driver: driver names should be lowercase; "GPU.example.com" contains uppercase characters']
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", obj["spec"]["devices"][0]["taints"][0]["timeAdded"])


def test_slice_messages() -> None:
    obj = _slice(("spec.allNodes", True))
    errs = [str(e) for e in SLICES.validate_create(obj, ctx())]
    assert errs == [
        'spec: Invalid value: "{`nodeName`, `allNodes`}": exactly one of `nodeName`, `nodeSelector`, `allNodes`, '
        "`perDeviceNodeSelection` is required, but multiple fields are set"
    ]
    obj = _slice(("spec.pool.resourceSliceCount", 0))
    assert [str(e) for e in SLICES.validate_create(obj, ctx())] == [
        "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero"
    ]


def test_slice_cases_count() -> None:
    assert len(SLICE_CASES) >= 40


# --- feature gates ----------------------------------------------------------------------------

SLICE_GATE_CASES: list[tuple[str, Obj, str, Any]] = [
    (Gate.DRADeviceTaints, SLICE, f"{D0}.taints", [{"key": "k", "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"}]),
    (Gate.DRAConsumableCapacity, SLICE, f"{D0}.allowMultipleAllocations", True),
    (Gate.DRADeviceBindingConditions, SLICE, f"{D0}.bindsToNode", True),
    (Gate.DRAListTypeAttributes, SLICE, f"{D0}.attributes.color", {"strings": ["black", "white"]}),
    (Gate.DRAOptionalNodeOperations, SLICE, "spec.skipNodeOperations", ["*"]),
    (Gate.DRANodeAllocatableResources, SLICE, f"{D0}.nodeAllocatableResources", {"memory": {"overhead": {"perPod": "1Mi"}}}),
    (Gate.DRAPartitionableDevices, {**COUNTER_SLICE, "spec": {k: v for k, v in COUNTER_SLICE["spec"].items() if k != "sharedCounters"}}, "spec.sharedCounters", COUNTER_SLICE["spec"]["sharedCounters"]),
    (Gate.DRAPartitionableDevicesType, SLICE, "spec.partitionTypeAttribute", "example.com/type"),
]


@pytest.mark.parametrize(("gate", "base", "path", "value"), SLICE_GATE_CASES, ids=[f"{c[0]}-{c[2]}" for c in SLICE_GATE_CASES])
def test_gated_field_dropped_when_off_kept_when_on(gate: str, base: Obj, path: str, value: Any) -> None:
    check_gate_drop(gate, SLICES, base, path, value)
