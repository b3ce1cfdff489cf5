"""Allocator table, modelled on upstream's allocatortesting cases (our own fixtures and wording)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from kube.features import FeatureGates, Gate
from kube.quantity import Quantity
from schedulers.allocator import (
    Allocated,
    AllocatedState,
    AllocationError,
    Allocator,
    AllocatorFeatures,
    ResourceIndex,
    SearchCache,
    Unschedulable,
    allocate_claims,
    node_allocatable_demand,
)
from schedulers.allocator import devices as allocator_devices

DRIVER_A = "driver-a"
DRIVER_B = "driver-b"
NODE1 = "node-1"
NODE2 = "node-2"
TS = "2026-01-01T00:00:00Z"

# --- fixture builders ------------------------------------------------------------------------------


def node(name: str = NODE1, region: str = "region-1") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"region": region}}}


def attr(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, list):
        return {"strings": value}
    return {"string": value}


def device(name: str, attrs: dict[str, Any] | None = None, capacity: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    dev: dict[str, Any] = {"name": name}
    if attrs:
        dev["attributes"] = {k: attr(v) for k, v in attrs.items()}
    if capacity:
        dev["capacity"] = {k: (v if isinstance(v, dict) else {"value": v}) for k, v in capacity.items()}
    dev.update(extra)
    return dev


def rslice(
    name: str, devices: list[dict[str, Any]] | None = None, *, node_name: str | None = NODE1, pool: str = "pool-1",
    driver: str = DRIVER_A, generation: int = 1, count: int = 1, **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {"driver": driver, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count}}
    if node_name and not spec:
        body["nodeName"] = node_name
    body.update(spec)
    if devices is not None:
        body["devices"] = devices
    return {"metadata": {"name": name, "uid": f"uid-{name}", "generation": 1}, "spec": body}


def one_device_slice(name: str = "slice-1", **kw: Any) -> dict[str, Any]:
    return rslice(name, [device("device-1")], **kw)


def dclass(name: str = "class-a", driver: str = DRIVER_A, selectors: tuple[str, ...] = (), config: tuple[str, ...] = ()) -> dict[str, Any]:
    sels = [f'device.driver == "{driver}"', *selectors]
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in sels]}
    if config:
        spec["config"] = [{"opaque": {"driver": driver, "parameters": {"v": v}}} for v in config]
    return {"metadata": {"name": name}, "spec": spec}


def req(name: str = "req-0", cls: str = "class-a", count: int | None = None, *, mode: str | None = None,
        selectors: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls}
    if mode:
        exactly["allocationMode"] = mode
    if count is not None:
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    exactly.update(extra)
    return {"name": name, "exactly": exactly}


def sub(name: str, cls: str = "class-a", count: int | None = None, **extra: Any) -> dict[str, Any]:
    body = req(name, cls, count, **extra)["exactly"]
    return {"name": name, **body}


def first_available(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": list(subs)}


def claim(name: str = "claim-0", *requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None,
          config: list[dict[str, Any]] | None = None, ns: str = "default") -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests) or [req()]}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    return {"metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"}, "spec": {"devices": devices}}


def claim_config(value: str, *requests: str) -> dict[str, Any]:
    body: dict[str, Any] = {"opaque": {"driver": DRIVER_A, "parameters": {"v": value}}}
    if requests:
        body["requests"] = list(requests)
    return body


def result(request: str, dev: str = "device-1", pool: str = "pool-1", driver: str = DRIVER_A, **extra: Any) -> dict[str, Any]:
    return {"request": request, "driver": driver, "pool": pool, "device": dev, **extra}


LOCAL = "local"


def alloc(*results: dict[str, Any], selector: Any = LOCAL, node_name: str = NODE1, config: list[dict[str, Any]] | None = None,
          **extra: Any) -> dict[str, Any]:
    devices: dict[str, Any] = {"results": list(results)}
    if config:
        devices["config"] = config
    out: dict[str, Any] = {"devices": devices}
    if selector == LOCAL:
        out["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
    elif selector is not None:
        out["nodeSelector"] = selector
    out.update(extra)
    return out


def allocated_claim(name: str, *results: dict[str, Any]) -> dict[str, Any]:
    c = claim(name)
    c["status"] = {"allocation": alloc(*results)}
    return c


def class_cfg(value: str, *requests: str) -> dict[str, Any]:
    return {"source": "FromClass", "requests": list(requests), "opaque": {"driver": DRIVER_A, "parameters": {"v": value}}}


def claim_cfg(value: str, *requests: str) -> dict[str, Any]:
    out: dict[str, Any] = {"source": "FromClaim", "opaque": {"driver": DRIVER_A, "parameters": {"v": value}}}
    if requests:
        out["requests"] = list(requests)
    return out


def taint(key: str = "example.com/broken", effect: str = "NoSchedule", value: str | None = None) -> dict[str, Any]:
    t = {"key": key, "effect": effect}
    if value is not None:
        t["value"] = value
    return t


def unschedulable(detail: str) -> Unschedulable:
    return Unschedulable(f"cannot allocate all claims: {detail}")


REGION_SELECTOR = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["region-1"]}]}]}
ZONE_SELECTOR = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "NotIn", "values": ["region-9"]}]}]}
TWO = [device("device-1"), device("device-2")]
SHARED_DEV = device("shared-1", capacity={"memory": "10Gi"}, allowMultipleAllocations=True)
ADMIN_NS = {"default": {"resource.kubernetes.io/admin-access": "true"}}


@dataclass
class Case:
    name: str
    claims: list[dict[str, Any]]
    slices: list[dict[str, Any]]
    expect: list[dict[str, Any]] | Unschedulable | str  # allocations, unschedulable, or error substring
    classes: list[dict[str, Any]] = field(default_factory=lambda: [dclass()])
    node: dict[str, Any] = field(default_factory=node)
    allocated: list[dict[str, Any]] = field(default_factory=list)
    in_flight: dict[str, Any] = field(default_factory=dict)
    rules: list[dict[str, Any]] = field(default_factory=list)
    features: AllocatorFeatures = field(default_factory=AllocatorFeatures)
    namespaces: dict[str, dict[str, str]] | None = None
    timestamp: str | None = None


def partitionable_slices(devices: list[dict[str, Any]], counters: dict[str, str] | None = None) -> list[dict[str, Any]]:
    counter_set = {"name": "gpu-0", "counters": {k: {"value": v} for k, v in (counters or {"memory": "8Gi"}).items()}}
    return [
        rslice("counters", None, count=2, sharedCounters=[counter_set], nodeName=NODE1),
        rslice("devices", devices, count=2, nodeName=NODE1),
    ]


def part(name: str, memory: str = "4Gi", counter_set: str = "gpu-0", counter: str = "memory") -> dict[str, Any]:
    return device(name, consumesCounters=[{"counterSet": counter_set, "counters": {counter: {"value": memory}}}])


CASES: list[Case] = [
    # --- basics ---
    Case("simple", [claim()], [one_device_slice()], [alloc(result("req-0"))]),
    Case("no-claims", [], [one_device_slice()], []),
    Case("no-slices", [claim()], [], unschedulable(
        "claim default/claim-0, request req-0: no device matches the device class class-a and the request's selectors")),
    Case("not-enough-suitable-devices", [claim("claim-0", req("req-0"), req("req-1"))], [one_device_slice()], unschedulable(
        "claim default/claim-0, request req-1: no combination of devices satisfies all requests and constraints")),
    Case("count-two", [claim("claim-0", req(count=2))], [rslice("slice-1", TWO)],
         [alloc(result("req-0"), result("req-0", "device-2"))]),
    Case("count-too-large", [claim("claim-0", req(count=3))], [rslice("slice-1", TWO)], unschedulable(
        "claim default/claim-0, request req-0: needs 3 devices, 2 of 2 matching devices available")),
    Case("already-allocated-device-skipped", [claim()], [rslice("slice-1", TWO)], [alloc(result("req-0", "device-2"))],
         allocated=[allocated_claim("other", result("req-0"))]),
    Case("all-devices-allocated", [claim()], [rslice("slice-1", TWO)], unschedulable(
        "claim default/claim-0, request req-0: needs 1 device, 0 of 2 matching devices available"),
         allocated=[allocated_claim("other", result("req-0"), result("req-0", "device-2"))]),
    Case("in-flight-allocation-blocks-device", [claim()], [rslice("slice-1", TWO)], [alloc(result("req-0", "device-2"))],
         in_flight={"uid-x": allocated_claim("x", result("req-0"))}),
    Case("two-claims-two-devices", [claim("claim-0"), claim("claim-1")], [rslice("slice-1", TWO)],
         [alloc(result("req-0")), alloc(result("req-0", "device-2"))]),
    Case("two-claims-one-device", [claim("claim-0"), claim("claim-1")], [one_device_slice()], unschedulable(
        "claim default/claim-1, request req-0: no combination of devices satisfies all requests and constraints")),
    Case("no-classes", [claim()], [one_device_slice()], 'claim default/claim-0, request req-0: could not retrieve device class class-a: deviceclass.resource.k8s.io "class-a" not found',
         classes=[]),
    Case("empty-class", [claim("claim-0", req(cls=""))], [one_device_slice()],
         "claim default/claim-0, request req-0: missing device class name (unsupported request type?)"),
    Case("too-many-devices", [claim("claim-0", req(count=33))], [one_device_slice()],
         "claim default/claim-0: number of requested devices 33 exceeds the claim limit of 32"),
    Case("unsupported-mode", [claim("claim-0", req(mode="Some"))], [one_device_slice()],
         "claim default/claim-0, request req-0: unsupported count mode Some"),
    Case("unknown-constraint", [claim("claim-0", constraints=[{"requests": []}])], [one_device_slice()],
         "empty constraint (unsupported constraint type?)"),
    Case("reserved-for-workloads-changes-nothing", [claim()], [one_device_slice()], [alloc(result("req-0"))],
         features=AllocatorFeatures.from_gates(FeatureGates({Gate.DRAReservedForWorkloads: True}))),
    # --- selectors ---
    Case("class-selects-driver", [claim("claim-0", req(cls="class-b"))],
         [one_device_slice(), one_device_slice("slice-2", driver=DRIVER_B)],
         [alloc(result("req-0", driver=DRIVER_B))], classes=[dclass(), dclass("class-b", DRIVER_B)]),
    Case("request-selector-attribute", [claim("claim-0", req(selectors=('device.attributes["driver-a"].model == "B"',)))],
         [rslice("slice-1", [device("device-1", {"model": "A"}), device("device-2", {"model": "B"})])],
         [alloc(result("req-0", "device-2"))]),
    Case("request-selector-capacity", [claim("claim-0", req(selectors=('device.capacity["driver-a"].memory.compareTo(quantity("2Gi")) >= 0',)))],
         [rslice("slice-1", [device("device-1", capacity={"memory": "1Gi"}), device("device-2", capacity={"memory": "4Gi"})])],
         [alloc(result("req-0", "device-2"))]),
    Case("selector-runtime-error", [claim("claim-0", req(selectors=('device.attributes["driver-a"].missing == 1',)))],
         [one_device_slice()], "claim default/claim-0: selector #0: CEL runtime error: no such key: missing"),
    Case("class-rejects-before-faulty-request-selector",
         [claim("claim-0", req(selectors=('device.attributes["driver-a"].x == 1',)))],
         [rslice("slice-1", [device("device-1"), device("device-2", {"x": 1})])], [alloc(result("req-0", "device-2"))],
         classes=[dclass(selectors=('"x" in device.attributes["driver-a"]',))]),
    Case("selector-compile-error", [claim("claim-0", req(selectors=("device.driver ==",)))], [one_device_slice()],
         "claim default/claim-0: selector #0: CEL compile error"),
    Case("selector-empty", [claim("claim-0", req(selectors=("",)))], [one_device_slice()],
         "claim default/claim-0, request req-0, selector #0: CEL expression empty (unsupported selector type?)"),
    # --- All mode ---
    Case("all-devices-single", [claim("claim-0", req(mode="All"))], [one_device_slice()], [alloc(result("req-0"))]),
    Case("all-devices-many", [claim("claim-0", req(mode="All"))],
         [one_device_slice(), one_device_slice("slice-2", pool="pool-2")],
         [alloc(result("req-0"), result("req-0", pool="pool-2"))]),
    Case("all-devices-of-incomplete-pool", [claim("claim-0", req(mode="All"))], [one_device_slice(count=2)],
         "claim default/claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 is currently being updated"),
    Case("all-devices-some-allocated", [claim("claim-0", req(mode="All"))], [rslice("slice-1", TWO)], unschedulable(
        "claim default/claim-0, request req-0: needs 2 devices, 1 of 2 matching devices available"),
         allocated=[allocated_claim("other", result("req-0"))]),
    Case("all-devices-no-slices", [claim("claim-0", req(mode="All"))], [], unschedulable(
        "claim default/claim-0, request req-0: no device matches the device class class-a and the request's selectors")),
    Case("all-devices-plus-another",
         [claim("claim-0", req(mode="All")), claim("claim-1", req(cls="class-b"))],
         [one_device_slice(), one_device_slice("slice-2", driver=DRIVER_B)],
         [alloc(result("req-0")), alloc(result("req-0", driver=DRIVER_B))], classes=[dclass(), dclass("class-b", DRIVER_B)]),
    Case("all-devices-count-toward-the-limit", [claim("claim-0", req(mode="All"))],
         [rslice("slice-1", [device(f"device-{i}") for i in range(33)])],
         "claim default/claim-0: number of requested devices 33 exceeds the claim limit of 32"),
    Case("all-devices-skip-shared-device-without-room", [claim("claim-0", req(mode="All"))], [rslice("slice-1", [device("device-1"), SHARED_DEV])],
         [alloc(result("req-0"))],
         allocated=[allocated_claim("other", result("req-0", "shared-1", shareID="s", consumedCapacity={"memory": "10Gi"}))]),
    Case("all-devices-no-solution", [claim("claim-1"), claim("claim-0", req(mode="All"))], [one_device_slice()], unschedulable(
        "claim default/claim-0, request req-0: no combination of devices satisfies all requests and constraints")),
    # --- admin access ---
    Case("admin-all-devices-some-allocated", [claim("claim-0", req(mode="All", adminAccess=True))], [rslice("slice-1", TWO)],
         [alloc(result("req-0", adminAccess=True), result("req-0", "device-2", adminAccess=True))],
         allocated=[allocated_claim("other", result("req-0"))], namespaces=ADMIN_NS),
    Case("admin-count-some-allocated", [claim("claim-0", req(count=2, adminAccess=True))], [rslice("slice-1", TWO)],
         [alloc(result("req-0", adminAccess=True), result("req-0", "device-2", adminAccess=True))],
         allocated=[allocated_claim("other", result("req-0"))]),
    Case("admin-separate-claims-share-device",
         [claim("claim-0", req(adminAccess=True)), claim("claim-1", req(adminAccess=True))], [rslice("slice-1", TWO)],
         [alloc(result("req-0", adminAccess=True)), alloc(result("req-0", adminAccess=True))], namespaces=ADMIN_NS),
    Case("admin-same-claim-cannot-reuse",
         [claim("claim-0", req("req-0", adminAccess=True), req("req-1", mode="All", adminAccess=True))], [rslice("slice-1", TWO)],
         unschedulable("claim default/claim-0, request req-1: no combination of devices satisfies all requests and constraints")),
    Case("admin-pick-blocks-normal-claim", [claim("claim-0", req(adminAccess=True)), claim("claim-1")], [rslice("slice-1", TWO)],
         [alloc(result("req-0", adminAccess=True)), alloc(result("req-0", "device-2"))]),
    Case("admin-namespace-not-labelled", [claim("claim-0", req(adminAccess=True))], [one_device_slice()], Unschedulable(
        'claim default/claim-0, request req-0: admin access requires the namespace default to be labelled '
        'resource.kubernetes.io/admin-access="true"'), namespaces={"default": {}}),
    Case("admin-feature-disabled", [claim("claim-0", req(adminAccess=True))], [one_device_slice()],
         "claim default/claim-0, request req-0: admin access is requested, but the feature is disabled",
         features=AllocatorFeatures(admin_access=False)),
    # --- pools and generations ---
    Case("newest-generation-only", [claim()],
         [rslice("old", [device("device-1")], generation=1), rslice("new", [device("device-2")], generation=2)],
         [alloc(result("req-0", "device-2"))]),
    Case("incomplete-pool-avoided", [claim()], [one_device_slice(count=2)], unschedulable(
        "claim default/claim-0, request req-0: no device matches the device class class-a and the request's selectors")),
    Case("incomplete-pool-other-pool-used", [claim()],
         [one_device_slice(count=2), one_device_slice("slice-2", pool="pool-2")], [alloc(result("req-0", pool="pool-2"))]),
    Case("obsolete-pool-dropped", [claim()],
         [one_device_slice(count=2, generation=1), rslice("slice-2", [device("device-9")], node_name=NODE2, generation=2)],
         unschedulable("claim default/claim-0, request req-0: no device matches the device class class-a and the request's selectors")),
    Case("pool-complete-across-nodes", [claim("claim-0", req(mode="All"))],
         [one_device_slice(count=2), rslice("slice-2", [device("device-2")], node_name=NODE2, count=2)],
         [alloc(result("req-0"))]),
    Case("duplicate-device-invalid-pool", [claim()],
         [one_device_slice(count=2), one_device_slice("slice-2", count=2)],
         Unschedulable("invalid resource pools were encountered: driver-a/pool-1: duplicate device name device-1")),
    Case("invalid-pool-ignored-when-other-fits", [claim()],
         [one_device_slice(count=2), one_device_slice("slice-2", count=2), one_device_slice("slice-3", pool="pool-2")],
         [alloc(result("req-0", pool="pool-2"))]),
    Case("pools-sorted-by-name", [claim()],
         [one_device_slice("slice-z", pool="pool-b"), one_device_slice("slice-a", pool="pool-a")],
         [alloc(result("req-0", pool="pool-a"))]),
    # --- node selection ---
    Case("slice-node-selector", [claim()], [one_device_slice(nodeSelector=REGION_SELECTOR)], [alloc(result("req-0"), selector=REGION_SELECTOR)]),
    Case("slice-node-selector-mismatch", [claim()], [one_device_slice(nodeSelector=REGION_SELECTOR)], unschedulable(
        "claim default/claim-0, request req-0: no device matches the device class class-a and the request's selectors"),
         node=node(region="region-2")),
    Case("all-nodes", [claim()], [one_device_slice(allNodes=True)], [alloc(result("req-0"), selector=None)]),
    Case("per-device-node-name", [claim()],
         [rslice("slice-1", [device("device-1", nodeName=NODE2), device("device-2", nodeName=NODE1)], perDeviceNodeSelection=True)],
         [alloc(result("req-0", "device-2"))]),
    Case("per-device-all-nodes", [claim()],
         [rslice("slice-1", [device("device-1", allNodes=True)], perDeviceNodeSelection=True)], [alloc(result("req-0"), selector=None)]),
    Case("node-selector-union", [claim("claim-0", req(count=2))],
         [one_device_slice(nodeSelector=REGION_SELECTOR), rslice("slice-2", [device("device-2")], pool="pool-2", nodeSelector=ZONE_SELECTOR),
          rslice("slice-3", [device("device-3")], pool="pool-3", allNodes=True)],
         [alloc(result("req-0"), result("req-0", "device-2", pool="pool-2"), selector={"nodeSelectorTerms": [{"matchExpressions": [
             REGION_SELECTOR["nodeSelectorTerms"][0]["matchExpressions"][0], ZONE_SELECTOR["nodeSelectorTerms"][0]["matchExpressions"][0],
         ]}]})]),
    # --- constraints ---
    Case("match-attribute-backtracks",
         [claim("claim-0", req(count=2), constraints=[{"matchAttribute": "driver-a/model"}])],
         [rslice("slice-1", [device("device-1", {"model": "A"}), device("device-2", {"model": "B"}), device("device-3", {"model": "B"})])],
         [alloc(result("req-0", "device-2"), result("req-0", "device-3"))]),
    Case("match-attribute-missing", [claim("claim-0", req(count=2), constraints=[{"matchAttribute": "driver-a/model"}])],
         [rslice("slice-1", [device("device-1"), device("device-2", {"model": "B"}), device("device-3", {"model": "B"})])],
         [alloc(result("req-0", "device-2"), result("req-0", "device-3"))]),
    Case("match-attribute-type-differs", [claim("claim-0", req(count=2), constraints=[{"matchAttribute": "driver-a/n"}])],
         [rslice("slice-1", [device("device-1", {"n": 1}), device("device-2", {"n": "1"})])],
         unschedulable("claim default/claim-0, request req-0: no combination of devices satisfies all requests and constraints")),
    Case("match-attribute-scoped",
         [claim("claim-0", req("req-0"), req("req-1"), req("req-2"),
                constraints=[{"matchAttribute": "driver-a/model", "requests": ["req-0", "req-1"]}])],
         [rslice("slice-1", [device("device-1", {"model": "A"}), device("device-2", {"model": "B"}), device("device-3", {"model": "A"})])],
         [alloc(result("req-0", "device-1"), result("req-1", "device-3"), result("req-2", "device-2"))]),
    Case("match-attribute-foreign-domain", [claim("claim-0", req(count=2), constraints=[{"matchAttribute": "other.example/model"}])],
         [rslice("slice-1", [device("device-1", {"other.example/model": "A"}), device("device-2", {"model": "A"}),
                             device("device-3", {"other.example/model": "A"})])],
         [alloc(result("req-0", "device-1"), result("req-0", "device-3"))]),
    Case("match-attribute-all-mode-error", [claim("claim-0", req(mode="All"), constraints=[{"matchAttribute": "driver-a/model"}])],
         [rslice("slice-1", [device("device-1", {"model": "A"}), device("device-2", {"model": "B"})])],
         "claim default/claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint would not be satisfied"),
    Case("distinct-attribute", [claim("claim-0", req(count=2), constraints=[{"distinctAttribute": "driver-a/numa"}])],
         [rslice("slice-1", [device("device-1", {"numa": 0}), device("device-2", {"numa": 0}), device("device-3", {"numa": 1})])],
         [alloc(result("req-0", "device-1"), result("req-0", "device-3"))]),
    Case("distinct-attribute-impossible", [claim("claim-0", req(count=2), constraints=[{"distinctAttribute": "driver-a/numa"}])],
         [rslice("slice-1", [device("device-1", {"numa": 0}), device("device-2", {"numa": 0})])],
         unschedulable("claim default/claim-0, request req-0: no combination of devices satisfies all requests and constraints")),
    Case("list-attribute-intersection", [claim("claim-0", req(count=2), constraints=[{"matchAttribute": "driver-a/pci"}])],
         [rslice("slice-1", [device("device-1", {"pci": ["a", "b"]}), device("device-2", {"pci": ["c"]}), device("device-3", {"pci": ["b"]})])],
         [alloc(result("req-0", "device-1"), result("req-0", "device-3"))], features=AllocatorFeatures(list_attributes=True)),
    # --- backtracking ---
    Case("backtrack-within-claim", [claim("claim-0", req("req-0"), req("req-1", selectors=('device.attributes["driver-a"].model == "A"',)))],
         [rslice("slice-1", [device("device-1", {"model": "A"}), device("device-2", {"model": "B"})])],
         [alloc(result("req-0", "device-2"), result("req-1", "device-1"))]),
    Case("backtrack-across-claims",
         [claim("claim-0"), claim("claim-1", req(selectors=('device.attributes["driver-a"].model == "A"',)))],
         [rslice("slice-1", [device("device-1", {"model": "A"}), device("device-2", {"model": "B"})])],
         [alloc(result("req-0", "device-2")), alloc(result("req-0", "device-1"))]),
    # --- firstAvailable ---
    Case("prioritized-first-fits", [claim("claim-0", first_available("req-0", sub("sub-0"), sub("sub-1", "class-b")))],
         [one_device_slice(), one_device_slice("slice-2", driver=DRIVER_B)], [alloc(result("req-0/sub-0"))],
         classes=[dclass(), dclass("class-b", DRIVER_B)]),
    Case("prioritized-second-used", [claim("claim-0", first_available("req-0", sub("sub-0", count=2), sub("sub-1")))],
         [one_device_slice()], [alloc(result("req-0/sub-1"))]),
    Case("prioritized-backtracks-for-later-request",
         [claim("claim-0", first_available("req-0", sub("sub-0", count=2), sub("sub-1")), req("req-1"))], [rslice("slice-1", TWO)],
         [alloc(result("req-0/sub-1"), result("req-1", "device-2"))]),
    Case("prioritized-too-many-in-first-subrequest",
         [claim("claim-0", first_available("req-0", sub("sub-0", count=33), sub("sub-1")))], [one_device_slice()],
         [alloc(result("req-0/sub-1"))]),
    Case("prioritized-alternatives-beyond-the-limit",
         [claim("claim-0", first_available("req-0", sub("sub-0", count=32), sub("sub-1")),
                first_available("req-1", sub("sub-0", count=32), sub("sub-1")))],
         [rslice("slice-1", [device(f"device-{i}") for i in range(1, 65)])],
         [alloc(result("req-0/sub-1"), result("req-1/sub-1", "device-2"))]),
    Case("prioritized-none-fits", [claim("claim-0", first_available("req-0", sub("sub-0", count=2), sub("sub-1", count=3)))],
         [one_device_slice()], unschedulable("claim default/claim-0, request req-0: none of the subrequests can be satisfied")),
    Case("prioritized-feature-disabled", [claim("claim-0", first_available("req-0", sub("sub-0")))], [one_device_slice()],
         f"claim default/claim-0, request req-0: has subrequests, but the {Gate.DRAPrioritizedList} feature is disabled",
         features=AllocatorFeatures(prioritized_list=False)),
    Case("prioritized-config-follows-choice",
         [claim("claim-0", first_available("req-0", sub("sub-0", count=2), sub("sub-1")),
                config=[claim_config("all"), claim_config("first", "req-0/sub-0"), claim_config("second", "req-0/sub-1"),
                        claim_config("parent", "req-0")])],
         [one_device_slice()],
         [alloc(result("req-0/sub-1"), config=[claim_cfg("all"), claim_cfg("second", "req-0/sub-1"), claim_cfg("parent", "req-0")])]),
    Case("prioritized-constraint-on-subrequest",
         [claim("claim-0", first_available("req-0", sub("sub-0", count=2)), constraints=[{"matchAttribute": "driver-a/model", "requests": ["req-0/sub-0"]}])],
         [rslice("slice-1", [device("device-1", {"model": "A"}), device("device-2", {"model": "B"}), device("device-3", {"model": "B"})])],
         [alloc(result("req-0/sub-0", "device-2"), result("req-0/sub-0", "device-3"))]),
    # --- config ---
    Case("class-and-claim-config", [claim("claim-0", config=[claim_config("c")])], [one_device_slice()],
         [alloc(result("req-0"), config=[class_cfg("k", "req-0"), claim_cfg("c")])], classes=[dclass(config=("k",))]),
    Case("class-config-once-per-class", [claim("claim-0", req("req-0"), req("req-1"))], [rslice("slice-1", TWO)],
         [alloc(result("req-0"), result("req-1", "device-2"), config=[class_cfg("k", "req-0", "req-1")])], classes=[dclass(config=("k",))]),
    # --- taints ---
    Case("untolerated-taint-skipped", [claim()], [rslice("slice-1", [device("device-1", taints=[taint()]), device("device-2")])],
         [alloc(result("req-0", "device-2"))]),
    Case("taint-tolerated-exists", [claim("claim-0", req(tolerations=[{"key": "example.com/broken", "operator": "Exists"}]))],
         [rslice("slice-1", [device("device-1", taints=[taint()])])],
         [alloc(result("req-0", tolerations=[{"key": "example.com/broken", "operator": "Exists"}]))]),
    Case("taint-tolerated-equal", [claim("claim-0", req(tolerations=[{"key": "k", "value": "v", "effect": "NoExecute"}]))],
         [rslice("slice-1", [device("device-1", taints=[taint("k", "NoExecute", "w")]), device("device-2", taints=[taint("k", "NoExecute", "v")])])],
         [alloc(result("req-0", "device-2", tolerations=[{"key": "k", "value": "v", "effect": "NoExecute"}]))]),
    # An empty key with Equal tolerates every taint of that value (device validation allows it).
    Case("taint-tolerated-empty-key-equal", [claim("claim-0", req(tolerations=[{"key": "", "operator": "Equal", "value": "v"}]))],
         [rslice("slice-1", [device("device-1", taints=[taint("k", "NoSchedule", "w")]), device("device-2", taints=[taint("k", "NoSchedule", "v")])])],
         [alloc(result("req-0", "device-2", tolerations=[{"key": "", "operator": "Equal", "value": "v"}]))]),
    Case("taint-effect-none-ignored", [claim()], [rslice("slice-1", [device("device-1", taints=[taint(effect="None")])])],
         [alloc(result("req-0"))]),
    Case("no-execute-untolerated", [claim()], [rslice("slice-1", [device("device-1", taints=[taint(effect="NoExecute")])])],
         unschedulable("claim default/claim-0, request req-0: needs 1 device, 0 of 1 matching devices available (1 with untolerated taints)")),
    Case("taints-ignored-when-disabled", [claim()], [rslice("slice-1", [device("device-1", taints=[taint()])])],
         [alloc(result("req-0"))], features=AllocatorFeatures(device_taints=False, device_taint_rules=False)),
    Case("taint-rule-device", [claim()], [rslice("slice-1", TWO)], [alloc(result("req-0", "device-2"))],
         rules=[{"metadata": {"name": "r"}, "spec": {"deviceSelector": {"driver": DRIVER_A, "device": "device-1"}, "taint": taint()}}]),
    Case("taint-rule-whole-driver", [claim()], [rslice("slice-1", TWO)],
         unschedulable("claim default/claim-0, request req-0: needs 1 device, 0 of 2 matching devices available (2 with untolerated taints)"),
         rules=[{"metadata": {"name": "r"}, "spec": {"deviceSelector": {"driver": DRIVER_A}, "taint": taint()}}]),
    Case("taint-rule-other-pool", [claim()], [rslice("slice-1", TWO)], [alloc(result("req-0"))],
         rules=[{"metadata": {"name": "r"}, "spec": {"deviceSelector": {"pool": "pool-9"}, "taint": taint()}}]),
    Case("taint-rule-ignored-when-disabled", [claim()], [rslice("slice-1", TWO)], [alloc(result("req-0"))],
         rules=[{"metadata": {"name": "r"}, "spec": {"deviceSelector": {}, "taint": taint()}}],
         features=AllocatorFeatures(device_taint_rules=False)),
    # --- binding conditions ---
    Case("binding-conditions-copied", [claim()],
         [rslice("slice-1", [device("device-1", bindingConditions=["attached"], bindingFailureConditions=["failed"], bindsToNode=True)],
                 allNodes=True)],
         [alloc(result("req-0", bindingConditions=["attached"], bindingFailureConditions=["failed"]), allocationTimestamp=TS)],
         timestamp=TS),
    Case("binding-conditions-disabled", [claim()],
         [rslice("slice-1", [device("device-1", bindingConditions=["attached"], bindingFailureConditions=["failed"])])],
         unschedulable("claim default/claim-0, request req-0: no device matches the device class class-a and the request's selectors"),
         features=AllocatorFeatures(binding_conditions=False), timestamp=TS),
    Case("binding-pools-last", [claim()],
         [rslice("slice-1", [device("device-1", bindingConditions=["a"], bindingFailureConditions=["f"])], pool="pool-a"),
          one_device_slice("slice-2", pool="pool-b")],
         [alloc(result("req-0", pool="pool-b"))]),
    # --- partitionable devices ---
    Case("partitionable-counters-limit", [claim("claim-0", req(count=3))], partitionable_slices([part("p1"), part("p2"), part("p3")]),
         unschedulable("claim default/claim-0, request req-0: no combination of devices satisfies all requests and constraints")),
    Case("partitionable-two-fit", [claim("claim-0", req(count=2))], partitionable_slices([part("p1", "8Gi"), part("p2"), part("p3")]),
         [alloc(result("req-0", "p2"), result("req-0", "p3"))]),
    Case("partitionable-allocated-consumes", [claim("claim-0", req(count=2))], partitionable_slices([part("p1"), part("p2"), part("p3")]),
         unschedulable("claim default/claim-0, request req-0: no combination of devices satisfies all requests and constraints"),
         allocated=[allocated_claim("other", result("req-0", "p1"))]),
    Case("partitionable-disabled", [claim()], partitionable_slices([part("p1")]),
         unschedulable("claim default/claim-0, request req-0: no device matches the device class class-a and the request's selectors"),
         features=AllocatorFeatures(partitionable_devices=False)),
    Case("partitionable-unknown-counter-set", [claim()], partitionable_slices([part("p1", counter_set="gpu-9")]),
         Unschedulable("invalid resource pools were encountered: driver-a/pool-1: device p1 consumes counters from unknown counter set gpu-9")),
    # --- consumable capacity ---
    Case("shared-device-two-claims",
         [claim("claim-0", req(capacity={"requests": {"memory": "4Gi"}})), claim("claim-1", req(capacity={"requests": {"memory": "4Gi"}}))],
         [rslice("slice-1", [SHARED_DEV])],
         [alloc(result("req-0", "shared-1", shareID="share-0", consumedCapacity={"memory": "4Gi"})),
          alloc(result("req-0", "shared-1", shareID="share-1", consumedCapacity={"memory": "4Gi"}))]),
    Case("shared-device-full-capacity-default", [claim("claim-0"), claim("claim-1")], [rslice("slice-1", [SHARED_DEV])],
         unschedulable("claim default/claim-1, request req-0: no combination of devices satisfies all requests and constraints")),
    Case("shared-device-capacity-exhausted", [claim("claim-0", req(capacity={"requests": {"memory": "4Gi"}}))], [rslice("slice-1", [SHARED_DEV])],
         unschedulable("claim default/claim-0, request req-0: no combination of devices satisfies all requests and constraints"),
         allocated=[allocated_claim("other", result("req-0", "shared-1", shareID="s", consumedCapacity={"memory": "8Gi"}))]),
    Case("capacity-valid-range-rounds-up", [claim("claim-0", req(capacity={"requests": {"memory": "1500Mi"}}))],
         [rslice("slice-1", [device("shared-1", allowMultipleAllocations=True, capacity={"memory": {
             "value": "10Gi", "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "max": "4Gi", "step": "1Gi"}}}})])],
         [alloc(result("req-0", "shared-1", shareID="share-0", consumedCapacity={"memory": "2Gi"}))]),
    Case("capacity-valid-range-max-exceeded", [claim("claim-0", req(capacity={"requests": {"memory": "5Gi"}}))],
         [rslice("slice-1", [device("shared-1", allowMultipleAllocations=True, capacity={"memory": {
             "value": "10Gi", "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "max": "4Gi"}}}})])],
         unschedulable("claim default/claim-0, request req-0: no combination of devices satisfies all requests and constraints")),
    Case("capacity-valid-values", [claim("claim-0", req(capacity={"requests": {"memory": "2Gi"}}))],
         [rslice("slice-1", [device("shared-1", allowMultipleAllocations=True, capacity={
             "memory": {"value": "10Gi", "requestPolicy": {"default": "1Gi", "validValues": ["1Gi", "4Gi"]}},
             "bandwidth": {"value": "100", "requestPolicy": {"default": "10"}}, "slots": {"value": "2"}})])],
         [alloc(result("req-0", "shared-1", shareID="share-0", consumedCapacity={"memory": "4Gi", "bandwidth": "10", "slots": "2"}))]),
    Case("capacity-filter-exclusive-device", [claim("claim-0", req(capacity={"requests": {"memory": "2Gi"}}))],
         [rslice("slice-1", [device("device-1", capacity={"memory": "1Gi"}), device("device-2", capacity={"memory": "4Gi"})])],
         [alloc(result("req-0", "device-2"))]),
    Case("capacity-feature-disabled", [claim("claim-0", req(capacity={"requests": {"memory": "2Gi"}}))], [one_device_slice()],
         f"claim default/claim-0, request req-0: has capacity requests, but the {Gate.DRAConsumableCapacity} feature is disabled",
         features=AllocatorFeatures(consumable_capacity=False)),
    Case("shared-device-counters-consumed-once", [claim("claim-0", req(capacity={"requests": {"memory": "2Gi"}}))],
         partitionable_slices([device("shared-p", capacity={"memory": "10Gi"}, allowMultipleAllocations=True,
                                      consumesCounters=[{"counterSet": "gpu-0", "counters": {"memory": {"value": "6Gi"}}}])]),
         [alloc(result("req-0", "shared-p", shareID="share-0", consumedCapacity={"memory": "2Gi"}))],
         allocated=[allocated_claim("other", result("req-0", "shared-p", shareID="s", consumedCapacity={"memory": "1Gi"}))]),
    Case("shared-device-twice-in-one-claim",
         [claim("claim-0", req("req-0", capacity={"requests": {"memory": "4Gi"}}), req("req-1", capacity={"requests": {"memory": "4Gi"}}),
                constraints=[{"matchAttribute": "driver-a/model"}])],
         [rslice("slice-1", [device("shared-1", {"model": "A"}, capacity={"memory": "10Gi"}, allowMultipleAllocations=True)])],
         [alloc(result("req-0", "shared-1", shareID="share-0", consumedCapacity={"memory": "4Gi"}),
                result("req-1", "shared-1", shareID="share-1", consumedCapacity={"memory": "4Gi"}))]),
    Case("shared-device-serves-two-requests-tied-to-a-third",
         [claim("claim-0", req("req-0", selectors=('device.attributes["driver-a"].kind == "x"',)),
                req("req-1", capacity={"requests": {"memory": "4Gi"}}), req("req-2", capacity={"requests": {"memory": "4Gi"}}),
                constraints=[{"matchAttribute": "driver-a/model"}])],
         [rslice("slice-1", [device("device-1", {"model": "A", "kind": "x"}),
                             device("shared-1", {"model": "A", "kind": "s"}, capacity={"memory": "10Gi"}, allowMultipleAllocations=True)])],
         [alloc(result("req-0"), result("req-1", "shared-1", shareID="share-0", consumedCapacity={"memory": "4Gi"}),
                result("req-2", "shared-1", shareID="share-1", consumedCapacity={"memory": "4Gi"}))]),
    Case("shared-device-admin-access-takes-a-share",
         [claim("claim-0", req(adminAccess=True, capacity={"requests": {"memory": "4Gi"}})), claim("claim-1", req(capacity={"requests": {"memory": "4Gi"}}))],
         [rslice("slice-1", [SHARED_DEV])],
         [alloc(result("req-0", "shared-1", adminAccess=True, shareID="share-0", consumedCapacity={"memory": "4Gi"})),
          alloc(result("req-0", "shared-1", shareID="share-1", consumedCapacity={"memory": "4Gi"}))], namespaces=ADMIN_NS),
    Case("shared-device-without-capacity", [claim("claim-0"), claim("claim-1")],
         [rslice("slice-1", [device("shared-x", allowMultipleAllocations=True)])],
         [alloc(result("req-0", "shared-x", shareID="share-0")), alloc(result("req-0", "shared-x", shareID="share-1"))]),
    Case("shared-device-exclusively-allocated", [claim("claim-0", req(capacity={"requests": {"memory": "1Gi"}}))],
         [rslice("slice-1", [SHARED_DEV])],
         unschedulable("claim default/claim-0, request req-0: no combination of devices satisfies all requests and constraints"),
         allocated=[allocated_claim("other", result("req-0", "shared-1"))]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_allocate(case: Case) -> None:
    counter = itertools.count()
    kwargs: dict[str, Any] = dict(
        classes=case.classes, slices=case.slices, allocated_claims=case.allocated, in_flight=case.in_flight,
        taint_rules=case.rules, gates=case.features, namespace_labels=case.namespaces,
        share_id=lambda: f"share-{next(counter)}", allocation_timestamp=case.timestamp,
    )
    if isinstance(case.expect, str):
        with pytest.raises(AllocationError) as info:
            allocate_claims(case.claims, case.node, **kwargs)
        assert case.expect in str(info.value)
        return
    outcome = allocate_claims(case.claims, case.node, **kwargs)
    if isinstance(case.expect, Unschedulable):
        assert outcome == case.expect
    else:
        assert outcome == Allocated(case.expect)


@pytest.mark.parametrize("case", [c for c in CASES if not isinstance(c.expect, str)], ids=lambda c: c.name)
def test_allocate_through_search_cache(case: Case) -> None:
    """A cache hit (a later cycle, copies of the claims) gives exactly what a fresh search gives."""
    index = ResourceIndex(case.slices, case.classes, case.rules, case.features)
    state = AllocatedState.from_claims(case.allocated, case.in_flight)
    cache = SearchCache()
    outcomes = []
    for _cycle in range(2):
        counter = itertools.count()
        allocator = Allocator(index, state, case.features, case.namespaces, lambda c=counter: f"share-{next(c)}", cache=cache)  # type: ignore[misc]  # mypy types no lambda with a default argument (here: binding the loop variable)
        claims = [{**c, "metadata": dict(c["metadata"])} for c in case.claims]
        outcomes.append(allocator.allocate(case.node, claims, case.timestamp))
    assert not isinstance(case.expect, str)  # error cases are not among these
    expect = case.expect if isinstance(case.expect, Unschedulable) else Allocated(case.expect)
    assert outcomes == [expect, expect]
    admin = any(
        r.get("adminAccess") for c in case.claims for top in c["spec"]["devices"]["requests"] for r in [top.get("exactly") or {}, *(top.get("firstAvailable") or [])]
    )
    # Searches, failed ones too, are reused, except with admin access (namespace labels decide) or nothing to search.
    assert cache.hits == (1 if case.claims and not admin else 0)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_devices_whose_attributes_were_dropped_allocate_the_same(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    """Prepared devices keep their attributes and CEL view only while among the last few read: with
    room for one, every attribute is read again from the slice, and every decision is the same."""
    monkeypatch.setattr(allocator_devices, "VIEWS_KEPT", 1)
    allocate_through_a_loader(case)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_slices_read_through_a_loader_allocate_the_same(case: Case) -> None:
    """An index that keeps only what it indexes by and reads each slice's devices through a loader
    (as the scheduler does over its compact informer) decides exactly as one given the objects."""
    loads, first_cycle_loads = allocate_through_a_loader(case)
    # Read to prepare the devices, and again for attributes (a CEL view, a constraint) when another
    # slice was read in between; the second cycle reads nothing (devices, attributes, results kept).
    assert all(loads.count(name) <= 2 for name in loads)
    assert len(loads) == first_cycle_loads


def allocate_through_a_loader(case: Case) -> tuple[list[str], int]:
    """Two cycles over an index reading slices through a loader, each deciding as ``case`` expects;
    the slices read, and how many reads the first cycle made."""
    stored = {s["metadata"]["name"]: orjson.dumps(s) for s in case.slices}
    loads: list[str] = []

    def loader(name: str) -> Any:
        def load() -> Any:
            loads.append(name)
            return orjson.loads(stored[name])

        return load

    index = ResourceIndex([], case.classes, case.rules, case.features)
    for s in case.slices:
        index.set_slice(orjson.loads(stored[s["metadata"]["name"]]), load=loader(s["metadata"]["name"]))
    state = AllocatedState.from_claims(case.allocated, case.in_flight)
    outcomes: list[Allocated | Unschedulable | str] = []
    first_cycle_loads = 0
    for _cycle in range(2):
        counter = itertools.count()
        allocator = Allocator(index, state, case.features, case.namespaces, lambda c=counter: f"share-{next(c)}")  # type: ignore[misc]  # mypy types no lambda with a default argument (here: binding the loop variable)
        try:
            outcomes.append(allocator.allocate(case.node, case.claims, case.timestamp))
        except AllocationError as exc:
            outcomes.append(str(exc))
        first_cycle_loads = first_cycle_loads or len(loads)
    expect = case.expect if not isinstance(case.expect, list) else Allocated(case.expect)
    if isinstance(case.expect, str):
        assert all(isinstance(o, str) and case.expect in o for o in outcomes)
    else:
        assert outcomes == [expect, expect]
    return loads, first_cycle_loads


def test_search_cache_is_invalidated_by_allocations_classes_and_slices() -> None:
    index = ResourceIndex([rslice("slice-1", TWO)], [dclass()])
    state = AllocatedState()
    cache = SearchCache()

    def allocate(name: str) -> Any:
        return Allocator(index, state, cache=cache).allocate(node(), [claim(name)])

    first = allocate("a")
    assert first == Allocated([alloc(result("req-0", "device-1"))])
    assert allocate("b") == first  # nothing changed: the cached search
    assert cache.hits == 1
    state.add_allocation(first.allocations[0])  # device-1 is taken now
    assert allocate("c") == Allocated([alloc(result("req-0", "device-2"))])
    index.set_class(dclass(selectors=('device.attributes["driver-a"].missing == 1',)))
    with pytest.raises(AllocationError):
        allocate("d")  # the new class selector is evaluated, not the cached search reused
    index.set_class(dclass())
    index.set_slice(rslice("slice-1", [device("device-1"), device("device-3")]))
    assert allocate("e") == Allocated([alloc(result("req-0", "device-3"))])
    # Another claim spec is a different search.
    two = Allocator(index, state, cache=cache).allocate(node(), [claim("f", req(count=2))])
    assert isinstance(two, Unschedulable)


def test_reused_failure_names_the_claim_of_this_cycle() -> None:
    index = ResourceIndex([rslice("slice-1", TWO)], [dclass()])
    state = AllocatedState()
    cache = SearchCache()
    outcomes = [Allocator(index, state, cache=cache).allocate(node(), [claim(name, req(count=3))]) for name in ("first", "second")]
    assert cache.hits == 1
    assert all(isinstance(o, Unschedulable) and o.reason == "cannot allocate all claims" for o in outcomes)
    assert [o.message for o in outcomes if isinstance(o, Unschedulable)] == [
        f"cannot allocate all claims: claim default/{name}, request req-0: needs 3 devices, 2 of 2 matching devices available" for name in ("first", "second")
    ]


def test_case_count() -> None:
    assert len(CASES) >= 60


def test_runtime_error_is_upstreams_message() -> None:
    """Upstream's Filter status text: the claim (or class) and selector index, then cel-go's error."""
    expr = 'device.attributes["driver-a"].missing == 1'
    with pytest.raises(AllocationError) as info:
        allocate_claims([claim("claim-0", req(selectors=(expr,)))], node(), classes=[dclass()], slices=[one_device_slice()])
    assert str(info.value) == "claim default/claim-0: selector #0: CEL runtime error: no such key: missing"
    assert info.value.device == "driver-a/pool-1/device-1"
    with pytest.raises(AllocationError) as info:
        allocate_claims([claim("claim-0", req())], node(), classes=[dclass(selectors=(expr,))], slices=[one_device_slice()])
    assert str(info.value) == "class class-a: selector #1: CEL runtime error: no such key: missing"


def test_stored_selectors_over_the_estimated_cost_are_evaluated_under_the_runtime_limit() -> None:
    """Admission refuses these by their estimate; one stored anyway (an older server, a direct
    write) is evaluated as upstream's scheduler does, stopped only by the runtime cost limit."""
    ten = "[" + ",".join(str(i) for i in range(10)) + "]"
    cheap = "".join(f"{ten}.all(x{i}, " for i in range(7)) + "x0 > 100" + ")" * 7  # false at the first element
    costly = "".join(f"{ten}.all(x{i}, " for i in range(7)) + "x0 >= 0" + ")" * 7
    outcome = allocate_claims([claim("claim-0", req(selectors=(f"!({cheap})",)))], node(), classes=[dclass()], slices=[one_device_slice()])
    assert outcome == Allocated([alloc(result("req-0"))])
    with pytest.raises(AllocationError) as info:
        allocate_claims([claim("claim-0", req(selectors=(costly,)))], node(), classes=[dclass()], slices=[one_device_slice()])
    assert str(info.value) == "claim default/claim-0: selector #0: CEL runtime error: operation cancelled: actual cost limit exceeded"


