"""Binding conditions (DRADeviceBindingConditions) on the whole stack: the scheduler allocates,
stamps allocationTimestamp, waits before binding until the device's binding conditions are True
in the claim's status.devices, and on a failure condition or the binding timeout reports it on
the pod, releases the claim and tries again. The test plays the driver's attachment controller."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from devtools.server import ServerProcess
from tests.processes import Worker, eventually
from tests.schedulers.test_scheduler import (
    RESOURCE,
    TIMEOUT,
    Topo,
    assert_no_double_allocation,
    condition,
    events,
    get_claim,
    node_of,
    start_scheduler,
)

PREBIND = 'running PreBind plugin "DynamicResources"'


def attachable(client: httpx.Client, devices: int = 1) -> Topo:
    """One node whose devices are usable only once attached (binding conditions)."""
    topo = Topo(client, nodes=1, devices=0)
    node = topo.nodes[0]
    body = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-attach"},
        "spec": {"driver": topo.driver, "nodeName": node, "pool": {"name": f"{node}-attach", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{i}", "bindsToNode": True, "bindingConditions": ["Attached"], "bindingFailureConditions": ["AttachFailed"]}
                             for i in range(devices)]},
    }  # fmt: skip
    response = client.post(f"{RESOURCE}/resourceslices", json=body)
    assert response.status_code == 201, response.text
    return topo


def report(client: httpx.Client, ns: str, claim: str, **conditions: str) -> None:
    """Write the claim's device conditions as a driver would (type -> status)."""
    for _ in range(10):
        obj = get_claim(client, ns, claim)
        [result] = obj["status"]["allocation"]["devices"]["results"]
        entry = {
            "driver": result["driver"], "pool": result["pool"], "device": result["device"],
            "conditions": [{"type": t, "status": s, "reason": "Test", "message": f"{t} is {s}", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                           for t, s in conditions.items()],
        }  # fmt: skip
        obj["status"]["devices"] = [entry]
        response = client.put(f"{RESOURCE}/namespaces/{ns}/resourceclaims/{claim}/status", json=obj)
        if response.status_code == 200:
            return
        assert response.status_code == 409, response.text
    raise AssertionError("too many conflicts")


def allocated(client: httpx.Client, ns: str, claim: str) -> dict[str, Any] | None:
    return (get_claim(client, ns, claim).get("status") or {}).get("allocation")  # type: ignore[no-any-return]


def test_the_pod_binds_once_the_device_is_attached(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    topo = attachable(client)
    topo.claim(ns, "gpu")
    topo.pod(ns, "p", [{"name": "gpu", "resourceClaimName": "gpu"}])
    allocation = eventually(lambda: allocated(client, ns, "gpu"), timeout=TIMEOUT)
    assert allocation["allocationTimestamp"]
    [result] = allocation["devices"]["results"]
    assert result["bindingConditions"] == ["Attached"] and result["bindingFailureConditions"] == ["AttachFailed"]
    eventually(lambda: events(client, ns, "BindingConditionsPending", "p"), timeout=TIMEOUT)
    assert events(client, ns, "BindingConditionsPending", "p")[0]["message"] == f"waiting for binding conditions for device on node {topo.nodes[0]}"
    # Not attached yet (reported False, then flipping): the pod waits.
    report(client, ns, "gpu", Attached="False")
    time.sleep(1.0)
    assert node_of(client, ns, "p") == ""
    report(client, ns, "gpu", Attached="True")
    eventually(lambda: node_of(client, ns, "p") == topo.nodes[0], timeout=TIMEOUT)
    # Flipping back after the binding changes nothing: the pod stays bound, the claim allocated once.
    report(client, ns, "gpu", Attached="False")
    time.sleep(0.5)
    assert node_of(client, ns, "p") == topo.nodes[0]
    assert allocated(client, ns, "gpu") is not None
    assert_no_double_allocation(client)


def test_a_failure_condition_releases_the_claim_and_the_pod_is_tried_again(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    topo = attachable(client)
    topo.claim(ns, "gpu")
    topo.pod(ns, "p", [{"name": "gpu", "resourceClaimName": "gpu"}])
    eventually(lambda: allocated(client, ns, "gpu"), timeout=TIMEOUT)
    first = get_claim(client, ns, "gpu")["status"]["allocation"]["allocationTimestamp"]
    report(client, ns, "gpu", AttachFailed="True")

    def failed() -> str:
        c = condition(client, ns, "p")
        return c["message"] if c is not None and c["reason"] == "SchedulerError" else ""

    eventually(failed, timeout=TIMEOUT)
    assert failed() == f'{PREBIND}: claim gpu binding failed: reason=Test, message="AttachFailed is True"'
    message = failed()
    eventually(lambda: [e for e in events(client, ns, "FailedScheduling", "p") if e["message"] == message], timeout=TIMEOUT)
    # Released, then allocated afresh by the next attempt (a new timestamp), and bound once attached.
    eventually(lambda: ((a := allocated(client, ns, "gpu")) is not None and a["allocationTimestamp"] != first) or None, timeout=TIMEOUT)
    claim = get_claim(client, ns, "gpu")
    assert not claim["status"].get("devices")  # the old device status went with the allocation
    report(client, ns, "gpu", Attached="True")
    eventually(lambda: node_of(client, ns, "p") == topo.nodes[0], timeout=TIMEOUT)
    assert_no_double_allocation(client)


def test_binding_conditions_that_never_become_true_time_out(cluster: tuple[ServerProcess, Path], client: httpx.Client, ns: str) -> None:
    impatient = start_scheduler(cluster, "--no-leader-elect", "--binding-timeout", "1", name="impatient")
    try:
        topo = attachable(client)
        topo.claim(ns, "gpu")
        topo.pod(ns, "p", [{"name": "gpu", "resourceClaimName": "gpu"}], schedulerName="impatient")

        def failed() -> str:
            c = condition(client, ns, "p")
            return c["message"] if c is not None and c["reason"] == "SchedulerError" else ""

        eventually(failed, timeout=TIMEOUT)
        assert failed() == f"{PREBIND}: device binding timeout"
        assert node_of(client, ns, "p") == ""
        assert_no_double_allocation(client)
    finally:
        impatient.stop()
