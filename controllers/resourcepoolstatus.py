"""The ResourcePoolStatusRequest controller (upstream's resourcepoolstatusrequest controller, gate
DRAResourcePoolStatus): answers each request once, in its status, with the pools of the driver it
names as the ResourceSlices, ResourceClaims and DeviceTaintRules are now.

Per pool (driver, pool name): only the slices of the newest generation count; a pool whose slices
of that generation are not all published yet is incomplete, and the request waits for it (a few
retries with back-off, then it is left alone until it changes). A complete pool reports its slice
and device counts: devices allocated (each once, however many claims share it; admin access does
not count), devices unavailable (a NoSchedule or NoExecute taint, on the device or from a
DeviceTaintRule) and the rest available. Pools are sorted by driver and name and cut at
``spec.limit``; ``poolCount`` counts them all. Answered requests go after an hour, unanswered ones
after a day. A complete pool also carries its partition and shareable-capacity summaries
(``poolviews``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import cast

from controllers.objects import metadata
from controllers.poolviews import Counters, DeviceRecord, pool_views, resolve_partition_types, slice_counters, slice_devices
from kube.apitypes import ResourceClaim
from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kube.informer import Informer, run_with_informers
from kube.objects import Obj
from kube.quantity import ZERO, Quantity, parse_quantity_or_none
from kube.workqueue import WorkQueue, log_failures

log = logging.getLogger("resourcepoolstatusrequest-controller")


RESOURCE_GROUP = "resource.k8s.io"
REQUESTS_VERSION = "v1alpha3"
REQUESTS = "resourcepoolstatusrequests"
LIMIT_DEFAULT = 100
MAX_RETRIES = 5
INCOMPLETE_PREFIX = "PoolIncomplete:"
VALIDATION_ERROR_MAX_BYTES = 256
CLEANUP_INTERVAL = 600.0
ANSWERED_TTL = timedelta(hours=1)
PENDING_TTL = timedelta(days=1)
UNAVAILABLE_EFFECTS = ("NoSchedule", "NoExecute")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _tainted(device: Obj) -> bool:
    return any(t.get("effect") in UNAVAILABLE_EFFECTS for t in device.get("taints") or [])


def _rule_taints(rule: Obj, driver: str, pool: str, device: str) -> bool:
    """Whether a DeviceTaintRule makes this device unavailable (a rule without a selector selects nothing)."""
    spec = rule.get("spec") or {}
    if (spec.get("taint") or {}).get("effect") not in UNAVAILABLE_EFFECTS:
        return False
    selector = spec.get("deviceSelector")
    if not isinstance(selector, dict):
        return False
    wanted = {"driver": driver, "pool": pool, "device": device}
    return all(selector.get(key) in (None, value) for key, value in wanted.items())


def pool_status(request: Obj, slices: list[Obj], claims: list[Obj], rules: list[Obj]) -> Obj:
    """The status that answers ``request`` (pure: everything it reads is passed in)."""
    spec = request.get("spec") or {}
    driver = spec.get("driver") or ""
    pool_filter = spec.get("poolName") or ""
    matching = [
        s for s in slices
        if (s.get("spec") or {}).get("driver") == driver and (not pool_filter or ((s["spec"].get("pool") or {}).get("name") == pool_filter))
    ]  # fmt: skip
    # The informer's order is arbitrary; by name, a pool's devices and its first fault are always the same.
    matching.sort(key=lambda s: str(metadata(s).get("name") or ""))
    newest: dict[str, int] = {}
    for s in matching:
        pool = s["spec"].get("pool") or {}
        newest[pool.get("name", "")] = max(newest.get(pool.get("name", ""), pool.get("generation", 0)), pool.get("generation", 0))
    allocated: dict[tuple[str, str], set[str]] = {}
    consumed: dict[tuple[str, str], dict[str, Quantity]] = {}
    for claim in cast("Iterable[ResourceClaim]", claims):  # the informer's JSON, typed (kube/apitypes.pyi)
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            if result.get("adminAccess"):
                continue
            key = (result.get("driver", ""), result.get("pool", ""))
            allocated.setdefault(key, set()).add(result.get("device", ""))
            used = consumed.setdefault(key, {})
            for name, text in (result.get("consumedCapacity") or {}).items():
                amount = parse_quantity_or_none(text)
                if amount is not None:
                    used[name] = used.get(name, ZERO) + amount
    pools: dict[str, _PoolData] = {}
    for s in matching:
        sspec = s["spec"]
        pool = sspec.get("pool") or {}
        name = pool.get("name", "")
        if pool.get("generation", 0) < newest[name]:
            continue
        devices = sspec.get("devices") or []
        unavailable = sum(1 for d in devices if _tainted(d) or any(_rule_taints(r, driver, name, d.get("name", "")) for r in rules))
        node = sspec.get("nodeName") or ""
        info = pools.setdefault(name, _PoolData(node=node, expected=pool.get("resourceSliceCount", 0)))
        info.total += len(devices)
        info.unavailable += unavailable
        info.slices += 1
        info.mixed = info.mixed or node != info.node
        info.devices += slice_devices(sspec)
        info.counters.update(slice_counters(sspec))
    answers: list[Obj] = []
    for name, info in sorted(pools.items()):
        entry: Obj = {"driver": driver, "poolName": name, "generation": newest[name]}
        if info.node and not info.mixed:
            entry["nodeName"] = info.node
        if info.slices < info.expected:
            message = f"{INCOMPLETE_PREFIX} pool {driver}/{name} is incomplete: observed {info.slices}/{info.expected} slices at generation {newest[name]}"
            entry["validationError"] = _truncated(message)
        else:
            in_use = allocated.get((driver, name), set())
            entry.update(
                resourceSliceCount=info.slices,
                totalDevices=info.total,
                allocatedDevices=len(in_use),
                availableDevices=max(0, info.total - len(in_use) - info.unavailable),
                unavailableDevices=info.unavailable,
            )
            resolve_partition_types(driver, info.devices, spec.get("defaultPartitionTypeAttribute"))
            views = pool_views(driver, name, info.devices, info.counters, in_use, consumed.get((driver, name), {}))
            if views.validation_error:
                entry["validationError"] = _truncated(views.validation_error)
            if views.partition_summary:
                entry["partitionSummary"] = views.partition_summary
            if views.shareable_summary is not None:
                entry["shareableSummary"] = views.shareable_summary
        answers.append(entry)
    limit = spec.get("limit") or LIMIT_DEFAULT
    shown = answers[:limit]
    incomplete = sum(1 for p in shown if "validationError" in p)
    message = f"Calculated status for {len(shown)} pools" + (f" ({incomplete} incomplete)" if incomplete else "")
    status: Obj = {
        "poolCount": len(answers),
        "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": _now(), "reason": "CalculationComplete", "message": message}],
    }
    if shown:
        status["pools"] = shown
    return status


@dataclass
class _PoolData:
    """One pool's newest-generation slices, summed up."""

    node: str
    expected: int
    mixed: bool = False
    total: int = 0
    unavailable: int = 0
    slices: int = 0
    devices: list[DeviceRecord] = field(default_factory=list)
    counters: Counters = field(default_factory=dict)


