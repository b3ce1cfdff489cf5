"""The dashboard's view model fed in memory (no server): patches carry only what changed, big
clusters stay bounded (10,000 pending pods), problems are said in words; and its web guard."""

from __future__ import annotations

import time
from typing import Any

import pytest
from starlette.testclient import TestClient

from kube.client import KubeClient
from kube.errors import ApiError
from kube.informer import Informer
from kubectl_dra.cli import CommandError
from kubectl_dra.dashboard.model import DashboardModel, diff
from kubectl_dra.dashboard.server import build_app, listen

DRIVER = "gpu.example.com"


def model(**kwargs: Any) -> DashboardModel:
    return DashboardModel(KubeClient("http://127.0.0.1:9", user_agent="test"), **kwargs)


async def put(informer: Informer, obj: dict[str, Any], version: int = 1) -> None:
    obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(version)}}
    await informer.apply({"type": "MODIFIED", "object": obj})


def node_slice(node: str, devices: int) -> dict[str, Any]:
    return {"metadata": {"name": f"{node}-gpu"}, "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                                                        "devices": [{"name": f"gpu-{i}"} for i in range(devices)]}}  # fmt: skip


def pending_pod(i: int) -> dict[str, Any]:
    reason = "waiting for gates" if i % 10 == 0 else "0/1000 nodes are available: 1000 cannot allocate all claims."
    return {"metadata": {"name": f"p{i:05}", "namespace": "load", "creationTimestamp": f"2026-01-01T00:{i // 600 % 60:02}:{i // 10 % 60:02}Z"}, "spec": {},
            "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": reason}]}}  # fmt: skip


async def test_patches_carry_what_changed() -> None:
    m = model()
    await put(m.slices, node_slice("n1", 2))
    m.rebuild()
    first = m.view
    assert first["devices"] == {f"{DRIVER}/n1/gpu-{i}": [f"{DRIVER}/n1/gpu-{i}", "n1", DRIVER, f"gpu-{i}", "free", 0.0] for i in range(2)}
    async with m.subscribe() as queue:
        snapshot = queue.get_nowait()
        assert snapshot["type"] == "snapshot" and snapshot["data"]["devices"] == first["devices"]
        claim = {"metadata": {"name": "c", "namespace": "default"}, "spec": {"devices": {"requests": []}},
                 "status": {"allocation": {"devices": {"results": [{"request": "r", "driver": DRIVER, "pool": "n1", "device": "gpu-1"}]}}}}  # fmt: skip
        await put(m.claims, claim, 2)
        m.rebuild()
        patch = queue.get_nowait()
    assert patch["type"] == "patch"
    assert patch["data"]["devices"] == {"upsert": [[f"{DRIVER}/n1/gpu-1", "n1", DRIVER, "gpu-1", "allocated", 1.0]], "remove": []}
    assert set(patch["data"]) == {"devices", "summary", "claims", "version"}
    assert diff(m.view, m.view) == {}
    await m.slices.apply({"type": "DELETED", "object": node_slice("n1", 2)})
    assert diff(first, m.build())["devices"]["remove"] == [f"{DRIVER}/n1/gpu-0", f"{DRIVER}/n1/gpu-1"]


async def test_ten_thousand_pending_pods_are_counted_not_listed() -> None:
    m = model()
    for i in range(1000):
        await put(m.slices, node_slice(f"n{i:04}", 10))
    for i in range(10_000):
        await put(m.pods, pending_pod(i))
    started = time.monotonic()
    view = m.build()
    elapsed = time.monotonic() - started
    assert view["pending"]["total"] == 10_000 and len(view["pending"]["items"]) == 200
    assert view["pending"]["items"][0]["name"] == "p00000"  # the oldest first
    assert view["pending"]["reasons"] == [
        {"count": 9000, "reason": "Unschedulable: 0/1000 nodes are available: 1000 cannot allocate all claims."},
        {"count": 1000, "reason": "Unschedulable: waiting for gates"},
    ]
    assert view["summary"]["devices"] == 10_000
    assert elapsed < 5.0, elapsed  # a few times a second at most: rebuilds are coalesced


async def test_problems_are_said_in_words() -> None:
    m = model()
    assert m.problems() == []
    m.pods.error = ApiError(403, "Forbidden", 'pods is forbidden: User "alice" cannot list resource "pods" in API group "" at the cluster scope')
    assert m.problems() == ['cannot list pods: pods is forbidden: User "alice" cannot list resource "pods" in API group "" at the cluster scope']
    m.server_error = "cannot reach the API server at http://127.0.0.1:9: connection refused"
    assert m.problems() == ["cannot reach the API server at http://127.0.0.1:9: connection refused (retrying)"]
    assert m.build()["status"]["problems"] == m.problems()


