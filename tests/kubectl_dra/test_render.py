"""``kubectl dra why`` as a user reads it, from the explanation document (and the kubelet's events)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kubectl_dra import inventory, render


def ago(minutes: int) -> str:
    return (datetime.now(UTC) - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def stuck_pod() -> dict[str, Any]:
    return {"metadata": {"name": "stuck", "namespace": "default", "uid": "u1"}, "spec": {"nodeName": "sim-0"},
            "status": {"phase": "Pending", "containerStatuses": [{"name": "c", "state": {"waiting": {"reason": "ContainerCreating"}}}]}}  # fmt: skip


def kubelet_event(message: str, last: str, count: int = 1, uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"name": f"stuck.{last}"}, "involvedObject": {"kind": "Pod", "name": "stuck", "uid": uid}, "type": "Warning",
            "reason": "FailedPrepareDynamicResources", "message": message, "count": count, "lastTimestamp": last}  # fmt: skip


def test_a_bound_pod_whose_devices_the_kubelet_cannot_prepare() -> None:
    pod = stuck_pod()
    assert inventory.waits_on_its_node(pod)
    events = [
        kubelet_event("Failed to prepare dynamic resources: old", ago(40)),
        kubelet_event("Failed to prepare dynamic resources: NodePrepareResources failed for ResourceClaim c: no GPU", ago(30), count=3),
        kubelet_event("of an earlier pod of that name", ago(1), uid="u0"),
    ]
    failures = inventory.preparation_failures(pod, events)
    doc = {"pod": "default/stuck", "state": "Bound", "message": "the pod is bound to node sim-0", "node": "sim-0", "kubeletEvents": failures}
    assert render.explanation(doc).splitlines() == [
        "Pod default/stuck: Bound",
        "  the pod is bound to node sim-0",
        "  The kubelet on sim-0 cannot start it: FailedPrepareDynamicResources (4 times, last 30m ago):",
        "    Failed to prepare dynamic resources: NodePrepareResources failed for ResourceClaim c: no GPU",
    ]


def test_a_running_pod_is_not_stuck() -> None:
    pod = stuck_pod()
    pod["status"]["phase"] = "Running"
    assert not inventory.waits_on_its_node(pod)
    assert not inventory.waits_on_its_node({"metadata": {}, "spec": {}, "status": {"phase": "Pending"}})


def explained(elapsed: float) -> str:
    doc = {"pod": "default/p", "state": "Unschedulable", "message": "0/2 nodes fit.", "nodes": {"total": 2, "examined": 2, "fit": 0},
           "groups": [], "elapsedSeconds": elapsed}  # fmt: skip
    return render.explanation(doc).splitlines()[3]


def test_the_time_taken_is_shown_in_milliseconds() -> None:
    assert explained(0.004) == "Nodes: 0 of 2 fit, 2 examined in 4ms"
    assert explained(0.0) == "Nodes: 0 of 2 fit, 2 examined in under 1ms"
    assert explained(1.5) == "Nodes: 0 of 2 fit, 2 examined in 1.5s"

