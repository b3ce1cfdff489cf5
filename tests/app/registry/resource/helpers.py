"""Shared by the resource.k8s.io validation tests: valid objects of every kind, short reason names,
and helpers that call a strategy's hooks in the order the generic store (app/api/generic.py) does.

Each invalid case of the per-kind tests mutates one of these valid objects and lists the exact
(field path, reason) pairs the strategy must report.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from app.registry.base import KindStrategy, RequestContext
from kube.features import FeatureGates
from kube.objects import Obj

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


def changed(base: Obj, *changes: tuple[str, Any]) -> Obj:
    """A copy of ``base`` with each (path, value) change applied by ``put``."""
    obj = copy.deepcopy(base)
    for path, value in changes:
        put(obj, path, value)
    return obj


def messages(strategy: KindStrategy, obj: Obj, c: RequestContext) -> list[str]:
    obj = copy.deepcopy(obj)
    strategy.default(obj, c)
    return [str(e) for e in strategy.validate_create(obj, c)]


def subrequests(**extra: Any) -> list[Obj]:
    """A firstAvailable list of one subrequest."""
    return [{"name": "a", "deviceClassName": "c", **extra}]


# CEL expressions over the size and the cost limits.
LONG_EXPR = "device.driver == '" + "x" * 10300 + "'"
_COSTLY_LIST = "[" + ",".join(str(i) for i in range(10)) + "]"
COSTLY_EXPR = " ".join(f"{_COSTLY_LIST}.all(v{i}," for i in range(6)) + " v0 > 0" + ")" * 6


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


# --- feature gates ----------------------------------------------------------------------------


def get_path(path: str) -> Callable[[Obj], Any]:
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


def gate_obj(base: Obj, path: str, value: Any) -> Obj:
    obj = copy.deepcopy(base)
    put(obj, path, copy.deepcopy(value))
    return obj


def check_gate_drop(gate: str, strategy: KindStrategy, base: Obj, path: str, value: Any) -> None:
    """A field behind ``gate`` at ``path`` goes when the gate is off unless the stored object
    already uses it, and stays when the gate is on."""
    get = get_path(path)
    obj = gate_obj(base, path, value)
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
