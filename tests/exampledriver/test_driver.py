"""The example driver against a real API server and the simulator's kubelet side, over real sockets."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
import pytest

from devtools.server import ServerProcess
from exampledriver.driver import DEFAULT_DRIVER, NodeDriver
from exampledriver.kubeletplugin import PluginServer
from kube.client import KubeClient
from kubeletapi.layout import NodeDirs
from kubeletsim.plugins.checkpoint import Checkpoint
from kubeletsim.plugins.draplugin import PluginStore
from kubeletsim.plugins.health import HealthCache, HealthStreams
from kubeletsim.plugins.manager import DRAManager, PrepareError
from kubeletsim.plugins.registration import PluginWatcher
from tests.kubeletsim.fakeplugin import short_root
from tests.kubeletsim.test_plugin_registration import FAST, eventually

CLAIMS = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"


def create_allocated_claim(api: httpx.Client, ns: str, name: str, node: str, device: str, annotations: dict[str, str] | None = None) -> dict:
    claim = {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.pydriver.example.com"}}]}},
    }
    created = api.post(CLAIMS.format(ns=ns), json=claim)
    assert created.status_code == 201, created.text
    body = created.json()
    body["status"] = {"allocation": {"devices": {"results": [{"request": "gpu", "driver": DEFAULT_DRIVER, "pool": node, "device": device}]}}}
    updated = api.put(f"{CLAIMS.format(ns=ns)}/{name}/status", json=body)
    assert updated.status_code == 200, updated.text
    return updated.json()


def pod_using(ns: str, *claims: dict) -> dict:
    refs = [{"name": c["metadata"]["name"], "resourceClaimName": c["metadata"]["name"]} for c in claims]
    return {
        "metadata": {"name": "p", "namespace": ns, "uid": str(uuid.uuid4())},
        "spec": {"resourceClaims": refs, "containers": [{"name": "main", "resources": {"claims": [{"name": r["name"]} for r in refs]}}]},
    }


async def test_the_example_driver_publishes_prepares_reports_health_and_cleans_up(server: ServerProcess, api: httpx.Client, ns: str) -> None:
    node = f"ex-{uuid.uuid4().hex[:6]}"
    assert api.post("/api/v1/nodes", json={"metadata": {"name": node}}).status_code == 201
    dirs = NodeDirs(short_root(), node)
    dirs.create()
    health, changes = HealthCache(), []
    streams = HealthStreams(node, health, lambda driver, devices: changes.append(devices), retry_interval=0.1)
    store = PluginStore(node, on_change=streams.plugin_changed)
    manager = DRAManager(node, store, Checkpoint(dirs.checkpoint), health)
    watcher = asyncio.create_task(PluginWatcher(dirs, store, interval=0.02, timeouts=FAST).run())
    async with KubeClient(server.url, user_agent="test") as client:
        driver = NodeDriver(client, DEFAULT_DRIVER, node, dirs.base / "cdi", devices=4)
        plugin = PluginServer(DEFAULT_DRIVER, registry_dir=dirs.registry, plugin_dir=dirs.plugin_dir(DEFAULT_DRIVER), node=driver, health=driver)
        await plugin.start()
        try:
            await driver.publish()
            slices = api.get("/apis/resource.k8s.io/v1/resourceslices", params={"fieldSelector": f"spec.nodeName={node}"}).json()["items"]
            assert [(s["spec"]["driver"], [d["name"] for d in s["spec"]["devices"]]) for s in slices] == [
                (DEFAULT_DRIVER, ["gpu-0", "gpu-1", "gpu-2", "gpu-3"])
            ]
            await eventually(lambda: store.usable(DEFAULT_DRIVER))

            claim = create_allocated_claim(api, ns, "c1", node, "gpu-1")
            uid = claim["metadata"]["uid"]
            pod = pod_using(ns, claim)
            await manager.prepare_resources(pod, {"c1": claim})
            assert manager.cdi_devices(pod, pod["spec"]["containers"][0]) == [f"k8s.{DEFAULT_DRIVER}/gpu={uid}-gpu-1"]
            assert driver.prepared_claims() == [uid]
            status = api.get(f"{CLAIMS.format(ns=ns)}/c1").json()["status"]["devices"]
            assert [(d["driver"], d["pool"], d["device"], d["conditions"][0]["type"], d["data"]["cdiDeviceIDs"]) for d in status] == [
                (DEFAULT_DRIVER, node, "gpu-1", "Ready", [f"k8s.{DEFAULT_DRIVER}/gpu={uid}-gpu-1"])
            ]

            def device_health() -> str:
                entries = manager.allocated_resources_status(pod, [{"name": "main"}])[0].get("allocatedResourcesStatus") or []
                return entries[0]["resources"][0]["health"] if entries else ""

            await eventually(lambda: device_health() == "Healthy")
            claim = api.get(f"{CLAIMS.format(ns=ns)}/c1").json()
            claim["metadata"]["annotations"] = {f"{DEFAULT_DRIVER}/unhealthy": "true"}
            claim = api.put(f"{CLAIMS.format(ns=ns)}/c1", json=claim).json()
            await driver.claim_changed(claim)
            await eventually(lambda: device_health() == "Unhealthy")
            claim["metadata"]["annotations"] = {}
            claim = api.put(f"{CLAIMS.format(ns=ns)}/c1", json=claim).json()
            await driver.claim_changed(claim)
            await eventually(lambda: device_health() == "Healthy")

            failing = create_allocated_claim(api, ns, "c2", node, "gpu-2", {f"{DEFAULT_DRIVER}/fail-prepare": "injected by the test"})
            with pytest.raises(PrepareError, match=r"^prepare dynamic resources: NodePrepareResources failed for ResourceClaim c2: injected by the test$"):
                await manager.prepare_resources(pod_using(ns, failing), {"c2": failing})

            await manager.unprepare_resources(pod["metadata"]["uid"], ns, ["c1"])
            assert driver.prepared_claims() == []
            assert "devices" not in (api.get(f"{CLAIMS.format(ns=ns)}/c1").json().get("status") or {})
        finally:
            await plugin.stop()
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            await streams.close()
            await store.close()
    assert not Path(plugin.registration_socket).exists()