def _truncated(message: str) -> str:
    """At most the bytes ``validationError`` may hold, never half a character."""
    return message.encode()[:VALIDATION_ERROR_MAX_BYTES].decode(errors="ignore")


def _expired(request: Obj, now: datetime) -> bool:
    status = request.get("status")
    created = metadata(request).get("creationTimestamp")
    since, ttl = created, PENDING_TTL
    if status is not None:
        ttl = ANSWERED_TTL
        done = [c for c in status.get("conditions") or [] if c.get("type") in ("Complete", "Failed")]
        since = done[0].get("lastTransitionTime") if done else created
    if not since:
        return False
    return now - datetime.fromisoformat(str(since).replace("Z", "+00:00")) > ttl


class PoolStatusController:
    """Its own informers for requests, slices and (with DRADeviceTaintRules) taint rules, the shared
    claim informer, and one work queue of request names."""

    def __init__(self, client: KubeClient, claims: Informer, *, rules_enabled: bool, workers: int = 2) -> None:
        self.client = client
        self.claims = claims
        self.workers = workers
        self.requests = Informer(client, resource_path(RESOURCE_GROUP, REQUESTS_VERSION, REQUESTS), name=REQUESTS)
        self.slices = Informer(client, resource_path(RESOURCE_GROUP, "v1", "resourceslices"), name="resourceslices")
        self.rules = Informer(client, resource_path(RESOURCE_GROUP, "v1", "devicetaintrules"), name="devicetaintrules") if rules_enabled else None
        self.queue: WorkQueue[str] = WorkQueue()
        self.requests.on_add(self._changed)
        self.requests.on_update(lambda _old, new: self._changed(new))

    def _changed(self, request: Obj) -> None:
        if request.get("status") is None:
            self.queue.add(metadata(request)["name"])

    async def process(self) -> None:
        """Answer requests until cancelled; nothing when the server does not serve them."""
        # v1alpha3 is served only when the server's --runtime-config enables it, and with the gate.
        if not await self.client.serves(RESOURCE_GROUP, REQUESTS_VERSION, REQUESTS):
            log.warning("the server does not serve %s/%s %s; not answering them", RESOURCE_GROUP, REQUESTS_VERSION, REQUESTS)
            return
        informers = [self.requests, self.slices, *([self.rules] if self.rules is not None else [])]
        await run_with_informers(informers, self.queue.run(self.sync, self.workers, log_failures(log)), self._clean_up())

    async def sync(self, name: str) -> bool:
        request = self.requests.get("", name)
        if request is None or request.get("status") is not None:
            return True
        rules = self.rules.list() if self.rules is not None else []
        status = pool_status(request, self.slices.list(), self.claims.list(), rules)
        if any(str(p.get("validationError", "")).startswith(INCOMPLETE_PREFIX) for p in status.get("pools") or []):
            # The driver is still publishing: wait a little, then leave the request until it changes.
            return self.queue.num_requeues(name) >= MAX_RETRIES
        path = resource_path(RESOURCE_GROUP, REQUESTS_VERSION, REQUESTS, None, name, "status")
        await self.client.update(path, {**request, "status": status})
        return True

    async def _clean_up(self) -> None:
        while True:
            now = datetime.now(UTC)
            for request in self.requests.list():
                if _expired(request, now):
                    meta = metadata(request)
                    path = resource_path(RESOURCE_GROUP, REQUESTS_VERSION, REQUESTS, None, meta["name"])
                    try:
                        await self.client.delete(path, preconditions={"uid": str(meta.get("uid") or "")}, missing_ok=True)
                    except ApiError as exc:
                        log.warning("could not delete an expired request", extra={"name": meta["name"], "error": str(exc)})
            await asyncio.sleep(CLEANUP_INTERVAL)