def test_selector_results_cached_per_device() -> None:
    index = ResourceIndex([rslice("slice-1", TWO)], [dclass()])
    allocator = Allocator(index)
    first = allocator.allocate(node(), [claim()])
    assert isinstance(first, Allocated)
    devices = index.slice_devices("slice-1")
    assert devices[0].cached_result('device.driver == "driver-a"') is True
    # The same device object (same slice version) is reused by a new allocator: no re-evaluation.
    assert Allocator(index).allocate(node(), [claim()]) == first
    assert index.slice_devices("slice-1") is devices
    # A new slice generation gets fresh devices.
    updated = rslice("slice-1", TWO)
    updated["metadata"]["generation"] = 2
    index.set_slice(updated)
    assert index.slice_devices("slice-1") is not devices


def test_index_incremental_updates() -> None:
    index = ResourceIndex([one_device_slice()], [dclass()])
    assert isinstance(Allocator(index).allocate(node(), [claim()]), Allocated)
    index.remove_slice("slice-1")
    assert isinstance(Allocator(index).allocate(node(), [claim()]), Unschedulable)
    index.set_slice(one_device_slice("slice-2", pool="pool-2"))
    assert Allocator(index).allocate(node(), [claim()]) == Allocated([alloc(result("req-0", pool="pool-2"))])
    index.set_taint_rule({"metadata": {"name": "r"}, "spec": {"deviceSelector": {}, "taint": taint()}})
    assert isinstance(Allocator(index).allocate(node(), [claim()]), Unschedulable)
    index.remove_taint_rule("r")
    assert isinstance(Allocator(index).allocate(node(), [claim()]), Allocated)


