"""Device and claim views from API objects: every state, capacity used/total, holders, taints, health."""

from __future__ import annotations

from typing import Any

from kubectl_dra import inventory, render

DRIVER = "gpu.example.com"


def rslice(name: str, devices: list[dict[str, Any]], *, node: str = "n1", pool: str = "n1", generation: int = 1, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"driver": DRIVER, "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1}, "devices": devices, **spec}
    if node:
        body["nodeName"] = node
    return {"metadata": {"name": name}, "spec": body}


def claim(name: str, *results: dict[str, Any], pods: tuple[str, ...] = (), namespace: str = "default") -> dict[str, Any]:
    status: dict[str, Any] = {"allocation": {"devices": {"results": list(results)}}} if results else {}
    if pods:
        status["reservedFor"] = [{"resource": "pods", "name": p, "uid": p} for p in pods]
    return {"metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": len(results) or 1}}]}}, "status": status}  # fmt: skip


def result(device: str, pool: str = "n1", **extra: Any) -> dict[str, Any]:
    return {"request": "gpu", "driver": DRIVER, "pool": pool, "device": device, **extra}


def test_each_state() -> None:
    slices = [
        rslice("s1", [
            {"name": "gpu-0", "attributes": {"model": {"string": "A"}, "uuid": {"string": "x" * 40}}, "capacity": {"memory": {"value": "80Gi"}}},
            {"name": "gpu-1", "capacity": {"memory": {"value": "80Gi"}}},
            {"name": "gpu-2", "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
            {"name": "gpu-3"},
            {"name": "gpu-4", "allowMultipleAllocations": True, "capacity": {"memory": {"value": "80Gi"}}},
            {"name": "gpu-5", "taints": [{"key": "info", "effect": "None"}]},
        ]),
        rslice("old", [{"name": "gone"}], pool="n1", generation=0),
    ]  # fmt: skip
    claims = [
        claim("a", result("gpu-1"), pods=("p1",)),
        claim("b", result("gpu-4", shareID="s1", consumedCapacity={"memory": "20Gi"}), pods=("p2",)),
        claim("c", result("gpu-4", shareID="s2", consumedCapacity={"memory": "40Gi"})),
        claim("admin", result("gpu-3", adminAccess=True)),
    ]
    pods = [{"metadata": {"name": "p1", "namespace": "default"}, "status": {"containerStatuses": [
        {"name": "c", "allocatedResourcesStatus": [{"name": "claim:gpu", "resources": [{"resourceID": f"{DRIVER}/n1/gpu-3", "health": "Unhealthy"}]}]}]}}]  # fmt: skip
    rules = [{"metadata": {"name": "r"}, "spec": {"deviceSelector": {"device": "gpu-0"}, "taint": {"key": "maintenance", "effect": "NoExecute"}}}]
    rows = {r.device: r for r in inventory.device_rows(slices, claims, pods, rules)}
    assert {d: r.state for d, r in rows.items()} == {
        "gpu-0": "tainted", "gpu-1": "allocated", "gpu-2": "tainted", "gpu-3": "unhealthy", "gpu-4": "shared", "gpu-5": "free",
    }  # fmt: skip
    assert rows["gpu-0"].taints == ["maintenance:NoExecute"]
    assert rows["gpu-1"].capacity == {"memory": "80Gi/80Gi"} and rows["gpu-1"].claims == ["default/a"] and rows["gpu-1"].pods == ["default/p1"]
    assert rows["gpu-4"].capacity == {"memory": "60Gi/80Gi"} and rows["gpu-4"].usage == 0.75 and rows["gpu-4"].claims == ["default/b", "default/c"]
    assert rows["gpu-3"].admin == ["default/admin"] and rows["gpu-3"].claims == [] and rows["gpu-3"].health == "Unhealthy"
    assert rows["gpu-0"].capacity == {"memory": "0/80Gi"}
    assert inventory.key_attributes(rows["gpu-0"].attributes) == "model=A"  # the long uuid is left out
    assert rows["gpu-5"].taints == ["info:None"]  # shown, but not a reason to avoid the device


def test_counters_used_by_other_partitions_block_a_device() -> None:
    counters = [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]
    whole = {"name": "whole", "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]}
    halves = [{"name": f"half-{i}", "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]} for i in range(2)]
    rows = {r.device: r.state for r in inventory.device_rows([rslice("s", [whole, *halves], sharedCounters=counters)], [claim("a", result("half-0"))])}
    assert rows == {"whole": "blocked", "half-0": "allocated", "half-1": "free"}


def test_health_by_cdi_id_and_devices_without_a_node() -> None:
    slices = [rslice("net", [{"name": "link-0"}], node="", pool="fabric", allNodes=True)]
    held = claim("a", result("link-0", pool="fabric"))
    held["status"]["devices"] = [{"driver": DRIVER, "pool": "fabric", "device": "link-0", "data": {"cdiDeviceIDs": ["example.com/link=0"]}}]
    pods = [{"metadata": {"name": "p", "namespace": "default"}, "status": {"containerStatuses": [
        {"name": "c", "allocatedResourcesStatus": [{"name": "claim:x", "resources": [{"resourceID": "example.com/link=0", "health": "Healthy"}]}]}]}}]  # fmt: skip
    (row,) = inventory.device_rows(slices, [held], pods)
    assert (row.node, row.nodes, row.health, row.state) == ("", "all nodes", "Healthy", "allocated")


def test_claim_rows_and_tables() -> None:
    pods = [{"metadata": {"name": "p1", "namespace": "default"}, "spec": {"nodeName": "n1"}}]
    rows = inventory.claim_rows([claim("b"), claim("a", result("gpu-1"), pods=("p1",))], pods)
    assert [(r.name, r.state, r.devices, r.reserved_for, r.node) for r in rows] == [
        ("a", "allocated,reserved", [f"{DRIVER}/n1/gpu-1"], ["default/p1"], "n1"),
        ("b", "pending", [], [], ""),
    ]
    text = render.claims_table(rows, all_namespaces=True).splitlines()
    assert text[0].split() == ["NAMESPACE", "NAME", "STATE", "DEVICES", "RESERVED-FOR", "NODE", "AGE"]
    assert text[1].split()[:6] == ["default", "a", "allocated,reserved", f"{DRIVER}/n1/gpu-1", "p1", "n1"]
    assert text[2].split()[:6] == ["default", "b", "pending", "<none>", "<none>", "<none>"]


def test_claims_table_tells_devices_of_two_drivers_apart() -> None:
    """Two drivers both name a device gpu-0: the table says whose (driver/pool/device)."""
    other = {"request": "gpu", "driver": "other.example.com", "pool": "n1", "device": "gpu-0"}
    rows = inventory.claim_rows([claim("a", result("gpu-0")), claim("b", other)])
    lines = render.claims_table(rows, all_namespaces=False).splitlines()
    assert [line.split()[:3] for line in lines] == [
        ["NAME", "STATE", "DEVICES"], ["a", "allocated", f"{DRIVER}/n1/gpu-0"], ["b", "allocated", "other.example.com/n1/gpu-0"],
    ]  # fmt: skip


def test_pending_pods_and_their_reasons() -> None:
    pods = [
        {"metadata": {"name": "b", "namespace": "x", "creationTimestamp": "2026-01-02T00:00:00Z"}, "spec": {},
         "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/2 nodes"}]}},
        {"metadata": {"name": "a", "namespace": "x", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"schedulingGates": [{"name": "g"}]}},
        {"metadata": {"name": "bound", "namespace": "x"}, "spec": {"nodeName": "n1"}},
        {"metadata": {"name": "done", "namespace": "x"}, "spec": {}, "status": {"phase": "Succeeded"}},
    ]  # fmt: skip
    pending = inventory.pending_pods(pods)
    assert [p["metadata"]["name"] for p in pending] == ["a", "b"]
    assert [inventory.scheduling_message(p) for p in pending] == [("SchedulingGated", "waiting for scheduling gates: g"), ("Unschedulable", "0/2 nodes")]
