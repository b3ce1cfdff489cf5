"""The manifests in ``examples/`` against the whole stack: server, controller, scheduler, kubelet simulators.

One stack per backend (module scope): a server, the controller, the scheduler, and two kubelet
simulators with two nodes each, ``gpu,nic`` (``sim-*``) and ``gpu-partitionable`` (``part-*``;
both profiles publish driver gpu.example.com, so one process cannot combine them). Every example
is applied document by document through the API, its pods must go Running, the claims'
allocations are checked, and the pods are deleted afterwards so their devices free up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from devtools.credentials import ClusterCredentials
from devtools.server import REPO_ROOT, ServerProcess
from tests.processes import Worker, eventually

EXAMPLES = Path(REPO_ROOT) / "examples"
RESOURCE = "/apis/resource.k8s.io/v1"

CLASSES = ["gpu-deviceclass.yaml", "nic-deviceclass.yaml", "partitionable/gpu-partition-deviceclass.yaml"]

PLURALS = {
    "Namespace": "namespaces",
    "Pod": "pods",
    "DeviceClass": "deviceclasses",
    "ResourceClaim": "resourceclaims",
    "ResourceClaimTemplate": "resourceclaimtemplates",
    "Workload": "workloads",
    "PodGroup": "podgroups",
}
CLUSTER_SCOPED = {"Namespace", "DeviceClass"}


def path_for(doc: dict[str, Any]) -> str:
    api_version, kind = doc["apiVersion"], doc["kind"]
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if kind in CLUSTER_SCOPED:
        return f"{prefix}/{PLURALS[kind]}"
    return f"{prefix}/namespaces/{doc['metadata'].get('namespace', 'default')}/{PLURALS[kind]}"


def load(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def apply(client: httpx.Client, name: str) -> list[dict[str, Any]]:
    docs = load(name)
    for doc in docs:
        response = client.post(path_for(doc), json=doc)
        assert response.status_code in (201, 409), f"{name}: {doc['kind']} {doc['metadata']['name']}: {response.text}"
    return docs


@pytest.fixture(scope="module")
def stack(start_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    started = time.monotonic()
    logs = tmp_path_factory.mktemp("e2e")
    # The stack as make run starts it: HTTPS, Node,RBAC, every process as its own identity.
    credentials = ClusterCredentials.ensure(logs / "pki")
    credentials.ensure_node_tokens(["sim-0", "sim-1", "part-0", "part-1"])
    server = start_server("--bookmark-interval", "1", credentials=credentials)
    sim = server.worker_flags("kubeletsim")
    workers = [
        Worker("controllers", [*server.worker_flags("controller"), "--lease-duration", "2"], logs / "controller.log"),
        Worker("schedulers", [*server.worker_flags("scheduler"), "--no-leader-elect"], logs / "scheduler.log"),
        Worker("kubeletsim", [*sim, "--nodes", "2", "--profile", "gpu,nic", "--node-prefix", "sim-"], logs / "sim.log"),
        Worker("kubeletsim", [*sim, "--nodes", "2", "--profile", "gpu-partitionable", "--node-prefix", "part-"], logs / "part.log"),
    ]
    for worker in workers:
        worker.start()
    try:
        with httpx.Client(**server.httpx_options(), timeout=30.0) as client:  # type: ignore[arg-type]
            eventually(lambda: len(client.get(f"{RESOURCE}/resourceslices").json()["items"]) >= 4, "simulators publish slices")
            for name in CLASSES:
                apply(client, name)
            yield client
    finally:
        for worker in reversed(workers):
            worker.stop()
        print(f"e2e stack lifetime: {time.monotonic() - started:.1f}s (logs in {logs})")


def run_example(client: httpx.Client, name: str) -> dict[str, dict[str, Any]]:
    """Apply an example, wait for its pods to run, return its claims (by name) as they are then."""
    docs = apply(client, name)
    pods = [d for d in docs if d["kind"] == "Pod"]
    for pod in pods:
        path = f"{path_for(pod)}/{pod['metadata']['name']}"

        def running(path: str = path) -> bool:
            return client.get(path).json().get("status", {}).get("phase") == "Running"

        eventually(running, f"{name}: pod {pod['metadata']['name']} Running")
    claims = {}
    for doc in docs:
        if doc["kind"] == "ResourceClaim":
            claims[doc["metadata"]["name"]] = client.get(f"{path_for(doc)}/{doc['metadata']['name']}").json()
    return claims


def delete_pods(client: httpx.Client, name: str) -> None:
    docs = load(name)
    pods = [d for d in docs if d["kind"] == "Pod"]
    for pod in pods:
        client.delete(f"{path_for(pod)}/{pod['metadata']['name']}")
    for pod in pods:
        path = f"{path_for(pod)}/{pod['metadata']['name']}"
        eventually(lambda path=path: client.get(path).status_code == 404, f"{name}: pod {pod['metadata']['name']} gone")
    for doc in docs:
        if doc["kind"] == "ResourceClaim":
            client.delete(f"{path_for(doc)}/{doc['metadata']['name']}")


def results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    allocation = claim.get("status", {}).get("allocation")
    assert allocation, f"claim {claim['metadata']['name']} not allocated: {claim.get('status')}"
    return list(allocation["devices"]["results"])


def slice_attributes(client: httpx.Client, result: dict[str, Any]) -> dict[str, Any]:
    for item in client.get(f"{RESOURCE}/resourceslices").json()["items"]:
        spec = item["spec"]
        if spec.get("driver") == result["driver"] and spec["pool"]["name"] == result["pool"]:
            for device in spec.get("devices") or []:
                if device["name"] == result["device"]:
                    return dict(device.get("attributes") or {})
    raise AssertionError(f"device {result} not in any slice")


def test_pod_with_claim_template(stack: httpx.Client) -> None:
    run_example(stack, "pod-with-claim-template.yaml")
    claims = [
        c
        for c in stack.get(f"{RESOURCE}/namespaces/default/resourceclaims").json()["items"]
        if any(r.get("name") == "gpu-pod" for r in c.get("status", {}).get("reservedFor", []))
    ]
    assert len(claims) == 1
    [result] = results(claims[0])
    assert result["driver"] == "gpu.example.com" and result["request"] == "gpu"
    delete_pods(stack, "pod-with-claim-template.yaml")


def test_shared_claim(stack: httpx.Client) -> None:
    claims = run_example(stack, "shared-claim.yaml")
    claim = claims["shared-gpu"]
    reserved = sorted(r["name"] for r in claim["status"]["reservedFor"])
    assert reserved == ["shared-gpu-pod-1", "shared-gpu-pod-2"]
    [result] = results(claim)
    assert result["driver"] == "gpu.example.com" and result["request"] == "gpu"
    nodes = {stack.get(f"/api/v1/namespaces/default/pods/{p}").json()["spec"]["nodeName"] for p in reserved}
    assert len(nodes) == 1
    delete_pods(stack, "shared-claim.yaml")


def test_prioritized_list(stack: httpx.Client) -> None:
    claims = run_example(stack, "prioritized-list.yaml")
    [result] = results(claims["prioritized"])
    assert result["request"] == "device/nic"
    assert result["driver"] == "nic.example.com"
    delete_pods(stack, "prioritized-list.yaml")


def test_match_attribute(stack: httpx.Client) -> None:
    claims = run_example(stack, "match-attribute.yaml")
    by_request = {r["request"]: r for r in results(claims["gpu-with-nics"])}
    assert set(by_request) == {"gpu", "nic-a", "nic-b"}
    assert by_request["gpu"]["driver"] == "gpu.example.com"
    assert by_request["nic-a"]["device"] != by_request["nic-b"]["device"]
    numa = [slice_attributes(stack, by_request[r])["dra.net/numaNode"] for r in ("nic-a", "nic-b")]
    assert numa[0] == numa[1]
    delete_pods(stack, "match-attribute.yaml")


def test_admin_access(stack: httpx.Client) -> None:
    claims = run_example(stack, "admin-access.yaml")
    [result] = results(claims["gpu-monitor"])
    assert result["driver"] == "gpu.example.com"
    assert result.get("adminAccess") is True
    delete_pods(stack, "admin-access.yaml")


def test_partitionable_gpu(stack: httpx.Client) -> None:
    claims = run_example(stack, "partitionable/partitionable-gpu.yaml")
    found = results(claims["gpu-slices"])
    assert len(found) == 2
    assert all(r["request"] == "slice" and r["pool"].startswith("part-") for r in found)
    profiles = {slice_attributes(stack, r)["profile"]["string"] for r in found}
    assert profiles == {"1g.10gb"}
    assert found[0]["device"] != found[1]["device"]
    delete_pods(stack, "partitionable/partitionable-gpu.yaml")


def test_extended_resource(stack: httpx.Client) -> None:
    run_example(stack, "extended-resource.yaml")
    pod = stack.get("/api/v1/namespaces/default/pods/extended-gpu-pod").json()
    status = pod["status"]["extendedResourceClaimStatus"]
    resource = "deviceclass.resource.kubernetes.io/gpu.example.com"
    assert status["requestMappings"] == [{"containerName": "main", "resourceName": resource, "requestName": "container-0-request-0"}]
    path = f"{RESOURCE}/namespaces/default/resourceclaims/{status['resourceClaimName']}"
    claim = stack.get(path).json()
    [result] = results(claim)
    assert result["driver"] == "gpu.example.com" and result["request"] == "container-0-request-0"
    # The simulated kubelet prepared the device for the pod.
    eventually(lambda: any(d.get("device") == result["device"] for d in stack.get(path).json().get("status", {}).get("devices") or []),
               "the kubelet simulator reports the prepared device")  # fmt: skip
    delete_pods(stack, "extended-resource.yaml")
    eventually(lambda: stack.get(path).status_code == 404, "the pod's claim is deleted with it")