def test_allocated_state_from_claims() -> None:
    state = AllocatedState.from_claims(
        [allocated_claim("a", result("req-0"), result("req-0", "device-2", adminAccess=True))],
        {"uid-b": allocated_claim("b", result("req-0", "s", shareID="x", consumedCapacity={"memory": "1Gi"}))},
    )
    assert state.devices == {(DRIVER_A, "pool-1", "device-1")}
    assert state.shared_ids == {(DRIVER_A, "pool-1", "s", "x")}
    assert state.capacity == {(DRIVER_A, "pool-1", "s"): {"memory": Quantity.parse("1Gi")}}


def test_features_from_gates() -> None:
    gates = FeatureGates({Gate.DRADeviceBindingConditions: False, Gate.DRAListTypeAttributes: True})
    features = AllocatorFeatures.from_gates(gates)
    assert not features.binding_conditions
    assert features.list_attributes
    assert features.consumable_capacity and features.partitionable_devices and features.device_taints


def test_features_default_to_the_gates_defaults_and_read_the_allocators_field_gates() -> None:
    assert AllocatorFeatures() == AllocatorFeatures.from_gates(FeatureGates())
    assert AllocatorFeatures.from_gates({}) == AllocatorFeatures()
    on = AllocatorFeatures.from_gates(FeatureGates({Gate.DRAListTypeAttributes: True, Gate.DRADeviceTaintRules: False}))
    # A field gate of an allocator row (kube.gatedfields) reads through enabled(); other gates read as off.
    assert on.enabled(Gate.DRAListTypeAttributes) and not AllocatorFeatures().enabled(Gate.DRAListTypeAttributes)
    assert not on.enabled(Gate.DRADerivedAttributes)
    # A feature that needs two gates is off with either off.
    assert on.device_taints and not on.device_taint_rules


