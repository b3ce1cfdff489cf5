"""Pod anti-affinity and topology spread on the whole stack: server, controller, scheduler, kubelet simulator.

Upstream's DRA e2e suite deploys its test driver as a ReplicaSet whose pods have required pod
anti-affinity on ``kubernetes.io/hostname`` (test/e2e/testing-manifests/dra/dra-test-driver-proxy.yaml),
one per node; the suite waits until every replica runs. Here two such pods (the same affinity,
with a claim each so the claim path is exercised too) go Running on two different nodes, a third
stays Pending with upstream's message, and pods with a zone spread constraint share out evenly.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from devtools.server import ServerProcess
from tests.e2e.test_examples import RESOURCE, apply
from tests.processes import Worker, eventually

LABEL = "app.kubernetes.io/instance"
ANTI_AFFINITY = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {LABEL: "test-driver.dra.k8s.io"}}, "topologyKey": "kubernetes.io/hostname"}]}}  # fmt: skip


@pytest.fixture(scope="module")
def stack(start_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A server with the controller, the scheduler and one simulator of two GPU nodes."""
    server = start_server("--bookmark-interval", "1")
    logs = tmp_path_factory.mktemp("affinity")
    url = server.url
    workers = [
        Worker("controllers", ["--server", url, "--lease-duration", "2"], logs / "controller.log"),
        Worker("schedulers", ["--server", url, "--no-leader-elect"], logs / "scheduler.log"),
        Worker("kubeletsim", ["--server", url, "--nodes", "2", "--profile", "gpu", "--node-prefix", "aff-"], logs / "sim.log"),
    ]
    for worker in workers:
        worker.start()
    try:
        with httpx.Client(base_url=url, timeout=30.0) as http:
            eventually(lambda: len(http.get(f"{RESOURCE}/resourceslices").json()["items"]) >= 2, "simulator publishes slices")
            apply(http, "gpu-deviceclass.yaml")
            yield http
    finally:
        for worker in reversed(workers):
            worker.stop()
        print(f"affinity stack logs in {logs}")


@pytest.fixture
def ns(stack: httpx.Client) -> str:
    name = f"aff-{uuid.uuid4().hex[:6]}"
    assert stack.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}).status_code == 201
    return name


def create_pod(http: httpx.Client, ns: str, name: str, labels: dict[str, str], **spec: Any) -> None:
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": f"{name}-gpu"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}}  # fmt: skip
    assert http.post(f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates", json=template).status_code == 201
    body = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "pause", "resources": {"claims": [{"name": "gpu"}]}}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": f"{name}-gpu"}], **spec},
    }  # fmt: skip
    response = http.post(f"/api/v1/namespaces/{ns}/pods", json=body)
    assert response.status_code == 201, response.text


def pod(http: httpx.Client, ns: str, name: str) -> dict[str, Any]:
    response = http.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def running_on(http: httpx.Client, ns: str, name: str) -> str:
    body = pod(http, ns, name)
    return str(body["spec"].get("nodeName") or "") if (body.get("status") or {}).get("phase") == "Running" else ""


def runs_somewhere(http: httpx.Client, ns: str, name: str) -> str:
    return eventually(lambda: running_on(http, ns, name), what=f"{name} running", timeout=60)  # type: ignore[no-any-return]


def scheduled_condition(http: httpx.Client, ns: str, name: str) -> dict[str, Any] | None:
    return next((c for c in pod(http, ns, name).get("status", {}).get("conditions") or [] if c["type"] == "PodScheduled"), None)


def test_pods_with_required_anti_affinity_run_on_different_nodes(stack: httpx.Client, ns: str) -> None:
    labels = {LABEL: "test-driver.dra.k8s.io"}
    for name in ("driver-0", "driver-1"):
        create_pod(stack, ns, name, labels, affinity=ANTI_AFFINITY)
    nodes = [runs_somewhere(stack, ns, name) for name in ("driver-0", "driver-1")]
    assert sorted(nodes) == ["aff-0", "aff-1"]
    # A third replica has no node left: upstream's words, and it stays Pending.
    create_pod(stack, ns, "driver-2", labels, affinity=ANTI_AFFINITY)
    condition = eventually(lambda: scheduled_condition(stack, ns, "driver-2"), what="driver-2 unschedulable", timeout=60)
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert condition["message"] == (
        "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    # One replica going away makes room: the deletion brings the waiting pod back.
    assert stack.delete(f"/api/v1/namespaces/{ns}/pods/driver-0", params={"gracePeriodSeconds": "0"}).status_code == 200
    assert eventually(lambda: running_on(stack, ns, "driver-2"), what="driver-2 running", timeout=60) == nodes[0]
    for name in ("driver-1", "driver-2"):
        stack.delete(f"/api/v1/namespaces/{ns}/pods/{name}", params={"gracePeriodSeconds": "0"})


def test_a_hostname_spread_constraint_shares_pods_out(stack: httpx.Client, ns: str) -> None:
    constraint = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchLabels": {"app": "spread"}}}  # fmt: skip
    names = [f"spread-{i}" for i in range(4)]
    for name in names:
        create_pod(stack, ns, name, {"app": "spread"}, topologySpreadConstraints=[constraint])
        time.sleep(0.2)  # one after another, as a controller would create them
    nodes = [runs_somewhere(stack, ns, name) for name in names]
    assert sorted(nodes) == ["aff-0", "aff-0", "aff-1", "aff-1"]
    for name in names:
        stack.delete(f"/api/v1/namespaces/{ns}/pods/{name}", params={"gracePeriodSeconds": "0"})