async def test_the_page_answers_loopback_names_and_only_reads() -> None:
    m = model()
    await put(m.slices, node_slice("n1", 1))
    m.rebuild()
    app = build_app(m)
    with TestClient(app, base_url="http://localhost:8001") as local:
        assert local.get("/").status_code == 200 and "DRA devices" in local.get("/").text
        assert local.get("/static/app.js").status_code == 200
        assert local.get("/static/../server.py").status_code == 404
        assert local.get("/api/device", params={"id": f"{DRIVER}/n1/gpu-0"}).json()["state"] == "free"
        assert local.get("/api/device", params={"id": "nope"}).status_code == 404
        assert local.post("/api/device").status_code == 405
        assert local.get("/api/explain/default/p").json()["message"] == "explanations need the scheduler"
    with TestClient(app, base_url="http://evil.example:8001") as rebound:
        refused = rebound.get("/")
        assert refused.status_code == 403 and refused.json()["message"] == "this dashboard answers requests for loopback host names only"


async def test_device_rows_are_made_again_only_when_what_they_show_changes() -> None:
    m = model()
    await put(m.slices, node_slice("n1", 2))
    claim = {"metadata": {"name": "c", "namespace": "default"}, "spec": {"devices": {"requests": []}},
             "status": {"allocation": {"devices": {"results": [{"request": "r", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]}},
                        "reservedFor": [{"resource": "pods", "name": "user", "uid": "u"}]}}  # fmt: skip
    await put(m.claims, claim)
    m.rebuild()
    rows = m.rows
    await put(m.pods, pending_pod(1))
    m.rebuild()
    assert m.rows is rows and m.view["pending"]["total"] == 1  # a pending pod: the same rows
    user = {"metadata": {"name": "user", "namespace": "default"}, "spec": {"nodeName": "n1"}, "status": {"containerStatuses": [
        {"name": "c", "allocatedResourcesStatus": [{"name": "claim:c", "resources": [{"resourceID": f"{DRIVER}/n1/gpu-0", "health": "Unhealthy"}]}]}]}}  # fmt: skip
    await put(m.pods, user)
    m.rebuild()
    assert m.rows is not rows and m.view["devices"][f"{DRIVER}/n1/gpu-0"][4] == "unhealthy"  # a kubelet's health report
    await put(m.pods, {**user, "status": {}}, 2)
    m.rebuild()
    assert m.view["devices"][f"{DRIVER}/n1/gpu-0"][4] == "allocated"  # the report gone


def test_a_port_in_use_is_refused_as_kubectl_proxy_refuses_it() -> None:
    taken = listen("127.0.0.1", 0)
    port = taken.getsockname()[1]
    taken.listen()
    try:
        with pytest.raises(CommandError) as refused:
            listen("127.0.0.1", port)
        assert str(refused.value) == f"listen tcp 127.0.0.1:{port}: bind: address already in use"
    finally:
        taken.close()


async def test_a_claim_changes_only_the_rows_of_its_pools_and_the_same_as_all_of_them() -> None:
    m = model()
    for node in ("n1", "n2"):
        await put(m.slices, node_slice(node, 2))
    m.rebuild()
    untouched = m.rows[f"{DRIVER}/n2/gpu-0"]
    claim = {"metadata": {"name": "c", "namespace": "default"}, "spec": {"devices": {"requests": []}},
             "status": {"allocation": {"devices": {"results": [{"request": "r", "driver": DRIVER, "pool": "n1", "device": "gpu-1"}]}},
                        "reservedFor": [{"resource": "pods", "name": "user", "uid": "u"}]}}  # fmt: skip
    await put(m.claims, claim)
    m.rebuild()
    assert m.rows[f"{DRIVER}/n2/gpu-0"] is untouched  # another pool's row is kept
    assert m.rows[f"{DRIVER}/n1/gpu-1"].pods == ["default/user"]
    m._devices_stale = True
    assert m.build()["devices"] == m.view["devices"]  # the same as making every row again
    await m.claims.apply({"type": "DELETED", "object": claim})
    m.rebuild()
    assert m.view["devices"][f"{DRIVER}/n1/gpu-1"][4] == "free"
    assert list(m.view["devices"]) == [f"{DRIVER}/{n}/gpu-{i}" for n in ("n1", "n2") for i in range(2)]  # still in map order