def test_node_allocatable_demand() -> None:
    dev = device(
        "device-1", capacity={"memory": "4Gi"},
        nodeAllocatableResources={
            "memory": {"mapping": {"capacityKey": "memory", "capacityMultiplier": "0.5"}, "overhead": {"perPod": "100Mi", "perContainer": "10Mi"}},
            "cpu": {"mapping": {"deviceMultiplier": "2"}},
        },
    )
    slices = [rslice("slice-1", [dev, device("device-2", nodeAllocatableResources={"cpu": {"overhead": {"perPod": "250m"}}})])]
    allocation = alloc(result("req-0"), result("req-0", "device-2"))
    demand = node_allocatable_demand(allocation, slices, containers_referencing=2)
    assert demand == {"memory": Quantity.parse("2Gi") + Quantity.parse("120Mi"), "cpu": Quantity.parse("2250m")}
    # Shared devices use the consumed capacity; admin-access results are not charged.
    shared = alloc(result("req-0", consumedCapacity={"memory": "1Gi"}, shareID="s"), result("req-0", "device-2", adminAccess=True))
    index = ResourceIndex(slices)
    assert node_allocatable_demand(shared, index, 0) == {"memory": Quantity.parse("612Mi"), "cpu": Quantity.parse("2")}
    assert node_allocatable_demand(None, index, 1) == {}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_allocate_with_supply_checks_from_the_start(case: Case) -> None:
    """The supply checks only drop paths without a solution: the same devices, errors and failures."""
    counter = itertools.count()
    index = ResourceIndex(case.slices, case.classes, case.rules, case.features)
    state = AllocatedState.from_claims(case.allocated, case.in_flight)
    allocator = Allocator(index, state, case.features, case.namespaces, lambda: f"share-{next(counter)}", bound_after=0)
    if isinstance(case.expect, str):
        with pytest.raises(AllocationError) as info:
            allocator.allocate(case.node, case.claims, case.timestamp)
        assert case.expect in str(info.value)
        return
    outcome = allocator.allocate(case.node, case.claims, case.timestamp)
    if isinstance(case.expect, Unschedulable):
        assert outcome == case.expect
    else:
        assert outcome == Allocated(case.expect)


def test_a_what_if_state_leaves_the_original_as_it_was() -> None:
    """Preemption's dry run asks many what-ifs of one state: each sees its own changes only."""
    index = ResourceIndex([rslice("slice-1", TWO)], [dclass()])
    state = AllocatedState()
    first = Allocator(index, state).allocate(node(), [claim("a")])
    assert isinstance(first, Allocated)
    state.add_allocation(first.allocations[0])  # device-1 taken
    freed = state.changed(remove=[first.allocations[0]])
    assert Allocator(index, freed).allocate(node(), [claim("b", req(count=2))]) == Allocated([alloc(result("req-0", "device-1"), result("req-0", "device-2"))])
    retaken = freed.changed(add=[first.allocations[0]])
    assert isinstance(Allocator(index, retaken).allocate(node(), [claim("c", req(count=2))]), Unschedulable)
    # The original still has device-1 taken, and only it.
    assert Allocator(index, state).allocate(node(), [claim("d")]) == Allocated([alloc(result("req-0", "device-2"))])
    assert set(state.devices) == {("driver-a", "pool-1", "device-1")} and set(freed.devices) == set() and len(retaken.devices) == 1
