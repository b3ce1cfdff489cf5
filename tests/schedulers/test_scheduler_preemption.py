"""Priority and preemption on the whole stack (server, claim controller, scheduler), as a user
sees them through the API: PriorityClasses, the preemptor's nominatedNodeName and events, the
victims' DisruptionTarget condition and graceful deletion, and the freed devices going to the
preemptor. No kubelet runs here: the test finishes a victim's graceful deletion as one would."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.processes import Worker, eventually
from tests.schedulers.test_scheduler import (
    TIMEOUT,
    Topo,
    assert_no_double_allocation,
    condition,
    events,
    get_claim,
    get_pod,
    node_of,
)


def priority_class(client: httpx.Client, value: int) -> str:
    name = f"p{value}-{uuid.uuid4().hex[:6]}"
    body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
    response = client.post("/apis/scheduling.k8s.io/v1/priorityclasses", json=body)
    assert response.status_code == 201, response.text
    return name


def finish_deletion(client: httpx.Client, ns: str, name: str) -> None:
    """What the kubelet does once a gracefully deleted pod's containers stopped."""
    response = client.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", json={"gracePeriodSeconds": 0})
    assert response.status_code in (200, 404), response.text


def disruption(pod: dict[str, Any]) -> dict[str, Any] | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c["type"] == "DisruptionTarget":
            return c  # type: ignore[no-any-return]
    return None


def claim_ref(name: str) -> list[dict[str, str]]:
    return [{"name": "gpu", "resourceClaimName": name}]


def test_high_priority_pod_preempts_the_device_holder_and_gets_its_device(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    topo = Topo(client, nodes=1, devices=1)
    low, high = priority_class(client, 100), priority_class(client, 200)
    topo.claim(ns, "victim-gpu")
    topo.claim(ns, "preemptor-gpu")
    topo.pod(ns, "victim", claim_ref("victim-gpu"), priorityClassName=low)
    eventually(lambda: node_of(client, ns, "victim") == topo.nodes[0], timeout=TIMEOUT)
    assert get_pod(client, ns, "victim")["spec"]["priority"] == 100
    victim_uid = get_pod(client, ns, "victim")["metadata"]["uid"]

    topo.pod(ns, "preemptor", claim_ref("preemptor-gpu"), priorityClassName=high)
    preemptor_uid = get_pod(client, ns, "preemptor")["metadata"]["uid"]
    # The victim: DisruptionTarget, then a graceful delete (it lingers until its kubelet is done).
    eventually(lambda: get_pod(client, ns, "victim")["metadata"].get("deletionTimestamp"), timeout=TIMEOUT)
    victim = get_pod(client, ns, "victim")
    target = disruption(victim)
    assert target is not None and target["status"] == "True" and target["reason"] == "PreemptionByScheduler"
    assert target["message"] == "default-scheduler: preempting to accommodate a higher priority pod"
    eventually(lambda: events(client, ns, "Preempted", "victim"), timeout=TIMEOUT)
    assert events(client, ns, "Preempted", "victim")[0]["message"] == f"Preempted by pod {preemptor_uid} on node {topo.nodes[0]}"
    # The preemptor: nominated on the node, still pending with the filter's message.
    eventually(lambda: get_pod(client, ns, "preemptor")["status"].get("nominatedNodeName") == topo.nodes[0], timeout=TIMEOUT)
    assert node_of(client, ns, "preemptor") == ""
    scheduled = condition(client, ns, "preemptor")
    assert scheduled is not None and scheduled["status"] == "False" and scheduled["reason"] == "Unschedulable"
    assert get_claim(client, ns, "victim-gpu")["status"]["reservedFor"][0]["uid"] == victim_uid

    finish_deletion(client, ns, "victim")
    # The controller releases the victim's claim; the preemptor gets the device and binds.
    eventually(lambda: node_of(client, ns, "preemptor") == topo.nodes[0], timeout=TIMEOUT)
    assert "allocation" not in get_claim(client, ns, "victim-gpu").get("status", {})
    assert get_claim(client, ns, "preemptor-gpu")["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert_no_double_allocation(client)


def test_fewest_lowest_priority_victims(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    topo = Topo(client, nodes=1, devices=3)
    lowest, low, high = priority_class(client, 10), priority_class(client, 20), priority_class(client, 1000)
    for name, klass in (("keep-a", low), ("go", lowest), ("keep-b", low)):
        topo.claim(ns, f"{name}-gpu")
        topo.pod(ns, name, claim_ref(f"{name}-gpu"), priorityClassName=klass, terminationGracePeriodSeconds=0)
        eventually(lambda name=name: node_of(client, ns, name) == topo.nodes[0], timeout=TIMEOUT)  # type: ignore[misc]
    topo.claim(ns, "big-gpu")
    topo.pod(ns, "big", claim_ref("big-gpu"), priorityClassName=high)
    # terminationGracePeriodSeconds 0: the preemption's delete removes the victim at once.
    eventually(lambda: node_of(client, ns, "big") == topo.nodes[0], timeout=TIMEOUT)
    names = {p["metadata"]["name"] for p in client.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]}
    assert names == {"keep-a", "keep-b", "big"}
    assert_no_double_allocation(client)


def test_equal_priority_and_never_policy_do_not_preempt(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    topo = Topo(client, nodes=1, devices=1)
    same = priority_class(client, 500)
    topo.claim(ns, "first-gpu")
    topo.pod(ns, "first", claim_ref("first-gpu"), priorityClassName=same)
    eventually(lambda: node_of(client, ns, "first") == topo.nodes[0], timeout=TIMEOUT)
    topo.claim(ns, "peer-gpu")
    topo.pod(ns, "peer", claim_ref("peer-gpu"), priorityClassName=same)

    def unschedulable(name: str) -> str:
        c = condition(client, ns, name)
        return c["message"] if c is not None and c["reason"] == "Unschedulable" else ""

    eventually(lambda: unschedulable("peer"), timeout=TIMEOUT)
    assert "No preemption victims found for incoming pod" in unschedulable("peer")
    # A pod whose class says Never waits rather than preempting a lower priority.
    never = f"never-{uuid.uuid4().hex[:6]}"
    body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": never}, "value": 900, "preemptionPolicy": "Never"}
    assert client.post("/apis/scheduling.k8s.io/v1/priorityclasses", json=body).status_code == 201
    first = get_pod(client, ns, "first")
    assert first["spec"]["priority"] == 500
    topo.claim(ns, "polite-gpu")
    topo.pod(ns, "polite", claim_ref("polite-gpu"), priorityClassName=never)
    assert get_pod(client, ns, "polite")["spec"]["preemptionPolicy"] == "Never"
    eventually(lambda: unschedulable("polite"), timeout=TIMEOUT)
    assert unschedulable("polite").endswith("preemption: not eligible due to preemptionPolicy=Never.")
    assert not get_pod(client, ns, "first")["metadata"].get("deletionTimestamp")

