"""Table-driven checks of resource.k8s.io validation, defaulting and feature-gate drops.

Each invalid case mutates a valid object and lists the exact (field path, reason) pairs the
strategy must report; the hooks are called in the order app/api/rest.py calls them.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest

from app.registry.base import KindStrategy, RequestContext
from app.registry.resource.deviceclass import STRATEGY as CLASSES
from app.registry.resource.devicetaintrule import STATUS_STRATEGY as TAINT_RULE_STATUS
from app.registry.resource.devicetaintrule import STRATEGY as TAINT_RULES
from app.registry.resource.resourceclaim import STATUS_STRATEGY as CLAIM_STATUS
from app.registry.resource.resourceclaim import STRATEGY as CLAIMS
from app.registry.resource.resourceclaimtemplate import STRATEGY as TEMPLATES
from app.registry.resource.resourceslice import STRATEGY as SLICES
from kube.features import FeatureGates

Obj = dict[str, Any]
R, I, D, NS, F, TL, TM, NF = (  # noqa: E741 - short reason names keep the tables readable
    "FieldValueRequired",
    "FieldValueInvalid",
    "FieldValueDuplicate",
    "FieldValueNotSupported",
    "FieldValueForbidden",
    "FieldValueTooLong",
    "FieldValueTooMany",
    "FieldValueNotFound",
)
DELETE = object()
ADMIN_NS = {"resource.kubernetes.io/admin-access": "true"}


def ctx(gates: str = "", labels: dict[str, str] | None = None) -> RequestContext:
    return RequestContext(feature_gates=FeatureGates.parse(gates), namespace_labels=labels or {})


_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]|\[([^\]]+)\]")


def put(obj: Obj, path: str, value: Any) -> Obj:
    """Set (or delete) a value by ``a.b[0].c[key]`` path in a copy-free way."""
    parts: list[Any] = []
    for name, index, key in _PART.findall(path):
        parts.append(name or (int(index) if index else key))
    cur: Any = obj
    for part in parts[:-1]:
        cur = cur[part]
    if value is DELETE:
        del cur[parts[-1]]
    elif isinstance(cur, list) and parts[-1] == len(cur):
        cur.append(value)
    else:
        cur[parts[-1]] = value
    return obj


def create(strategy: KindStrategy, obj: Obj, c: RequestContext | None = None) -> list[tuple[str, str]]:
    c = c or ctx()
    obj = copy.deepcopy(obj)
    strategy.prepare_for_create(obj, c)
    strategy.default(obj, c)
    strategy.drop_disabled_fields(obj, None, c)
    return sorted((e.field, e.reason) for e in strategy.validate_create(obj, c))


def update(strategy: KindStrategy, new: Obj, old: Obj, c: RequestContext | None = None) -> list[tuple[str, str]]:
    c = c or ctx()
    new, old = copy.deepcopy(new), copy.deepcopy(old)
    strategy.prepare_for_update(new, old, c)
    strategy.default(new, c)
    strategy.drop_disabled_fields(new, old, c)
    return sorted((e.field, e.reason) for e in strategy.validate_update(new, old, c))


# --- valid objects (shapes from the upstream DRA docs examples) -------------------------------

CLAIM: Obj = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "single-gpu", "namespace": "default"},
    "spec": {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "exactly": {
                        "deviceClassName": "gpu.example.com",
                        "selectors": [{"cel": {"expression": 'device.attributes["gpu.example.com"].model == "A100"'}}],
                    },
                }
            ]
        }
    },
}

PRIORITIZED_CLAIM: Obj = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "prioritized", "namespace": "default"},
    "spec": {
        "devices": {
            "requests": [
                {
                    "name": "req-0",
                    "firstAvailable": [
                        {
                            "name": "large-black",
                            "deviceClassName": "resource.example.com",
                            "selectors": [{"cel": {"expression": 'device.attributes["resource-driver.example.com"].color == "black"'}}],
                        },
                        {"name": "small-white", "deviceClassName": "resource.example.com", "allocationMode": "ExactCount", "count": 2},
                    ],
                },
                {"name": "req-1", "exactly": {"deviceClassName": "resource.example.com", "allocationMode": "All"}},
            ],
            "constraints": [{"requests": ["req-0", "req-1"], "matchAttribute": "resource-driver.example.com/numa"}],
            "config": [
                {
                    "requests": ["req-0/large-black"],
                    "opaque": {"driver": "resource-driver.example.com", "parameters": {"kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}}},
                }
            ],
        }
    },
}

SLICE: Obj = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "cat-slice"},
    "spec": {
        "driver": "resource-driver.example.com",
        "pool": {"name": "black-cat-pool", "generation": 1, "resourceSliceCount": 1},
        "nodeName": "worker-1",
        "devices": [
            {
                "name": "large-black-cat",
                "attributes": {
                    "color": {"string": "black"},
                    "size": {"string": "large"},
                    "cat": {"bool": True},
                    "driverVersion": {"version": "1.2.3"},
                    "index": {"int": 0},
                },
                "capacity": {"memory": {"value": "80Gi"}},
            }
        ],
    },
}

PARTITIONABLE_SLICE: Obj = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "partitions"},
    "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": "node-1", "generation": 0, "resourceSliceCount": 2},
        "perDeviceNodeSelection": True,
        "devices": [
            {
                "name": "gpu-0-half-0",
                "nodeName": "node-1",
                "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}],
            }
        ],
    },
}

COUNTER_SLICE: Obj = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "counters"},
    "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": "node-1", "generation": 0, "resourceSliceCount": 2},
        "nodeName": "node-1",
        "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}],
    },
}

TEMPLATE: Obj = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "gpu-template", "namespace": "default"},
    "spec": {"metadata": {"labels": {"app": "inference"}}, "spec": copy.deepcopy(CLAIM["spec"])},
}

CLASS: Obj = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {
        "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
        "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {"mode": "shared"}}}],
        "extendedResourceName": "example.com/gpu",
    },
}

TAINT_RULE: Obj = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceTaintRule",
    "metadata": {"name": "maintenance"},
    "spec": {
        "deviceSelector": {"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"},
        "taint": {"key": "example.com/maintenance", "value": "planned", "effect": "NoExecute"},
    },
}


@pytest.mark.parametrize(
    ("strategy", "obj"),
    [
        (CLAIMS, CLAIM),
        (CLAIMS, PRIORITIZED_CLAIM),
        (SLICES, SLICE),
        (SLICES, PARTITIONABLE_SLICE),
        (SLICES, COUNTER_SLICE),
        (TEMPLATES, TEMPLATE),
        (CLASSES, CLASS),
        (TAINT_RULES, TAINT_RULE),
    ],
)
def test_valid_objects(strategy: KindStrategy, obj: Obj) -> None:
    assert create(strategy, obj) == []


# --- ResourceClaim ----------------------------------------------------------------------------

RQ = "spec.devices.requests[0]"
EX = f"{RQ}.exactly"


def _claim(*changes: tuple[str, Any]) -> Obj:
    obj = copy.deepcopy(CLAIM)
    for path, value in changes:
        put(obj, path, value)
    return obj


def _sub(**extra: Any) -> list[Obj]:
    return [{"name": "a", "deviceClassName": "c", **extra}]


_LONG_EXPR = "device.driver == '" + "x" * 10300 + "'"
_COSTLY = "[" + ",".join(str(i) for i in range(10)) + "]"
_COSTLY_EXPR = " ".join(f"{_COSTLY}.all(v{i}," for i in range(6)) + " v0 > 0" + ")" * 6

CLAIM_CASES: list[tuple[str, Obj, list[tuple[str, str]]]] = [
    ("missing-request-name", _claim((f"{RQ}.name", DELETE)), [(f"{RQ}.name", R)]),
    ("bad-request-name", _claim((f"{RQ}.name", "Bad_Name")), [(f"{RQ}.name", I)]),
    ("no-exactly-or-first", _claim((f"{RQ}.exactly", DELETE)), [(RQ, R)]),
    ("both-exactly-and-first", _claim((f"{RQ}.firstAvailable", _sub())), [(RQ, I)]),
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
    ("cel-too-long", _claim((f"{EX}.selectors[0].cel.expression", _LONG_EXPR)), [(f"{EX}.selectors[0].cel.expression", TL)]),
    ("cel-too-costly", _claim((f"{EX}.selectors[0].cel.expression", _COSTLY_EXPR)), [(f"{EX}.selectors[0].cel.expression", F)]),
    ("cel-unknown-ident", _claim((f"{EX}.selectors[0].cel.expression", "dev.driver == 'x'")), [(f"{EX}.selectors[0].cel.expression", I)]),
    ("cel-unknown-field", _claim((f"{EX}.selectors[0].cel.expression", "device.name == 'x'")), [(f"{EX}.selectors[0].cel.expression", I)]),
    (
        "too-many-subrequests",
        _claim((f"{RQ}.exactly", DELETE), (f"{RQ}.firstAvailable", [{"name": f"s{i}", "deviceClassName": "c"} for i in range(9)])),
        [(f"{RQ}.firstAvailable", TM)],
    ),
    (
        "duplicate-subrequests",
        _claim((f"{RQ}.exactly", DELETE), (f"{RQ}.firstAvailable", _sub() + _sub())),
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
        _claim((f"{RQ}.exactly", DELETE), (f"{RQ}.firstAvailable", _sub(allocationMode="All", count=3))),
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
    assert len(SLICE_CASES) >= 40
    assert min(len(TEMPLATE_CASES), len(CLASS_CASES), len(TAINT_RULE_CASES)) >= 15


def messages(strategy: KindStrategy, obj: Obj, c: RequestContext) -> list[str]:
    obj = copy.deepcopy(obj)
    strategy.default(obj, c)
    return [str(e) for e in strategy.validate_create(obj, c)]


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
    obj = _claim((f"{EX}.selectors[0].cel.expression", _COSTLY_EXPR))
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


# --- ResourceSlice ----------------------------------------------------------------------------

D0 = "spec.devices[0]"


def _slice(*changes: tuple[str, Any], base: Obj = SLICE) -> Obj:
    obj = copy.deepcopy(base)
    for path, value in changes:
        put(obj, path, value)
    return obj


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
            "DRANodeAllocatableResources=true",
            {"nvidia.com/gpu": {"overhead": {"perPod": "1"}}},
            [(f"{D0}.nodeAllocatableResources[nvidia.com/gpu]", I)],
        ),
        ("DRANodeAllocatableResources=true", {"memory": {}}, [(f"{D0}.nodeAllocatableResources[memory]", R)]),
        (
            "DRANodeAllocatableResources=true",
            {"memory": {"mapping": {"capacityKey": "nope", "capacityMultiplier": "1"}}},
            [(f"{D0}.nodeAllocatableResources[memory].mapping.capacityKey", NF)],
        ),
        (
            "DRANodeAllocatableResources=true",
            {"cpu": {"mapping": {"deviceMultiplier": "-1"}, "overhead": {}}},
            [(f"{D0}.nodeAllocatableResources[cpu].mapping.deviceMultiplier", I), (f"{D0}.nodeAllocatableResources[cpu].overhead", I)],
        ),
        ("DRANodeAllocatableResources=true", {"memory": {"mapping": {"capacityKey": "memory", "capacityMultiplier": "1"}}}, []),
    ],
)
def test_node_allocatable_resources(gates: str, change: Obj, expected: list[tuple[str, str]]) -> None:
    obj = _slice((f"{D0}.nodeAllocatableResources", change))
    assert create(SLICES, obj, ctx(gates)) == sorted(expected)


def test_slice_skip_node_operations() -> None:
    obj = _slice(("spec.skipNodeOperations", ["Sometimes"]))
    assert create(SLICES, obj, ctx("DRAOptionalNodeOperations=true")) == [("spec.skipNodeOperations[0]", NS)]
    obj = _slice(("spec.skipNodeOperations", ["NodePrepareResources"]))
    assert create(SLICES, obj, ctx("DRAOptionalNodeOperations=true")) == [("spec.skipNodeOperations", I)]


def test_slice_update_immutables_and_taint_ratcheting() -> None:
    changed = _slice(("spec.driver", "other.example.com"), ("spec.pool.name", "other"), ("spec.nodeName", "worker-2"))
    assert update(SLICES, changed, SLICE) == [("spec.driver", I), ("spec.nodeName", I), ("spec.pool.name", I)]
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


# --- ResourceClaimTemplate --------------------------------------------------------------------

TRQ = "spec.spec.devices.requests[0]"
TEX = f"{TRQ}.exactly"


def _template(*changes: tuple[str, Any]) -> Obj:
    obj = copy.deepcopy(TEMPLATE)
    for path, value in changes:
        put(obj, path, value)
    return obj


TEMPLATE_CASES: list[tuple[str, Obj, list[tuple[str, str]]]] = [
    ("missing-request-name", _template((f"{TRQ}.name", DELETE)), [(f"{TRQ}.name", R)]),
    ("bad-request-name", _template((f"{TRQ}.name", "Bad")), [(f"{TRQ}.name", I)]),
    ("no-exactly", _template((f"{TRQ}.exactly", DELETE)), [(TRQ, R)]),
    ("both", _template((f"{TRQ}.firstAvailable", _sub())), [(TRQ, I)]),
    ("empty-class", _template((f"{TEX}.deviceClassName", "")), [(f"{TEX}.deviceClassName", R)]),
    ("bad-mode", _template((f"{TEX}.allocationMode", "Any")), [(f"{TEX}.allocationMode", NS)]),
    ("negative-count", _template((f"{TEX}.count", -2)), [(f"{TEX}.count", I)]),
    ("cel-syntax", _template((f"{TEX}.selectors[0].cel.expression", "((")), [(f"{TEX}.selectors[0].cel.expression", I)]),
    ("cel-not-bool", _template((f"{TEX}.selectors[0].cel.expression", "1 + 2")), [(f"{TEX}.selectors[0].cel.expression", I)]),
    ("selector-without-cel", _template((f"{TEX}.selectors", [{}])), [(f"{TEX}.selectors[0].cel", R)]),
    (
        "duplicate-requests",
        _template(("spec.spec.devices.requests[1]", {"name": "gpu", "exactly": {"deviceClassName": "c"}})),
        [("spec.spec.devices.requests[1]", D)],
    ),
    ("constraint-without-attribute", _template(("spec.spec.devices.constraints", [{}])), [("spec.spec.devices.constraints[0]", R)]),
    ("config-without-opaque", _template(("spec.spec.devices.config", [{}])), [("spec.spec.devices.config[0].opaque", R)]),
    ("template-metadata-name", _template(("spec.metadata.name", "x")), [("spec.metadata.name", F)]),
    ("template-bad-label", _template(("spec.metadata.labels", {"bad key": "v"})), [("spec.metadata.labels", I)]),
    ("spec-wrong-type", _template(("spec.spec", "x")), [("spec.spec", I)]),
    ("toleration-bad-operator", _template((f"{TEX}.tolerations", [{"operator": "Gt"}])), [(f"{TEX}.tolerations[0].operator", NS)]),
]


@pytest.mark.parametrize(("name", "obj", "expected"), TEMPLATE_CASES, ids=[c[0] for c in TEMPLATE_CASES])
def test_invalid_templates(name: str, obj: Obj, expected: list[tuple[str, str]]) -> None:
    assert create(TEMPLATES, obj, ctx(labels=ADMIN_NS)) == sorted(expected)


def test_template_admin_access_and_immutability() -> None:
    obj = _template((f"{TEX}.adminAccess", True))
    assert create(TEMPLATES, obj) == [(f"{TRQ}.adminAccess", F)]
    assert create(TEMPLATES, obj, ctx(labels=ADMIN_NS)) == []
    stored = copy.deepcopy(TEMPLATE)
    TEMPLATES.default(stored, ctx())
    assert update(TEMPLATES, _template((f"{TEX}.deviceClassName", "other")), stored) == [("spec", I)]
    assert update(TEMPLATES, TEMPLATE, stored) == []


# --- DeviceClass ------------------------------------------------------------------------------


def _class(*changes: tuple[str, Any]) -> Obj:
    obj = copy.deepcopy(CLASS)
    for path, value in changes:
        put(obj, path, value)
    return obj


CLASS_CASES: list[tuple[str, Obj, list[tuple[str, str]]]] = [
    ("too-many-selectors", _class(("spec.selectors", [{"cel": {"expression": "true"}}] * 33)), [("spec.selectors", TM)]),
    ("selector-without-cel", _class(("spec.selectors", [{}])), [("spec.selectors[0].cel", R)]),
    ("selector-without-expression", _class(("spec.selectors", [{"cel": {}}])), [("spec.selectors[0].cel.expression", R)]),
    ("cel-syntax", _class(("spec.selectors[0].cel.expression", "device.")), [("spec.selectors[0].cel.expression", I)]),
    ("cel-not-bool", _class(("spec.selectors[0].cel.expression", '"x"')), [("spec.selectors[0].cel.expression", I)]),
    ("cel-too-long", _class(("spec.selectors[0].cel.expression", _LONG_EXPR)), [("spec.selectors[0].cel.expression", TL)]),
    ("cel-too-costly", _class(("spec.selectors[0].cel.expression", _COSTLY_EXPR)), [("spec.selectors[0].cel.expression", F)]),
    ("cel-bad-overload", _class(("spec.selectors[0].cel.expression", "device.driver > 1")), [("spec.selectors[0].cel.expression", I)]),
    ("too-many-configs", _class(("spec.config", CLASS["spec"]["config"] * 33)), [("spec.config", TM)]),
    ("config-without-opaque", _class(("spec.config", [{}])), [("spec.config[0].opaque", R)]),
    ("config-bad-driver", _class(("spec.config[0].opaque.driver", "Bad_Driver")), [("spec.config[0].opaque.driver", I)]),
    ("config-without-parameters", _class(("spec.config[0].opaque.parameters", DELETE)), [("spec.config[0].opaque.parameters", R)]),
    ("config-parameters-string-json", _class(("spec.config[0].opaque.parameters", "not json")), [("spec.config[0].opaque.parameters", I)]),
    ("config-parameters-too-long", _class(("spec.config[0].opaque.parameters", {"a": "b" * 10240})), [("spec.config[0].opaque.parameters", TL)]),
    ("extended-resource-no-domain", _class(("spec.extendedResourceName", "gpu")), [("spec.extendedResourceName", I)]),
    ("extended-resource-native", _class(("spec.extendedResourceName", "kubernetes.io/gpu")), [("spec.extendedResourceName", I)]),
    ("selectors-wrong-type", _class(("spec.selectors", "device.driver == 'x'")), [("spec.selectors", I)]),
    ("spec-wrong-type", _class(("spec", [])), [("spec", I)]),
]


@pytest.mark.parametrize(("name", "obj", "expected"), CLASS_CASES, ids=[c[0] for c in CLASS_CASES])
def test_invalid_classes(name: str, obj: Obj, expected: list[tuple[str, str]]) -> None:
    assert create(CLASSES, obj) == sorted(expected)


def test_class_update_treats_unchanged_selectors_as_stored() -> None:
    stored = _class(("spec.selectors[0].cel.expression", "device.driver"))  # would be refused when new
    assert update(CLASSES, stored, stored) == []
    changed = _class(("spec.selectors", [{"cel": {"expression": "device.driver"}}, {"cel": {"expression": "true"}}]))
    assert update(CLASSES, changed, stored) == [("spec.selectors[0].cel.expression", I)]


# --- DeviceTaintRule --------------------------------------------------------------------------


def _rule(*changes: tuple[str, Any]) -> Obj:
    obj = copy.deepcopy(TAINT_RULE)
    for path, value in changes:
        put(obj, path, value)
    return obj


TAINT_RULE_CASES: list[tuple[str, Obj, list[tuple[str, str]]]] = [
    ("missing-spec", _rule(("spec", DELETE)), [("spec", R)]),
    ("missing-taint", _rule(("spec.taint", DELETE)), [("spec.taint", R)]),
    ("missing-key", _rule(("spec.taint.key", DELETE)), [("spec.taint.key", I), ("spec.taint.key", I)]),
    ("bad-key", _rule(("spec.taint.key", "a/b/c")), [("spec.taint.key", I)]),
    ("bad-value", _rule(("spec.taint.value", "not valid")), [("spec.taint.value", I)]),
    ("missing-effect", _rule(("spec.taint.effect", DELETE)), [("spec.taint.effect", R)]),
    ("bad-effect", _rule(("spec.taint.effect", "Evict")), [("spec.taint.effect", NS)]),
    ("prefer-no-schedule", _rule(("spec.taint.effect", "PreferNoSchedule")), [("spec.taint.effect", NS)]),
    ("bad-driver", _rule(("spec.deviceSelector.driver", "Bad_Driver")), [("spec.deviceSelector.driver", I)]),
    ("empty-driver", _rule(("spec.deviceSelector.driver", "")), [("spec.deviceSelector.driver", I), ("spec.deviceSelector.driver", R)]),
    ("bad-pool", _rule(("spec.deviceSelector.pool", "Pool/")), [("spec.deviceSelector.pool", I), ("spec.deviceSelector.pool", I)]),
    ("empty-pool", _rule(("spec.deviceSelector.pool", "")), [("spec.deviceSelector.pool", R)]),
    ("bad-device", _rule(("spec.deviceSelector.device", "GPU.0")), [("spec.deviceSelector.device", I)]),
    ("selector-wrong-type", _rule(("spec.deviceSelector", "all")), [("spec.deviceSelector", I)]),
    ("taint-wrong-type", _rule(("spec.taint", ["x"])), [("spec.taint", I)]),
    ("effect-wrong-type", _rule(("spec.taint.effect", 1)), [("spec.taint.effect", I), ("spec.taint.effect", R)]),
]


@pytest.mark.parametrize(("name", "obj", "expected"), TAINT_RULE_CASES, ids=[c[0] for c in TAINT_RULE_CASES])
def test_invalid_taint_rules(name: str, obj: Obj, expected: list[tuple[str, str]]) -> None:
    assert create(TAINT_RULES, obj) == sorted(expected)


def test_taint_rule_time_added_and_effect_ratcheting() -> None:
    obj = copy.deepcopy(TAINT_RULE)
    c = ctx()
    TAINT_RULES.default(obj, c)
    stamp = obj["spec"]["taint"]["timeAdded"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp)
    old = copy.deepcopy(obj)
    old["spec"]["taint"]["timeAdded"] = "2020-01-01T00:00:00Z"
    new = copy.deepcopy(old)
    new["spec"]["taint"]["effect"] = "NoSchedule"
    TAINT_RULES.prepare_for_update(new, old, c)
    assert new["spec"]["taint"]["timeAdded"] != "2020-01-01T00:00:00Z"
    # The client's own timeAdded wins.
    new = copy.deepcopy(old)
    new["spec"]["taint"].update(effect="None", timeAdded="2021-01-01T00:00:00Z")
    TAINT_RULES.prepare_for_update(new, old, c)
    assert new["spec"]["taint"]["timeAdded"] == "2021-01-01T00:00:00Z"
    # A stored unknown effect is tolerated as long as it does not change.
    legacy = copy.deepcopy(old)
    legacy["spec"]["taint"]["effect"] = "Legacy"
    assert update(TAINT_RULES, legacy, legacy) == []


def test_taint_rule_status() -> None:
    cond = {"type": "EvictionInProgress", "status": "True", "reason": "Evicting", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    new = copy.deepcopy(TAINT_RULE)
    new["status"] = {"conditions": [{**cond, "type": f"T{i}"} for i in range(9)]}
    errs = sorted((e.field, e.reason) for e in TAINT_RULE_STATUS.validate_update(new, TAINT_RULE, ctx()))
    assert errs == [("status.conditions", TM)]
    new["status"] = {"conditions": [{**cond, "reason": ""}]}
    errs = sorted((e.field, e.reason) for e in TAINT_RULE_STATUS.validate_update(new, TAINT_RULE, ctx()))
    assert errs == [("status.conditions[0].reason", R)]


# --- feature gates ----------------------------------------------------------------------------

GateCase = tuple[str, KindStrategy, Obj, str, Any, Callable[[Obj], Any]]


def _get(path: str) -> Callable[[Obj], Any]:
    parts = [name or (int(index) if index else key) for name, index, key in _PART.findall(path)]

    def getter(obj: Obj) -> Any:
        cur: Any = obj
        for part in parts:
            if (isinstance(cur, dict) and part in cur) or (isinstance(cur, list) and isinstance(part, int) and part < len(cur)):
                cur = cur[part]
            else:
                return None
        return cur

    return getter


_TOL = [{"key": "k", "operator": "Exists"}]
GATE_CASES: list[tuple[str, KindStrategy, Obj, str, Any]] = [
    ("DRADeviceTaints", CLAIMS, CLAIM, f"{EX}.tolerations", _TOL),
    ("DRAConsumableCapacity", CLAIMS, CLAIM, f"{EX}.capacity", {"requests": {"memory": "1Gi"}}),
    ("DRADerivedAttributes", CLAIMS, CLAIM, f"{EX}.derivedAttributes", [{"name": "example.com/x", "expression": "1"}]),
    ("DRAReservedForWorkloads", CLAIMS, CLAIM, "spec.reservedFor", {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g", "uid": "u1"}),
    ("DRADeviceTaints", TEMPLATES, TEMPLATE, f"{TEX}.tolerations", _TOL),
    ("DRADeviceTaints", SLICES, SLICE, f"{D0}.taints", [{"key": "k", "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"}]),
    ("DRAConsumableCapacity", SLICES, SLICE, f"{D0}.allowMultipleAllocations", True),
    ("DRADeviceBindingConditions", SLICES, SLICE, f"{D0}.bindsToNode", True),
    ("DRAListTypeAttributes", SLICES, SLICE, f"{D0}.attributes.color", {"strings": ["black", "white"]}),
    ("DRAOptionalNodeOperations", SLICES, SLICE, "spec.skipNodeOperations", ["*"]),
    ("DRANodeAllocatableResources", SLICES, SLICE, f"{D0}.nodeAllocatableResources", {"memory": {"overhead": {"perPod": "1Mi"}}}),
    ("DRAPartitionableDevices", SLICES, {**COUNTER_SLICE, "spec": {k: v for k, v in COUNTER_SLICE["spec"].items() if k != "sharedCounters"}}, "spec.sharedCounters", COUNTER_SLICE["spec"]["sharedCounters"]),
    ("DRAPartitionableDevicesType", SLICES, SLICE, "spec.partitionTypeAttribute", "example.com/type"),
]


def _gate_obj(base: Obj, path: str, value: Any) -> Obj:
    obj = copy.deepcopy(base)
    put(obj, path, copy.deepcopy(value))
    return obj


@pytest.mark.parametrize(("gate", "strategy", "base", "path", "value"), GATE_CASES, ids=[f"{c[0]}-{c[1].kind}-{c[3]}" for c in GATE_CASES])
def test_gated_field_dropped_when_off_kept_when_on(gate: str, strategy: KindStrategy, base: Obj, path: str, value: Any) -> None:
    get = _get(path)
    obj = _gate_obj(base, path, value)
    off, on = ctx(f"{gate}=false"), ctx(f"{gate}=true")
    dropped = copy.deepcopy(obj)
    strategy.drop_disabled_fields(dropped, None, off)
    assert get(dropped) in (None, {})
    kept = copy.deepcopy(obj)
    strategy.drop_disabled_fields(kept, None, on)
    assert get(kept) == value
    # Update: kept when the stored object already uses it, dropped when newly added.
    again = copy.deepcopy(obj)
    strategy.drop_disabled_fields(again, obj, off)
    assert get(again) == value
    added = copy.deepcopy(obj)
    strategy.drop_disabled_fields(added, copy.deepcopy(base), off)
    assert get(added) in (None, {})


def test_status_gates() -> None:
    result = {**RESULT, "bindingConditions": ["a"], "bindingFailureConditions": ["b"], "skipNodeOperations": ["*"], "shareID": "0b4ad4c0-6d1e-4a88-9a47-1f2c3b4d5e6f"}
    status = {"allocation": {"devices": {"results": [result]}, "reservedForAnyPod": True}}
    claim = copy.deepcopy(CLAIM)
    claim["status"] = copy.deepcopy(status)
    off = ctx("DRADeviceBindingConditions=false,DRAOptionalNodeOperations=false,DRAConsumableCapacity=false,DRAReservedForWorkloads=false")
    dropped = copy.deepcopy(claim)
    CLAIMS.drop_disabled_fields(dropped, copy.deepcopy(CLAIM), off)
    assert dropped["status"]["allocation"] == {"devices": {"results": [RESULT]}}
    kept = copy.deepcopy(claim)
    CLAIMS.drop_disabled_fields(kept, copy.deepcopy(claim), off)
    assert kept["status"] == status
    on = ctx("DRAOptionalNodeOperations=true,DRAReservedForWorkloads=true")
    kept = copy.deepcopy(claim)
    CLAIMS.drop_disabled_fields(kept, copy.deepcopy(CLAIM), on)
    assert kept["status"] == status


def test_device_class_extended_resource_gate_is_locked_on() -> None:
    obj = copy.deepcopy(CLASS)
    CLASSES.drop_disabled_fields(obj, None, ctx())
    assert obj["spec"]["extendedResourceName"] == "example.com/gpu"


def test_first_available_dropped_leaves_required_error() -> None:
    class Off:
        def enabled(self, name: str) -> bool:
            return name != "DRAPrioritizedList"

    c = RequestContext(feature_gates=Off())
    obj = copy.deepcopy(PRIORITIZED_CLAIM)
    CLAIMS.drop_disabled_fields(obj, None, c)
    errs = sorted((e.field, e.reason) for e in CLAIMS.validate_create(obj, c))
    assert ("spec.devices.requests[0]", R) in errs


def test_reserved_for_schema_registered() -> None:
    from app.api.schemas import unknown_fields

    obj = _gate_obj(CLAIM, "spec.reservedFor", {"resource": "podgroups", "name": "g", "uid": "u"})
    obj["status"] = {"allocation": {"reservedForAnyPod": True}}
    assert unknown_fields(obj, "resource.k8s.io/v1", "ResourceClaim") == []
