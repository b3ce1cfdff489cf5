"""ResourceClaim: spec, status, adminAccess, defaults and gate drop rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.registry.base import RequestContext
from app.registry.resource.resourceclaim import STATUS_STRATEGY as CLAIM_STATUS
from app.registry.resource.resourceclaim import STRATEGY as CLAIMS
from kube.features import Gate, gates_flag
from tests.app.registry.resource.helpers import (
    ADMIN_NS,
    CLAIM,
    COSTLY_EXPR,
    DELETE,
    LONG_EXPR,
    NS,
    PRIORITIZED_CLAIM,
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
    messages,
    subrequests,
    update,
)


@pytest.mark.parametrize("obj", [CLAIM, PRIORITIZED_CLAIM])
def test_valid_claims(obj: Obj) -> None:
    assert create(CLAIMS, obj) == []


# --- ResourceClaim ----------------------------------------------------------------------------

RQ = "spec.devices.requests[0]"
EX = f"{RQ}.exactly"


def _claim(*changes: tuple[str, Any]) -> Obj:
    return changed(CLAIM, *changes)


CLAIM_CASES: list[tuple[str, Obj, list[tuple[str, str]]]] = [
    ("missing-request-name", _claim((f"{RQ}.name", DELETE)), [(f"{RQ}.name", R)]),
    ("bad-request-name", _claim((f"{RQ}.name", "Bad_Name")), [(f"{RQ}.name", I)]),
    ("no-exactly-or-first", _claim((f"{RQ}.exactly", DELETE)), [(RQ, R)]),
    ("both-exactly-and-first", _claim((f"{RQ}.firstAvailable", subrequests())), [(RQ, I)]),
    ("empty-class", _claim((f"{EX}.deviceClassName", "")), [(f"{EX}.deviceClassName", R)]),
    ("bad-class", _claim((f"{EX}.deviceClassName", "Bad Class")), [(f"{EX}.deviceClassName", I)]),
    ("bad-mode", _claim((f"{EX}.allocationMode", "Some")), [(f"{EX}.allocationMode", NS)]),
    ("all-with-count", _claim((f"{EX}.allocationMode", "All"), (f"{EX}.count", 2)), [(f"{EX}.count", I)]),
    ("negative-count", _claim((f"{EX}.count", -1)), [(f"{EX}.count", I)]),
    (
        "duplicate-requests",
        _claim(("spec.devices.requests[1]", {"name": "gpu", "exactly": {"deviceClassName": "c"}})),
        [("spec.devices.requests[1]", D)],
    ),
    (
        "too-many-requests",
        _claim(("spec.devices.requests", [{"name": f"r{i}", "exactly": {"deviceClassName": "c"}} for i in range(33)])),
        [("spec.devices.requests", TM)],
    ),
    ("too-many-selectors", _claim((f"{EX}.selectors", [{"cel": {"expression": "true"}}] * 33)), [(f"{EX}.selectors", TM)]),
    ("selector-without-cel", _claim((f"{EX}.selectors", [{}])), [(f"{EX}.selectors[0].cel", R)]),
    ("cel-syntax", _claim((f"{EX}.selectors[0].cel.expression", "device.driver ==")), [(f"{EX}.selectors[0].cel.expression", I)]),
    ("cel-not-bool", _claim((f"{EX}.selectors[0].cel.expression", "device.driver")), [(f"{EX}.selectors[0].cel.expression", I)]),
    ("cel-too-long", _claim((f"{EX}.selectors[0].cel.expression", LONG_EXPR)), [(f"{EX}.selectors[0].cel.expression", TL)]),
    ("cel-too-costly", _claim((f"{EX}.selectors[0].cel.expression", COSTLY_EXPR)), [(f"{EX}.selectors[0].cel.expression", F)]),
    ("cel-unknown-ident", _claim((f"{EX}.selectors[0].cel.expression", "dev.driver == 'x'")), [(f"{EX}.selectors[0].cel.expression", I)]),
    ("cel-unknown-field", _claim((f"{EX}.selectors[0].cel.expression", "device.name == 'x'")), [(f"{EX}.selectors[0].cel.expression", I)]),
    (
        "too-many-subrequests",
        _claim((f"{RQ}.exactly", DELETE), (f"{RQ}.firstAvailable", [{"name": f"s{i}", "deviceClassName": "c"} for i in range(9)])),
        [(f"{RQ}.firstAvailable", TM)],
    ),
    (
        "duplicate-subrequests",
        _claim((f"{RQ}.exactly", DELETE), (f"{RQ}.firstAvailable", subrequests() + subrequests())),
        [(f"{RQ}.firstAvailable[1]", D)],
    ),
    (
        "subrequest-without-class",
        _claim((f"{RQ}.exactly", DELETE), (f"{RQ}.firstAvailable", [{"name": "a"}])),
        [(f"{RQ}.firstAvailable[0].deviceClassName", R)],
    ),
    (
        "bad-subrequest-name",
        _claim((f"{RQ}.exactly", DELETE), (f"{RQ}.firstAvailable", [{"name": "A", "deviceClassName": "c"}])),
        [(f"{RQ}.firstAvailable[0].name", I)],
    ),
    (
        "subrequest-all-with-count",
        _claim((f"{RQ}.exactly", DELETE), (f"{RQ}.firstAvailable", subrequests(allocationMode="All", count=3))),
        [(f"{RQ}.firstAvailable[0].count", I)],
    ),
    ("toleration-bad-operator", _claim((f"{EX}.tolerations", [{"key": "k", "operator": "In"}])), [(f"{EX}.tolerations[0].operator", NS)]),
    (
        "toleration-exists-with-value",
        _claim((f"{EX}.tolerations", [{"key": "k", "operator": "Exists", "value": "v"}])),
        [(f"{EX}.tolerations[0].value", I)],
    ),
    ("toleration-bad-effect", _claim((f"{EX}.tolerations", [{"key": "k", "effect": "Sometimes"}])), [(f"{EX}.tolerations[0].effect", NS)]),
    ("toleration-bad-key", _claim((f"{EX}.tolerations", [{"key": "a/b/c", "operator": "Exists"}])), [(f"{EX}.tolerations[0].key", I)]),
    ("toleration-bad-value", _claim((f"{EX}.tolerations", [{"key": "k", "value": "not ok"}])), [(f"{EX}.tolerations[0].value", I)]),
    (
        "constraint-unknown-request",
        _claim(("spec.devices.constraints", [{"requests": ["nope"], "matchAttribute": "example.com/numa"}])),
        [("spec.devices.constraints[0].requests[0]", I)],
    ),
    (
        "constraint-two-slashes",
        _claim(("spec.devices.constraints", [{"requests": ["gpu/a/b"], "matchAttribute": "example.com/numa"}])),
        [("spec.devices.constraints[0].requests[0]", I)],
    ),
    ("constraint-without-attribute", _claim(("spec.devices.constraints", [{"requests": ["gpu"]}])), [("spec.devices.constraints[0]", R)]),
    (
        "constraint-attribute-without-domain",
        _claim(("spec.devices.constraints", [{"matchAttribute": "numa"}])),
        [("spec.devices.constraints[0].matchAttribute", I)],
    ),
    (
        "constraint-duplicate-requests",
        _claim(("spec.devices.constraints", [{"requests": ["gpu", "gpu"], "matchAttribute": "example.com/numa"}])),
        [("spec.devices.constraints[0].requests[1]", D)],
    ),
    (
        "too-many-constraints",
        _claim(("spec.devices.constraints", [{"matchAttribute": "example.com/numa"}] * 33)),
        [("spec.devices.constraints", TM)],
    ),
    ("config-without-opaque", _claim(("spec.devices.config", [{"requests": ["gpu"]}])), [("spec.devices.config[0].opaque", R)]),
    (
        "config-without-driver",
        _claim(("spec.devices.config", [{"opaque": {"parameters": {}}}])),
        [("spec.devices.config[0].opaque.driver", I), ("spec.devices.config[0].opaque.driver", R)],
    ),
    (
        "config-without-parameters",
        _claim(("spec.devices.config", [{"opaque": {"driver": "gpu.example.com"}}])),
        [("spec.devices.config[0].opaque.parameters", R)],
    ),
    (
        "config-parameters-not-object",
        _claim(("spec.devices.config", [{"opaque": {"driver": "gpu.example.com", "parameters": [1]}}])),
        [("spec.devices.config[0].opaque.parameters", I)],
    ),
    (
        "config-parameters-too-long",
        _claim(("spec.devices.config", [{"opaque": {"driver": "gpu.example.com", "parameters": {"x": "y" * 10240}}}])),
        [("spec.devices.config[0].opaque.parameters", TL)],
    ),
    (
        "config-unknown-request",
        _claim(("spec.devices.config", [{"requests": ["other"], "opaque": {"driver": "d.example.com", "parameters": {}}}])),
        [("spec.devices.config[0].requests[0]", I)],
    ),
    ("capacity-bad-key", _claim((f"{EX}.capacity", {"requests": {"bad key": "1"}})), [(f"{EX}.capacity.requests", I)]),
    ("capacity-bad-quantity", _claim((f"{EX}.capacity", {"requests": {"memory": "lots"}})), [(f"{EX}.capacity.requests[memory]", I)]),
    ("requests-wrong-type", _claim(("spec.devices.requests", "gpu")), [("spec.devices.requests", I)]),
    ("exactly-wrong-type", _claim((f"{RQ}.exactly", ["x"])), [(f"{RQ}.exactly", I)]),
    ("count-wrong-type", _claim((f"{EX}.count", "one")), [(f"{EX}.count", I), (f"{EX}.count", I)]),
    ("selectors-wrong-type", _claim((f"{EX}.selectors", {"cel": {}})), [(f"{EX}.selectors", I)]),
]


@pytest.mark.parametrize(("name", "obj", "expected"), CLAIM_CASES, ids=[c[0] for c in CLAIM_CASES])
def test_invalid_claims(name: str, obj: Obj, expected: list[tuple[str, str]]) -> None:
    assert create(CLAIMS, obj, ctx(labels=ADMIN_NS)) == sorted(expected)


def test_claim_cases_count() -> None:
    assert len(CLAIM_CASES) >= 40


def test_claim_error_messages() -> None:
    obj = _claim((f"{EX}.allocationMode", "All"), (f"{EX}.count", 2), (f"{RQ}.name", "Bad"))
    c = ctx()
    errs = set(messages(CLAIMS, obj, c))
    assert f"{EX}.count: Invalid value: 2: must not be specified when allocationMode is 'All'" in errs
    obj = _claim((f"{RQ}.exactly", DELETE))
    assert messages(CLAIMS, obj, c) == [
        f"{RQ}: Required value: exactly one of `exactly` or `firstAvailable` is required"
    ]
    obj = _claim((f"{EX}.allocationMode", "Some"))
    assert messages(CLAIMS, obj, c) == [
        f'{EX}.allocationMode: Unsupported value: "Some": supported values: "All", "ExactCount"'
    ]
    obj = _claim((f"{EX}.selectors[0].cel.expression", "device.driver"))
    (err,) = messages(CLAIMS, obj, c)
    assert "must evaluate to bool or the unknown type, not string" in err
    obj = _claim((f"{EX}.selectors[0].cel.expression", COSTLY_EXPR))
    (err,) = messages(CLAIMS, obj, c)
    assert err == f"{EX}.selectors[0].cel.expression: Forbidden: too complex, exceeds cost limit"


def test_claim_defaults() -> None:
    obj = _claim((f"{EX}.tolerations", [{"key": "k", "value": "v"}]))
    CLAIMS.default(obj, ctx())
    exactly = obj["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["allocationMode"] == "ExactCount"
    assert exactly["count"] == 1
    assert exactly["tolerations"][0]["operator"] == "Equal"
    all_mode = _claim((f"{EX}.allocationMode", "All"))
    CLAIMS.default(all_mode, ctx())
    assert "count" not in all_mode["spec"]["devices"]["requests"][0]["exactly"]


def test_admin_access_needs_namespace_label() -> None:
    obj = _claim((f"{EX}.adminAccess", True))
    assert create(CLAIMS, obj, ctx()) == [(f"{RQ}.adminAccess", F)]
    assert create(CLAIMS, obj, ctx(labels=ADMIN_NS)) == []
    (err,) = messages(CLAIMS, obj, ctx())
    assert err == (
        f"{RQ}.adminAccess: Forbidden: admin access to devices requires the "
        "`resource.kubernetes.io/admin-access: true` label on the containing namespace"
    )


def test_claim_spec_is_immutable() -> None:
    stored = copy.deepcopy(CLAIM)
    CLAIMS.default(stored, ctx())
    new = _claim((f"{EX}.deviceClassName", "other"))
    assert update(CLAIMS, new, stored) == [("spec", I)]
    assert update(CLAIMS, CLAIM, stored) == []  # defaults make the client's short form equal


def test_claim_update_keeps_status() -> None:
    old = copy.deepcopy(CLAIM)
    old["status"] = {"reservedFor": []}
    new = copy.deepcopy(CLAIM)
    new["status"] = {"allocation": {}}
    CLAIMS.prepare_for_update(new, old, ctx())
    assert new["status"] == {"reservedFor": []}


# --- ResourceClaim status ---------------------------------------------------------------------

RESULT = {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}
ALLOCATION = {
    "devices": {"results": [RESULT]},
    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]},
}
POD_REF = {"resource": "pods", "name": "pod-1", "uid": "0b4ad4c0-6d1e-4a88-9a47-1f2c3b4d5e6f"}


def status_update(new_status: Obj, old_status: Obj | None = None, gates: str = "", labels: dict[str, str] | None = None, deleting: bool = False) -> list[tuple[str, str]]:
    old = copy.deepcopy(CLAIM)
    CLAIMS.default(old, ctx())
    if old_status is not None:
        old["status"] = copy.deepcopy(old_status)
    new = copy.deepcopy(old)
    new["status"] = copy.deepcopy(new_status)
    if deleting:
        new["metadata"]["deletionTimestamp"] = old["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    c = ctx(gates, labels or ADMIN_NS)
    CLAIM_STATUS.prepare_for_update(new, old, c)
    CLAIMS.drop_disabled_fields(new, old, c)
    return sorted((e.field, e.reason) for e in CLAIM_STATUS.validate_update(new, old, c))


def test_status_valid_allocation_and_reservation() -> None:
    assert status_update({"allocation": ALLOCATION, "reservedFor": [POD_REF]}) == []


@pytest.mark.parametrize(
    ("status", "old", "expected"),
    [
        ({"reservedFor": [POD_REF]}, None, [("status.reservedFor", F)]),
        ({"allocation": ALLOCATION, "reservedFor": [POD_REF, POD_REF]}, None, [("status.reservedFor[1]", D)]),
        ({"allocation": ALLOCATION, "reservedFor": [{"resource": "pods"}]}, None, [("status.reservedFor[0].name", R), ("status.reservedFor[0].uid", R)]),
        (
            {"allocation": ALLOCATION, "reservedFor": [{**POD_REF, "uid": f"u-{i}"} for i in range(257)]},
            None,
            [("status.reservedFor", TM)],
        ),
        (
            {"allocation": {"devices": {"results": [{**RESULT, "device": "Bad"}]}}},
            None,
            [("status.allocation.devices.results[0].device", I)],
        ),
        (
            {"allocation": {"devices": {"results": [{**RESULT, "request": "other"}]}}},
            None,
            [("status.allocation.devices.results[0].request", I)],
        ),
        (
            {"allocation": {"devices": {"results": [{**RESULT, "shareID": "not-a-uid"}]}}},
            None,
            [("status.allocation.devices.results[0].shareID", I)],
        ),
        (
            {"allocation": {"devices": {"results": [{**RESULT, "bindingConditions": ["ready"]}]}}},
            None,
            [("status.allocation.devices.results[0].bindingFailureConditions", I)],
        ),
        (
            {"allocation": {"devices": {"results": [RESULT], "config": [{"opaque": {"driver": "d.example.com", "parameters": {}}}]}}},
            None,
            [("status.allocation.devices.config[0].source", R)],
        ),
        (
            {"allocation": {**ALLOCATION, "nodeSelector": {"nodeSelectorTerms": []}}},
            None,
            [("status.allocation.nodeSelector.nodeSelectorTerms", R)],
        ),
        (
            {"allocation": {"devices": {"results": [{**RESULT, "device": "gpu-1"}]}}},
            {"allocation": ALLOCATION},
            [("status.allocation", I)],
        ),
        (
            {"allocation": ALLOCATION, "devices": [{"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-9"}]},
            None,
            [("status.devices[0]", I)],
        ),
        (
            {"allocation": ALLOCATION, "devices": [{"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}] * 2},
            None,
            [("status.devices[1]", D)],
        ),
        (
            {
                "allocation": ALLOCATION,
                "devices": [{"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0", "networkData": {"ips": ["10.0.0.1"]}}],
            },
            None,
            [("status.devices[0].networkData.ips[0]", I)],
        ),
        ({"allocation": ALLOCATION, "reservedFor": [POD_REF]}, {"allocation": ALLOCATION}, [("status.reservedFor", F)]),
        ({"reservedFor": "pod"}, None, [("status.reservedFor", I)]),
    ],
)
def test_invalid_status_updates(status: Obj, old: Obj | None, expected: list[tuple[str, str]]) -> None:
    deleting = expected == [("status.reservedFor", F)] and old is not None
    assert status_update(status, old, deleting=deleting) == sorted(expected)


def test_status_allocation_may_be_cleared_and_prunes_device_status() -> None:
    device_status = {"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0", "data": {"ok": True}}
    old = copy.deepcopy(CLAIM)
    old["status"] = {"allocation": ALLOCATION, "devices": [device_status]}
    new = copy.deepcopy(old)
    new["status"] = {"devices": [device_status]}
    c = ctx()
    CLAIM_STATUS.prepare_for_update(new, old, c)
    CLAIMS.drop_disabled_fields(new, old, c)
    assert "devices" not in new["status"]
    assert CLAIM_STATUS.validate_update(new, old, c) == []


def test_status_admin_access_needs_label() -> None:
    status = {"allocation": {"devices": {"results": [{**RESULT, "adminAccess": True}]}}}
    assert status_update(status, labels={"x": "y"}) == [("status.allocation.devices.results[0].adminAccess", F)]
    assert status_update(status) == []


def test_status_update_ignores_spec_and_metadata() -> None:
    old = copy.deepcopy(CLAIM)
    new = copy.deepcopy(CLAIM)
    new["spec"] = {"devices": {"requests": []}}
    new["metadata"]["labels"] = {"changed": "yes"}
    CLAIM_STATUS.prepare_for_update(new, old, ctx())
    assert new["spec"] == old["spec"]
    assert "labels" not in new["metadata"]


# --- feature gates ----------------------------------------------------------------------------

_TOL = [{"key": "k", "operator": "Exists"}]

CLAIM_GATE_CASES: list[tuple[str, Obj, str, Any]] = [
    (Gate.DRADeviceTaints, CLAIM, f"{EX}.tolerations", _TOL),
    (Gate.DRAConsumableCapacity, CLAIM, f"{EX}.capacity", {"requests": {"memory": "1Gi"}}),
    (Gate.DRADerivedAttributes, CLAIM, f"{EX}.derivedAttributes", [{"name": "example.com/x", "expression": "1"}]),
    (Gate.DRAReservedForWorkloads, CLAIM, "spec.reservedFor", {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g", "uid": "u1"}),
]


@pytest.mark.parametrize(("gate", "base", "path", "value"), CLAIM_GATE_CASES, ids=[f"{c[0]}-{c[2]}" for c in CLAIM_GATE_CASES])
def test_gated_field_dropped_when_off_kept_when_on(gate: str, base: Obj, path: str, value: Any) -> None:
    check_gate_drop(gate, CLAIMS, base, path, value)


def test_status_gates() -> None:
    result = {**RESULT, "bindingConditions": ["a"], "bindingFailureConditions": ["b"], "skipNodeOperations": ["*"], "shareID": "0b4ad4c0-6d1e-4a88-9a47-1f2c3b4d5e6f"}
    status = {"allocation": {"devices": {"results": [result]}, "reservedForAnyPod": True}}
    claim = copy.deepcopy(CLAIM)
    claim["status"] = copy.deepcopy(status)
    off = ctx(gates_flag({Gate.DRADeviceBindingConditions: False, Gate.DRAOptionalNodeOperations: False, Gate.DRAConsumableCapacity: False, Gate.DRAReservedForWorkloads: False}))
    dropped = copy.deepcopy(claim)
    CLAIMS.drop_disabled_fields(dropped, copy.deepcopy(CLAIM), off)
    assert dropped["status"]["allocation"] == {"devices": {"results": [RESULT]}}
    kept = copy.deepcopy(claim)
    CLAIMS.drop_disabled_fields(kept, copy.deepcopy(claim), off)
    assert kept["status"] == status
    on = ctx(gates_flag({Gate.DRAOptionalNodeOperations: True, Gate.DRAReservedForWorkloads: True}))
    kept = copy.deepcopy(claim)
    CLAIMS.drop_disabled_fields(kept, copy.deepcopy(CLAIM), on)
    assert kept["status"] == status


def test_first_available_dropped_leaves_required_error() -> None:
    class Off:
        def enabled(self, name: str) -> bool:
            return name != Gate.DRAPrioritizedList

    c = RequestContext(feature_gates=Off())
    obj = copy.deepcopy(PRIORITIZED_CLAIM)
    CLAIMS.drop_disabled_fields(obj, None, c)
    errs = sorted((e.field, e.reason) for e in CLAIMS.validate_create(obj, c))
    assert ("spec.devices.requests[0]", R) in errs
