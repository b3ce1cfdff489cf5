"""The kubelet simulator's ``gpu-attachable`` profile on the whole stack (server, controller,
scheduler, two simulators): devices with binding conditions that the simulated driver reports
attached after ``--binding-delay``, or failed with ``--binding-fail``."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from devtools.server import ServerProcess
from tests.processes import Worker, eventually

RESOURCE = "/apis/resource.k8s.io/v1"
DRIVER = "attachable-gpu.example.com"
PREBIND = 'running PreBind plugin "DynamicResources"'


@pytest.fixture(scope="module")
def stack(start_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    server = start_server("--bookmark-interval", "1")
    logs = tmp_path_factory.mktemp("binding")
    common = ["--server", server.url]
    workers = [
        Worker("controllers", [*common, "--lease-duration", "2"], logs / "controller.log"),
        Worker("schedulers", [*common, "--no-leader-elect"], logs / "scheduler.log"),
        Worker("kubeletsim", [*common, "--nodes", "1", "--profile", "gpu-attachable", "--node-prefix", "ok-", "--binding-delay", "0.5"], logs / "ok.log"),
        Worker("kubeletsim", [*common, "--nodes", "1", "--profile", "gpu-attachable", "--node-prefix", "bad-", "--binding-fail"], logs / "bad.log"),
    ]
    for worker in workers:
        worker.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30.0) as client:
            eventually(lambda: len(client.get(f"{RESOURCE}/resourceslices").json()["items"]) >= 2, "simulators publish slices")
            body = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
                    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}  # fmt: skip
            assert client.post(f"{RESOURCE}/deviceclasses", json=body).status_code == 201
            yield client
    finally:
        for worker in reversed(workers):
            worker.stop()


def pod_on(client: httpx.Client, ns: str, name: str, node: str) -> None:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}}  # fmt: skip
    assert client.post(f"{RESOURCE}/namespaces/{ns}/resourceclaims", json=claim).status_code == 201
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                    "containers": [{"name": "main", "image": "pause", "resources": {"claims": [{"name": "gpu"}]}}]}}  # fmt: skip
    response = client.post(f"/api/v1/namespaces/{ns}/pods", json=pod)
    assert response.status_code == 201, response.text


def namespace(client: httpx.Client) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    assert client.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}).status_code == 201
    return name


def get(client: httpx.Client, path: str) -> dict[str, Any]:
    return client.get(path).json()  # type: ignore[no-any-return]


def test_attached_after_the_delay_then_running(stack: httpx.Client) -> None:
    ns = namespace(stack)
    pod_on(stack, ns, "trainer", "ok-0")
    eventually(lambda: get(stack, f"/api/v1/namespaces/{ns}/pods/trainer").get("status", {}).get("phase") == "Running", "pod Running")
    claim = get(stack, f"{RESOURCE}/namespaces/{ns}/resourceclaims/trainer")
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert result["bindingConditions"] == ["Attached"] and claim["status"]["allocation"]["allocationTimestamp"]
    reasons = [e["reason"] for e in get(stack, f"/api/v1/namespaces/{ns}/events")["items"] if e["involvedObject"]["name"] == "trainer"]
    assert "BindingConditionsPending" in reasons and "Scheduled" in reasons


def test_a_failing_attachment_keeps_the_pod_pending_and_nothing_leaks(stack: httpx.Client) -> None:
    ns = namespace(stack)
    pod_on(stack, ns, "unlucky", "bad-0")

    def failed() -> str:
        for c in get(stack, f"/api/v1/namespaces/{ns}/pods/unlucky").get("status", {}).get("conditions") or []:
            if c["type"] == "PodScheduled" and c.get("reason") == "SchedulerError":
                return str(c["message"])
        return ""

    message = eventually(failed, "binding failure reported")
    assert message == f'{PREBIND}: claim unlucky binding failed: reason=AttachFailed, message="the simulated driver could not attach the device"'
    assert not get(stack, f"/api/v1/namespaces/{ns}/pods/unlucky")["spec"].get("nodeName")
    # Deleting the pod leaves no allocation behind.
    assert stack.delete(f"/api/v1/namespaces/{ns}/pods/unlucky").status_code == 200
    eventually(lambda: not get(stack, f"{RESOURCE}/namespaces/{ns}/resourceclaims/unlucky").get("status", {}).get("allocation"), "claim released")
