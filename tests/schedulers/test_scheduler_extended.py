"""Extended resources backed by devices on the whole stack (server, claim controller, scheduler),
checked through the API as a user sees them: the claim the scheduler makes for the pod, the pod's
status.extendedResourceClaimStatus, and the claim going away with the pod."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.processes import Worker, eventually
from tests.schedulers.test_scheduler import (
    RESOURCE,
    TIMEOUT,
    Topo,
    assert_no_double_allocation,
    condition,
    get_pod,
    node_of,
)
from tests.schedulers.test_scheduler_preemption import priority_class

ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def extended_class(client: httpx.Client, topo: Topo, resource: str) -> None:
    """Give the test's class an extendedResourceName."""
    path = f"{RESOURCE}/deviceclasses/{topo.klass}"
    body = client.get(path).json()
    body["spec"]["extendedResourceName"] = resource
    response = client.put(path, json=body)
    assert response.status_code == 200, response.text


def asking_pod(client: httpx.Client, topo: Topo, ns: str, name: str, amounts: dict[str, str], **spec: Any) -> None:
    body = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeSelector": {"test": topo.tag}, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": "pause", "resources": {"requests": amounts, "limits": amounts}}], **spec},
    }  # fmt: skip
    response = client.post(f"/api/v1/namespaces/{ns}/pods", json=body)
    assert response.status_code == 201, response.text


def claims_in(client: httpx.Client, ns: str) -> list[dict[str, Any]]:
    return client.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims").json()["items"]  # type: ignore[no-any-return]


def test_pod_asking_for_an_extended_resource_gets_devices_and_its_claim_goes_with_it(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    topo = Topo(client, nodes=1, devices=3)
    resource = f"{topo.tag}.example.com/gpu"
    extended_class(client, topo, resource)
    asking_pod(client, topo, ns, "trainer", {resource: "2"})
    eventually(lambda: node_of(client, ns, "trainer") == topo.nodes[0], timeout=TIMEOUT)
    pod = get_pod(client, ns, "trainer")
    status = pod["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"] == [{"containerName": "main", "resourceName": resource, "requestName": "container-0-request-0"}]
    [claim] = claims_in(client, ns)
    assert claim["metadata"]["name"] == status["resourceClaimName"]
    assert claim["metadata"]["name"].startswith("trainer-extended-resources-")
    assert claim["metadata"]["annotations"][ANNOTATION] == "true"
    owner = claim["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("Pod", "trainer", pod["metadata"]["uid"], True)
    assert claim["spec"]["devices"]["requests"] == [
        {"name": "container-0-request-0", "exactly": {"deviceClassName": topo.klass, "allocationMode": "ExactCount", "count": 2}}
    ]
    results = claim["status"]["allocation"]["devices"]["results"]
    assert sorted(r["device"] for r in results) == ["gpu-0", "gpu-1"]
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]

    # The implicit name of the class takes the last device; a fourth does not fit anywhere.
    asking_pod(client, topo, ns, "implicit", {f"deviceclass.resource.kubernetes.io/{topo.klass}": "1"})
    eventually(lambda: node_of(client, ns, "implicit") == topo.nodes[0], timeout=TIMEOUT)
    asking_pod(client, topo, ns, "greedy", {resource: "1"})

    def unschedulable() -> str:
        c = condition(client, ns, "greedy")
        return c["message"] if c is not None and c["status"] == "False" else ""

    eventually(unschedulable, timeout=TIMEOUT)
    assert "cannot allocate all claims" in unschedulable()
    assert_no_double_allocation(client)

    # Deleting the pod releases and deletes its claim (controller); the waiting pod gets the devices.
    assert client.delete(f"/api/v1/namespaces/{ns}/pods/trainer").status_code == 200
    eventually(lambda: status["resourceClaimName"] not in {c["metadata"]["name"] for c in claims_in(client, ns)}, timeout=TIMEOUT)
    eventually(lambda: node_of(client, ns, "greedy") == topo.nodes[0], timeout=TIMEOUT)
    assert_no_double_allocation(client)


def test_a_node_advertising_the_resource_serves_it_without_a_claim(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    topo = Topo(client, nodes=1, devices=0)
    resource = f"{topo.tag}.example.com/gpu"
    extended_class(client, topo, resource)
    node = client.get(f"/api/v1/nodes/{topo.nodes[0]}").json()
    node["status"]["allocatable"][resource] = "4"
    node["status"]["capacity"][resource] = "4"
    assert client.put(f"/api/v1/nodes/{topo.nodes[0]}/status", json=node).status_code == 200
    asking_pod(client, topo, ns, "plugin", {resource: "2"})
    eventually(lambda: node_of(client, ns, "plugin") == topo.nodes[0], timeout=TIMEOUT)
    assert "extendedResourceClaimStatus" not in get_pod(client, ns, "plugin")["status"]
    assert claims_in(client, ns) == []


def test_colliding_extended_resource_names_go_to_the_newest_class(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    older = Topo(client, nodes=1, devices=1)
    resource = f"{older.tag}.example.com/gpu"
    extended_class(client, older, resource)
    time.sleep(1.1)  # creationTimestamp counts seconds
    newer = Topo(client, nodes=1, devices=1)
    extended_class(client, newer, resource)  # created after `older`: it serves the resource
    body = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "either"},
        "spec": {"terminationGracePeriodSeconds": 0,
                 "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                     {"matchExpressions": [{"key": "test", "operator": "In", "values": [older.tag, newer.tag]}]}]}}},
                 "containers": [{"name": "main", "image": "pause", "resources": {"requests": {resource: "1"}, "limits": {resource: "1"}}}]},
    }  # fmt: skip
    assert client.post(f"/api/v1/namespaces/{ns}/pods", json=body).status_code == 201
    eventually(lambda: node_of(client, ns, "either") != "", timeout=TIMEOUT)
    [claim] = claims_in(client, ns)
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == newer.klass
    assert node_of(client, ns, "either") == newer.nodes[0]


def test_a_higher_priority_pod_preempts_the_holder_of_extended_resource_devices(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    topo = Topo(client, nodes=1, devices=1)
    resource = f"{topo.tag}.example.com/gpu"
    extended_class(client, topo, resource)
    asking_pod(client, topo, ns, "low", {resource: "1"}, priorityClassName=priority_class(client, 10))
    eventually(lambda: node_of(client, ns, "low") == topo.nodes[0], timeout=TIMEOUT)
    victim_claim = get_pod(client, ns, "low")["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    asking_pod(client, topo, ns, "high", {resource: "1"}, priorityClassName=priority_class(client, 20))
    # The victim goes (grace period 0), the controller deletes its claim, the preemptor gets the device.
    eventually(lambda: node_of(client, ns, "high") == topo.nodes[0], timeout=TIMEOUT)
    assert client.get(f"/api/v1/namespaces/{ns}/pods/low").status_code == 404
    eventually(lambda: victim_claim not in {c["metadata"]["name"] for c in claims_in(client, ns)}, timeout=TIMEOUT)
    assert_no_double_allocation(client)
