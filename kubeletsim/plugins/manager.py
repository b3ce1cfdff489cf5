"""The kubelet's DRA manager for the external drivers of one node.

Before a pod runs, :meth:`DRAManager.prepare_resources` calls NodePrepareResources for the
pod's claims that are not prepared on this node yet, one call per driver with all its claims;
:meth:`DRAManager.unprepare_resources` calls NodeUnprepareResources once the last pod using a
claim here is done. Which claims are prepared for which pods is checkpointed, so neither
happens twice across a restart. Errors carry the kubelet's texts. Devices of drivers the node
simulates itself (built-in profiles) are left to the simulator.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Collection, Iterable, Mapping
from dataclasses import dataclass

import grpc.aio

from kube.dra.claims import extended_resource_claim_name
from kube.objects import Obj
from kubeletapi.dra.v1 import api_pb2 as dra_v1
from kubeletsim.plugins.checkpoint import Checkpoint, ClaimInfo, PreparedDevice
from kubeletsim.plugins.draplugin import DRAPlugin, PluginError, PluginStore, rpc_error_text
from kubeletsim.plugins.health import UNKNOWN, HealthCache

log = logging.getLogger("kubeletsim.plugins")


class PrepareError(Exception):
    """Preparing (or unpreparing) failed; the message is what the kubelet reports."""


@dataclass(frozen=True)
class ContainerClaimDevices:
    """The devices one container gets through one claim."""

    claim_name: str
    namespace: str
    devices: tuple[tuple[str, PreparedDevice], ...]  # (driver, device)


def _results(claim: Obj) -> list[Obj]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return list(((allocation.get("devices") or {}).get("results")) or [])


def _pod_claim_names(pod: Obj) -> dict[str, str | None]:
    """pod claim name -> ResourceClaim name (None while not generated yet)."""
    statuses = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    return {
        pc.get("name", ""): pc.get("resourceClaimName") or statuses.get(pc.get("name", ""))
        for pc in (pod.get("spec") or {}).get("resourceClaims") or []
    }


class DRAManager:
    """Prepares and unprepares the claims of one node's pods through the node's registered plugins."""

    def __init__(self, node: str, plugins: PluginStore, checkpoint: Checkpoint, health: HealthCache, *, builtin_drivers: Collection[str] = ()) -> None:
        self.node = node
        self.plugins = plugins
        self.checkpoint = checkpoint
        self.health = health
        self.builtin_drivers = frozenset(builtin_drivers)
        self._locks: dict[str, asyncio.Lock] = {}

    def external_drivers(self, claim: Obj) -> list[str]:
        """The drivers of the claim's allocation that this node does not simulate itself, in order."""
        drivers: list[str] = []
        for result in _results(claim):
            driver = result.get("driver", "")
            if driver not in self.builtin_drivers and driver not in drivers:
                drivers.append(driver)
        return drivers

    @contextlib.asynccontextmanager
    async def _locked(self, claim_uids: Iterable[str]) -> AsyncIterator[None]:
        """Hold the claims' locks (in a fixed order): pods sharing a claim wait, others do not."""
        locks = [self._locks.setdefault(uid, asyncio.Lock()) for uid in sorted(set(claim_uids))]
        async with contextlib.AsyncExitStack() as stack:
            for lock in locks:
                await stack.enter_async_context(lock)
            yield

    # ---- prepare --------------------------------------------------------------------------------

    async def prepare_resources(self, pod: Obj, claims: Mapping[str, Obj]) -> None:
        """Prepare the pod's claims (``claims``: claim name -> the claim as read from the API).

        The simulator has already checked that each claim exists, is allocated for this node and
        reserved for the pod. Raises PrepareError with the kubelet's message.
        """
        try:
            await self._prepare(pod, claims)
        except PrepareError as exc:
            raise PrepareError(f"prepare dynamic resources: {exc}") from None

    async def _prepare(self, pod: Obj, claims: Mapping[str, Obj]) -> None:
        pod_uid = (pod.get("metadata") or {}).get("uid", "")
        wanted: list[tuple[Obj, dict[str, DRAPlugin]]] = []
        # A first pass changes nothing: a pod whose driver is missing must stay deletable without
        # an unprepare call to a driver that never prepared anything.
        for claim in claims.values():
            drivers = self.external_drivers(claim)
            if not drivers:
                continue
            plugins: dict[str, DRAPlugin] = {}
            for driver in drivers:
                try:
                    plugins[driver] = self.plugins.get(driver)
                except PluginError as exc:
                    raise PrepareError(str(exc)) from None
            wanted.append((claim, plugins))
        if not wanted:
            return
        uids = [(c.get("metadata") or {}).get("uid", "") for c, _ in wanted]
        async with self._locked(uids):
            batches: dict[DRAPlugin, list[dra_v1.Claim]] = {}
            pending: dict[str, tuple[Obj, ClaimInfo]] = {}
            for claim, plugins in wanted:
                meta = claim.get("metadata") or {}
                info = self.checkpoint.get(meta.get("namespace", ""), meta.get("name", ""))
                if info is None:
                    # The drivers are known from the allocation before any call: unpreparing a claim
                    # whose preparation failed half-way asks each of them.
                    info = ClaimInfo(meta.get("uid", ""), meta.get("name", ""), meta.get("namespace", ""), drivers={d: [] for d in plugins})
                    self.checkpoint.add(info)
                elif info.uid != meta.get("uid"):
                    raise PrepareError(
                        f"old ResourceClaim with same name {info.name} and different UID {info.uid} still exists (previous pod force-deleted?!)"
                    )
                info.pod_uids.add(pod_uid)
                if info.prepared:
                    continue
                pending[info.uid] = (claim, info)
                request = dra_v1.Claim(namespace=info.namespace, uid=info.uid, name=info.name)
                for plugin in plugins.values():
                    batches.setdefault(plugin, []).append(request)
            # The pod is recorded as a user before any call, so if it goes away while a call is in
            # flight, its claims are still unprepared.
            self.checkpoint.save()
            for plugin, requests in batches.items():
                response = await self._call_prepare(plugin, requests)
                for uid, result in response.claims.items():
                    entry = pending.get(uid)
                    if entry is None or all(r.uid != uid for r in requests):
                        raise PrepareError(f"NodePrepareResources returned result for unknown claim UID {uid}")
                    claim, info = entry
                    if result.error:
                        raise PrepareError(f"NodePrepareResources failed for ResourceClaim {info.name}: {result.error}")
                    info.drivers[plugin.driver] = self._devices(plugin.driver, claim, result)
                skipped = len(requests) - len(response.claims)
                if skipped:
                    raise PrepareError(f"NodePrepareResources skipped {skipped} ResourceClaims")
            for _, info in pending.values():
                info.prepared = True
            self.checkpoint.save()
        log.info("prepared claims", extra={"node": self.node, "pod": pod_uid, "claims": sorted(i.name for _, i in pending.values())})

    async def _call_prepare(self, plugin: DRAPlugin, requests: list[dra_v1.Claim]) -> dra_v1.NodePrepareResourcesResponse:
        try:
            return await plugin.node_prepare_resources(requests)
        except grpc.aio.AioRpcError as exc:
            log.error("NodePrepareResources failed", extra={"node": self.node, "driver": plugin.driver, "error": rpc_error_text(exc)})
            raise PrepareError(f"NodePrepareResources: {rpc_error_text(exc)}") from None

    def _devices(self, driver: str, claim: Obj, result: dra_v1.NodePrepareResourceResponse) -> list[PreparedDevice]:
        """The devices of a per-claim result, each checked against the claim's allocation."""
        allocated = {(r.get("pool"), r.get("device")) for r in _results(claim) if r.get("driver") == driver}
        devices = []
        for device in result.devices:
            if (device.pool_name, device.device_name) not in allocated:
                name = (claim.get("metadata") or {}).get("name", "")
                message = (
                    f"NodePrepareResources returned device {device.pool_name}/{device.device_name} for ResourceClaim {name}, "
                    f"which is not among the devices allocated to it by driver {driver}"
                )
                log.error("invalid NodePrepareResources response", extra={"node": self.node, "driver": driver, "error": message})
                raise PrepareError(message)
            devices.append(
                PreparedDevice(
                    device.pool_name,
                    device.device_name,
                    list(device.request_names),
                    list(device.cdi_device_ids),
                    device.share_id if device.HasField("share_id") else None,
                )
            )
        return devices

    # ---- unprepare ------------------------------------------------------------------------------

    async def unprepare_resources(self, pod_uid: str, namespace: str, claim_names: Iterable[str]) -> None:
        """Drop the pod from its claims; unprepare the claims no other pod here uses. PrepareError on failure."""
        try:
            await self._unprepare(pod_uid, namespace, list(claim_names))
        except PrepareError as exc:
            raise PrepareError(f"unprepare dynamic resources: {exc}") from None

    async def _unprepare(self, pod_uid: str, namespace: str, claim_names: list[str]) -> None:
        infos = [i for i in (self.checkpoint.get(namespace, n) for n in claim_names) if i is not None and pod_uid in i.pod_uids]
        if not infos:
            return
        async with self._locked(i.uid for i in infos):
            batches: dict[str, list[dra_v1.Claim]] = {}
            last: list[ClaimInfo] = []
            for info in infos:
                if info.pod_uids - {pod_uid}:
                    info.pod_uids.discard(pod_uid)
                    continue
                last.append(info)
                for driver in info.drivers:
                    batches.setdefault(driver, []).append(dra_v1.Claim(namespace=info.namespace, uid=info.uid, name=info.name))
            for driver, requests in batches.items():
                try:
                    plugin = self.plugins.get(driver)
                except PluginError as exc:
                    raise PrepareError(str(exc)) from None
                try:
                    response = await plugin.node_unprepare_resources(requests)
                except grpc.aio.AioRpcError as exc:
                    raise PrepareError(f"NodeUnprepareResources: {rpc_error_text(exc)}") from None
                for uid, result in response.claims.items():
                    request = next((r for r in requests if r.uid == uid), None)
                    if request is None:
                        raise PrepareError(f"NodeUnprepareResources returned result for unknown claim UID {uid}")
                    if result.error:
                        raise PrepareError(f"NodeUnprepareResources failed for ResourceClaim {request.name}: {result.error}")
                skipped = len(requests) - len(response.claims)
                if skipped:
                    raise PrepareError(f"NodeUnprepareResources skipped {skipped} ResourceClaims")
            for info in last:
                self.checkpoint.delete(info.namespace, info.name)
            self.checkpoint.save()
        if last:
            log.info("unprepared claims", extra={"node": self.node, "pod": pod_uid, "claims": sorted(i.name for i in last)})

    def pods_with_claims(self) -> dict[str, tuple[str, list[str]]]:
        """pod uid -> (namespace, its claims held here): what a reconcile must unprepare for pods that are gone."""
        return self.checkpoint.pods()

    # ---- what containers got --------------------------------------------------------------------

    def container_devices(self, pod: Obj, container: Obj) -> list[ContainerClaimDevices]:
        """The prepared devices of each claim the container uses (filtered by the request it names)."""
        namespace = (pod.get("metadata") or {}).get("namespace", "")
        names = _pod_claim_names(pod)
        out: list[ContainerClaimDevices] = []
        for ref in (container.get("resources") or {}).get("claims") or []:
            claim_name = names.get(ref.get("name", ""))
            info = self.checkpoint.get(namespace, claim_name) if claim_name else None
            if info is None or not info.prepared:
                continue
            request = ref.get("request") or ""
            devices = tuple((driver, d) for driver, ds in sorted(info.drivers.items()) for d in ds if d.serves(request))
            out.append(ContainerClaimDevices(info.name, info.namespace, devices))
        extended = extended_resource_claim_name(pod)
        info = self.checkpoint.get(namespace, extended) if extended else None
        if info is not None and info.prepared:
            # Extended resources: the container gets the devices of the requests mapped to it.
            mapped = [m.get("requestName", "") for m in ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("requestMappings") or []
                      if m.get("containerName") == container.get("name")]  # fmt: skip
            devices = tuple((driver, d) for driver, ds in sorted(info.drivers.items()) for d in ds if any(d.serves(r) for r in mapped))
            if devices:
                out.append(ContainerClaimDevices(info.name, info.namespace, devices))
        return out

    def cdi_devices(self, pod: Obj, container: Obj) -> list[str]:
        """The CDI device IDs the container runtime would get for this container."""
        return [cdi for entry in self.container_devices(pod, container) for _, device in entry.devices for cdi in device.cdi_device_ids]

    def pods_using(self, driver: str, devices: Iterable[tuple[str, str]]) -> set[str]:
        """UIDs of the pods whose claims hold any of the driver's (pool, device) pairs."""
        wanted = set(devices)
        return {
            uid
            for info in self.checkpoint.claims.values()
            if any((d.pool, d.device) in wanted for d in info.drivers.get(driver, ()))
            for uid in info.pod_uids
        }

    def allocated_resources_status(self, pod: Obj, container_statuses: list[Obj], *, with_message: bool = False) -> list[Obj]:
        """``container_statuses`` with ``allocatedResourcesStatus`` set from device health, as the kubelet reports it
        (feature ResourceHealthStatus): one entry per claim (``claim:<name>`` or ``claim:<name>/<request>``)
        listing each device of the claim by its first CDI ID (else driver/pool/device)."""
        namespace = (pod.get("metadata") or {}).get("namespace", "")
        names = _pod_claim_names(pod)
        specs = {c.get("name"): c for c in (pod.get("spec") or {}).get("containers") or []}
        out = []
        for status in container_statuses:
            spec = specs.get(status.get("name"))
            refs = ((spec or {}).get("resources") or {}).get("claims") or []
            if not refs:
                out.append(status)
                continue
            entries: list[Obj] = []
            for ref in refs:
                claim_name = names.get(ref.get("name", ""))
                info = self.checkpoint.get(namespace, claim_name) if claim_name else None
                if info is None:
                    continue
                resources = []
                for driver, devices in sorted(info.drivers.items()):
                    for device in devices:
                        health = self.health.get(driver, device.pool, device.device)
                        resource: Obj = {
                            "resourceID": device.cdi_device_ids[0] if device.cdi_device_ids else f"{driver}/{device.pool}/{device.device}",
                            "health": health.health if health is not None else UNKNOWN,
                        }
                        if with_message and health is not None and health.message:
                            resource["message"] = health.message
                        resources.append(resource)
                if resources:
                    name = f"claim:{ref.get('name')}" + (f"/{ref['request']}" if ref.get("request") else "")
                    entries.append({"name": name, "resources": resources})
            new = {k: v for k, v in status.items() if k != "allocatedResourcesStatus"}
            if entries:
                new["allocatedResourcesStatus"] = entries
            out.append(new)
        return out
