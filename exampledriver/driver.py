"""The example DRA driver's behaviour on one node: devices, preparation, claim status and health.

Each node gets ``devices`` GPU-like devices ``gpu-0`` .. in one pool named after the node,
published as one ResourceSlice. Preparing a claim writes a CDI spec file for its devices on
this node (``<root>/<node>/cdi/<driver>-<claim uid>.json``, the driver's record of what is
prepared), returns the CDI device IDs ``k8s.<driver>/gpu=<claim uid>-<device>`` and marks the
devices Ready in the claim's ``status.devices``; unpreparing undoes all three and is idempotent.

Error paths on request: ``--fail-prepare`` (every claim) or the claim annotation
``<driver>/fail-prepare: <message>`` makes preparation fail with that message; the claim
annotation ``<driver>/unhealthy: "true"`` (or ``--unhealthy NODE/DEVICE``) reports the claim's
devices unhealthy on the health stream until it is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Collection
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from kube.client import KubeClient, resource_path
from kube.dra.claims import claim_path, update_device_status
from kube.errors import ApiError
from kube.objects import Obj
from kube.tasks import wait_for
from kube.timeutil import now_rfc3339
from kubeletapi.dra.v1 import api_pb2 as dra_v1
from kubeletapi.dra.v1 import api_pb2_grpc as dra_v1_grpc
from kubeletapi.dra_health.v1 import api_pb2 as health_v1
from kubeletapi.dra_health.v1 import api_pb2_grpc as health_v1_grpc

log = logging.getLogger("exampledriver")

DEFAULT_DRIVER = "pydriver.example.com"
SLICES = resource_path("resource.k8s.io", "v1", "resourceslices")
READY_REASON = "DevicePrepared"
# How often the full device list is re-sent on a health stream (well inside the kubelet's 30 s timeout).
HEALTH_RESEND_INTERVAL = 10.0


class NodeDriver(dra_v1_grpc.DRAPluginServicer, health_v1_grpc.DRAResourceHealthServicer):  # type: ignore[misc]
    """The driver on one node: NodePrepareResources / NodeUnprepareResources and NodeWatchResources."""

    def __init__(
        self,
        client: KubeClient,
        driver: str,
        node: str,
        cdi_dir: Path,
        *,
        devices: int = 8,
        fail_prepare: str = "",
        unhealthy: Collection[str] = (),  # device names
    ) -> None:
        self.client = client
        self.driver = driver
        self.node = node
        self.cdi_dir = cdi_dir
        self.device_names = [f"gpu-{i}" for i in range(devices)]
        self.fail_prepare = fail_prepare
        self.unhealthy_flag = set(unhealthy)
        # claim uid -> its devices here, for claims annotated unhealthy.
        self._unhealthy_claims: dict[str, list[str]] = {}
        self._health_changed = asyncio.Condition()
        self._lock = asyncio.Lock()  # like upstream's helper: one prepare/unprepare at a time

    # ---- what the node offers -------------------------------------------------------------------

    def annotation(self, name: str) -> str:
        return f"{self.driver}/{name}"

    def device_uuid(self, device: str) -> str:
        return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{self.driver}/{self.node}/{device}')}"

    def slice_object(self, node_uid: str) -> Obj:
        """The node's ResourceSlice: one pool, named after the node, with every device."""
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {
                "name": f"{self.node}-{self.driver}",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": node_uid, "controller": True}],
            },
            "spec": {
                "driver": self.driver,
                "nodeName": self.node,
                "pool": {"name": self.node, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": name,
                        "attributes": {
                            "index": {"int": i},
                            "uuid": {"string": self.device_uuid(name)},
                            "model": {"string": "PY-EXAMPLE-GPU"},
                            "driverVersion": {"version": "1.0.0"},
                        },
                        "capacity": {"memory": {"value": "16Gi"}},
                    }
                    for i, name in enumerate(self.device_names)
                ],
            },
        }

    async def publish(self) -> None:
        """Create or repair the node's ResourceSlice (once the Node exists)."""
        node = await self.client.get(resource_path("", "v1", "nodes", name=self.node))
        want = self.slice_object(node["metadata"]["uid"])
        path = resource_path("resource.k8s.io", "v1", "resourceslices", name=want["metadata"]["name"])
        try:
            have = await self.client.get(path)
        except ApiError as exc:
            if exc.code != 404:
                raise
            await self.client.create(SLICES, want)
            log.info("published ResourceSlice", extra={"node": self.node, "driver": self.driver, "devices": len(self.device_names)})
            return
        if have.get("spec", {}).get("devices") == want["spec"]["devices"] and have["metadata"].get("ownerReferences") == want["metadata"]["ownerReferences"]:
            return
        updated = copy.deepcopy(want)
        updated["metadata"]["resourceVersion"] = have["metadata"].get("resourceVersion")
        updated["spec"]["pool"]["generation"] = int(have["spec"]["pool"].get("generation") or 0) + 1
        await self.client.update(path, updated)

    # ---- prepare / unprepare --------------------------------------------------------------------

    def cdi_ids(self, claim_uid: str, devices: list[str]) -> list[list[str]]:
        return [[f"k8s.{self.driver}/gpu={claim_uid}-{device}"] for device in devices]

    def _spec_path(self, claim_uid: str) -> Path:
        return self.cdi_dir / f"{self.driver}-{claim_uid}.json"

    def prepared_claims(self) -> list[str]:
        """UIDs of the claims prepared on this node (their CDI spec files)."""
        prefix = f"{self.driver}-"
        return sorted(p.stem[len(prefix) :] for p in self.cdi_dir.glob(f"{prefix}*.json"))

    async def NodePrepareResources(self, request: dra_v1.NodePrepareResourcesRequest, context: grpc.aio.ServicerContext) -> Any:
        # Read the claims first (slow API calls outside the lock), as upstream's helper does; a
        # claim that cannot be read fails the whole call.
        claims = []
        for ref in request.claims:
            try:
                claim = await self.client.get(claim_path(ref.namespace, ref.name))
            except ApiError as exc:
                await context.abort(grpc.StatusCode.UNKNOWN, f"get resource claims: retrieve claim {ref.namespace}/{ref.name}: {exc}")
            if not (claim.get("status") or {}).get("allocation"):
                await context.abort(grpc.StatusCode.UNKNOWN, f"get resource claims: claim {ref.namespace}/{ref.name} not allocated")
            if claim["metadata"].get("uid") != ref.uid:
                await context.abort(grpc.StatusCode.UNKNOWN, f"get resource claims: claim {ref.namespace}/{ref.name} got replaced")
            claims.append(claim)
        response = dra_v1.NodePrepareResourcesResponse()
        async with self._lock:
            for claim in claims:
                uid = claim["metadata"]["uid"]
                results = self._my_results(claim)
                failure = self.fail_prepare or (claim["metadata"].get("annotations") or {}).get(self.annotation("fail-prepare"), "")
                if failure:
                    log.info("failing preparation on request", extra={"node": self.node, "claim": uid, "error": failure})
                    response.claims[uid].error = failure
                    continue
                devices = [r["device"] for r in results]
                ids = self.cdi_ids(uid, devices)
                self._write_spec(uid, claim, devices, ids)
                for result, cdi in zip(results, ids, strict=True):
                    response.claims[uid].devices.append(
                        dra_v1.Device(request_names=[result["request"].split("/")[0]], pool_name=self.node, device_name=result["device"], cdi_device_ids=cdi)
                    )
                await self._write_status(claim, ids)
                await self._track_health(claim)
                log.info("prepared claim", extra={"node": self.node, "claim": f"{claim['metadata'].get('namespace')}/{claim['metadata'].get('name')}", "uid": uid, "cdi": ids})
        return response

    def _my_results(self, claim: Obj) -> list[Obj]:
        results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
        return [r for r in results if r.get("driver") == self.driver and r.get("pool") == self.node]

    def _write_spec(self, uid: str, claim: Obj, devices: list[str], ids: list[list[str]]) -> None:
        """The CDI spec the container runtime would read (one device per prepared device)."""
        self.cdi_dir.mkdir(parents=True, exist_ok=True)
        spec = {
            "cdiVersion": "0.6.0",
            "kind": f"k8s.{self.driver}/gpu",
            "devices": [
                {"name": f"{uid}-{device}", "containerEdits": {"env": [f"GPU_DEVICE={device}", f"GPU_UUID={self.device_uuid(device)}"]}}
                for device in devices
            ],
            "claim": {"namespace": claim["metadata"].get("namespace"), "name": claim["metadata"].get("name"), "uid": uid},
        }
        scratch = self._spec_path(uid).with_suffix(".tmp")
        scratch.write_text(json.dumps(spec, indent=1))
        scratch.replace(self._spec_path(uid))

    async def _write_status(self, claim: Obj, ids: list[list[str]] | None) -> None:
        """Set (or with ``ids`` None, remove) this node's entries in the claim's status.devices."""

        def devices(current: Obj) -> list[Obj]:
            kept = [e for e in (current.get("status") or {}).get("devices") or [] if not (e.get("driver") == self.driver and e.get("pool") == self.node)]
            if ids is None:
                return kept
            now = now_rfc3339()
            condition = {"type": "Ready", "status": "True", "reason": READY_REASON, "message": "prepared by the example driver", "lastTransitionTime": now}
            for result, cdi in zip(self._my_results(current), ids, strict=True):
                data = {"cdiDeviceIDs": cdi, "uuid": self.device_uuid(result["device"])}
                kept.append({"driver": self.driver, "pool": self.node, "device": result["device"], "conditions": [condition], "data": data})
            return kept

        meta = claim["metadata"]
        await update_device_status(self.client, meta["namespace"], meta["name"], devices, claim)

    async def NodeUnprepareResources(self, request: dra_v1.NodeUnprepareResourcesRequest, context: grpc.aio.ServicerContext) -> Any:
        response = dra_v1.NodeUnprepareResourcesResponse()
        async with self._lock:
            for ref in request.claims:
                self._spec_path(ref.uid).unlink(missing_ok=True)
                try:
                    claim = await self.client.get(claim_path(ref.namespace, ref.name))
                    if claim["metadata"].get("uid") == ref.uid:
                        await self._write_status(claim, None)
                except ApiError as exc:
                    if exc.code != 404:
                        response.claims[ref.uid].error = f"remove the device status: {exc}"
                        continue
                if self._unhealthy_claims.pop(ref.uid, None) is not None:
                    await self._notify_health()
                response.claims[ref.uid].SetInParent()
                log.info("unprepared claim", extra={"node": self.node, "claim": f"{ref.namespace}/{ref.name}", "uid": ref.uid})
        return response

    # ---- health ---------------------------------------------------------------------------------

    async def _track_health(self, claim: Obj) -> None:
        uid = claim["metadata"]["uid"]
        marked = (claim["metadata"].get("annotations") or {}).get(self.annotation("unhealthy")) == "true"
        devices = [r["device"] for r in self._my_results(claim)] if marked else None
        if self._unhealthy_claims.get(uid) != devices:
            if devices is None:
                self._unhealthy_claims.pop(uid, None)
            else:
                self._unhealthy_claims[uid] = devices
            await self._notify_health()

    async def claim_changed(self, claim: Obj) -> None:
        """Follow the unhealthy annotation of a claim prepared here."""
        if claim["metadata"].get("uid") in self.prepared_claims():
            await self._track_health(claim)

    async def _notify_health(self) -> None:
        async with self._health_changed:
            self._health_changed.notify_all()

    def health_report(self) -> health_v1.NodeWatchResourcesResponse:
        bad = self.unhealthy_flag | {d for ds in self._unhealthy_claims.values() for d in ds}
        now = int(time.time())
        return health_v1.NodeWatchResourcesResponse(
            devices=[
                health_v1.DeviceHealth(
                    device=health_v1.DeviceIdentifier(pool_name=self.node, device_name=name),
                    health=health_v1.UNHEALTHY if name in bad else health_v1.HEALTHY,
                    last_updated_time=now,
                    message="marked unhealthy on request" if name in bad else "",
                )
                for name in self.device_names
            ]
        )

    async def NodeWatchResources(self, request: health_v1.NodeWatchResourcesRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        while True:
            yield self.health_report()
            with contextlib.suppress(TimeoutError):
                async with self._health_changed:
                    await wait_for(self._health_changed.wait(), HEALTH_RESEND_INTERVAL)
