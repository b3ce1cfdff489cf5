"""Device taint eviction on the whole stack: a running pod is evicted by a DeviceTaintRule.

Server, controller, scheduler and a kubelet simulator, as ``make run`` starts them. Two pods
each get a simulated GPU and go Running; a NoExecute DeviceTaintRule for the first pod's
device evicts that pod (the simulator honours the graceful deletion), its generated claim
goes with it, the other pod keeps running, and the rule's status reports the eviction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from devtools.credentials import ClusterCredentials
from devtools.server import REPO_ROOT, ServerProcess
from tests.processes import Worker, eventually

RESOURCE = "/apis/resource.k8s.io/v1"
NS = "taints"


@pytest.fixture(scope="module")
def stack(start_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    logs = tmp_path_factory.mktemp("e2e-taints")
    # Node,RBAC and an identity per process: eviction is the controller's job, done as itself.
    credentials = ClusterCredentials.ensure(logs / "pki")
    credentials.ensure_node_tokens(["sim-0"])
    server = start_server("--bookmark-interval", "1", credentials=credentials)
    workers = [
        Worker("controllers", [*server.worker_flags("controller"), "--lease-duration", "2", "--device-taint-rule-status-period", "1"], logs / "controller.log"),
        Worker("schedulers", [*server.worker_flags("scheduler"), "--no-leader-elect"], logs / "scheduler.log"),
        Worker("kubeletsim", [*server.worker_flags("kubeletsim"), "--nodes", "1", "--profile", "gpu", "--node-prefix", "sim-"], logs / "sim.log"),
    ]
    for worker in workers:
        worker.start()
    try:
        with httpx.Client(**server.httpx_options(), timeout=30.0) as client:  # type: ignore[arg-type]
            eventually(lambda: client.get(f"{RESOURCE}/resourceslices").json()["items"], "simulator publishes slices")
            for doc in yaml.safe_load_all((Path(REPO_ROOT) / "examples" / "gpu-deviceclass.yaml").read_text()):
                assert client.post(f"{RESOURCE}/deviceclasses", json=doc).status_code == 201
            assert client.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).status_code == 201
            yield client
    finally:
        for worker in reversed(workers):
            worker.stop()


def gpu_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        },
    }


def test_running_pod_is_evicted_by_device_taint_rule(stack: httpx.Client) -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}},
    }
    assert stack.post(f"{RESOURCE}/namespaces/{NS}/resourceclaimtemplates", json=template).status_code == 201
    pods = f"/api/v1/namespaces/{NS}/pods"
    for name in ("victim", "survivor"):
        assert stack.post(pods, json=gpu_pod(name)).status_code == 201
    for name in ("victim", "survivor"):

        def running(name: str = name) -> bool:
            return bool(stack.get(f"{pods}/{name}").json().get("status", {}).get("phase") == "Running")

        eventually(running, f"{name} Running")

    victim = stack.get(f"{pods}/victim").json()
    [claim_status] = victim["status"]["resourceClaimStatuses"]
    claim_path = f"{RESOURCE}/namespaces/{NS}/resourceclaims/{claim_status['resourceClaimName']}"
    [device] = stack.get(claim_path).json()["status"]["allocation"]["devices"]["results"]

    rule = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "broken-gpu"},
        "spec": {
            "deviceSelector": {"driver": device["driver"], "pool": device["pool"], "device": device["device"]},
            "taint": {"key": "example.com/broken", "value": "fan", "effect": "NoExecute"},
        },
    }
    assert stack.post(f"{RESOURCE}/devicetaintrules", json=rule).status_code == 201

    eventually(lambda: stack.get(f"{pods}/victim").status_code == 404, "victim evicted and gone")
    eventually(lambda: stack.get(claim_path).status_code == 404, "its generated claim deleted")
    events = stack.get(f"/api/v1/namespaces/{NS}/events").json()["items"]
    evictions = [e for e in events if e.get("reason") == "DeviceTaintManagerEviction"]
    assert [(e["involvedObject"]["name"], e["involvedObject"]["uid"], e["message"]) for e in evictions] == [
        ("victim", victim["metadata"]["uid"], "Marking for deletion")
    ]

    def completed() -> dict[str, Any] | None:
        status = stack.get(f"{RESOURCE}/devicetaintrules/broken-gpu").json().get("status") or {}
        return next((c for c in status.get("conditions") or [] if c["type"] == "EvictionInProgress" and c["reason"] == "Completed"), None)

    done = eventually(completed, "rule status shows the eviction completed")
    assert done["status"] == "False" and done["message"] == "1 pod evicted since starting the controller." and done["observedGeneration"] == 1

    assert stack.get(f"{pods}/survivor").json()["status"]["phase"] == "Running"
    assert stack.delete(f"{RESOURCE}/devicetaintrules/broken-gpu").status_code == 200
