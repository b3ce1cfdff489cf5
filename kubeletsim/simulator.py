"""The kubelet simulator: many fake nodes in one asyncio process, driven by informers.

Informers cache nodes, ResourceSlices, pods bound to any node (one watch, filtered locally)
and ResourceClaims; their handlers only queue keys, and a few workers reconcile one key at a
time (node registration, slice publication, one pod). Everything is derived from what the
server holds, so a restarted simulator picks up its nodes, slices and running pods without
duplicating anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import math
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import httpx

from kube.client import KubeClient, record_event, resource_path
from kube.errors import ApiError
from kube.features import FeatureGates
from kube.heap import keep_heap_frozen
from kube.informer import Informer
from kube.pods import pod_requests
from kube.timeutil import now_rfc3339, parse_time
from kubeletsim import nodes as nodes_mod
from kubeletsim import pods as pods_mod
from kubeletsim import resources
from kubeletsim.heartbeats import Heartbeats
from kubeletsim.profiles import DriverProfile, Profile, build_pool_slices, render_devices, without_device_field
from kubeletsim.queue import WorkQueue

Obj = dict[str, Any]
PodKey = tuple[str, str]

log = logging.getLogger("kubeletsim")

COMPONENT = "kubelet"
NODES = resource_path("", "v1", "nodes")
SLICES = resource_path("resource.k8s.io", "v1", "resourceslices")
PODS = resource_path("", "v1", "pods")
CLAIMS = resource_path("resource.k8s.io", "v1", "resourceclaims")
NODE_ALLOCATABLE_FEATURE = "DRANodeAllocatableResources"


@dataclass
class Settings:
    """Tunables of one simulator process."""

    nodes: int = 10
    node_prefix: str = "sim-"
    lease_interval: float = 10.0
    node_status_interval: float = 60.0
    resync_interval: float = 30.0
    workers: int = 64
    # Lease renewals (and node status heartbeats) in flight at once; 0 = enough for the rate (see below).
    heartbeat_concurrency: int = 0
    # The kubelet's --max-pods: the nodes' `pods` capacity (and the size of their pod address ranges).
    max_pods: int = nodes_mod.DEFAULT_MAX_PODS

    def heartbeats_in_flight(self, interval: float) -> int:
        """How many beats may be in flight: enough for ``nodes / interval`` per second at 250 ms each (16..128).

        Upstream every kubelet renews on its own connection; one process simulating thousands must
        keep enough requests in flight to get its share of a server that pod work keeps busy. Beats
        are only sent when due, so a generous limit costs nothing until the simulator falls behind,
        and then lets heartbeats win over pod work.
        """
        if self.heartbeat_concurrency > 0:
            return self.heartbeat_concurrency
        return max(16, min(128, math.ceil(self.nodes / max(interval, 0.001) * 0.25)))

    def connections(self) -> int:
        """Requests this process may have in flight at once (workers plus both heartbeat kinds)."""
        return self.workers + self.heartbeats_in_flight(self.lease_interval) + self.heartbeats_in_flight(self.node_status_interval)


def _rv(value: Any) -> int | None:
    """A resourceVersion as a number (this server's are one global revision counter), or None."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


class Simulator:
    """Simulates ``settings.nodes`` kubelets that run the drivers of ``profile``."""

    def __init__(self, client: KubeClient, profile: Profile, settings: Settings, gates: FeatureGates | None = None) -> None:
        self.client = client
        self.profile = profile
        self.settings = settings
        self.gates = gates or FeatureGates()
        # KEP-5517: with the gate, admission counts what claims charge and the nodes declare the
        # feature; without it the devices' nodeAllocatableResources are not published (the server
        # would drop them, and the slices would never match the profile).
        self.node_allocatable = self.gates.enabled(NODE_ALLOCATABLE_FEATURE)
        self.declared_features = [NODE_ALLOCATABLE_FEATURE] if self.node_allocatable else []
        if not self.node_allocatable:
            profile = without_device_field(profile, "nodeAllocatableResources")
            self.profile = profile
        self.node_names = [f"{settings.node_prefix}{i}" for i in range(settings.nodes)]
        self.node_index = {name: i for i, name in enumerate(self.node_names)}
        self.drivers = set(profile.driver_names)
        self.nodes = Informer(client, NODES, name="nodes")
        self.slices = Informer(client, SLICES, name="resourceslices")
        # One watch over every bound pod; upstream kubelets watch one node each, which at
        # simulator scale would mean thousands of watches.
        self.pods = Informer(client, PODS, field_selector="spec.nodeName!=", name="pods")
        self.claims = Informer(client, CLAIMS, name="resourceclaims")
        self.queue = WorkQueue()
        self._failures: dict[Hashable, int] = {}
        self._desired: dict[tuple[str, str], list[Obj]] = {}
        self._generations: dict[tuple[str, str], int] = {}
        # node -> resourceVersion of our last slice write: until the slice cache has caught up with
        # it, the cache shows a half-published pool, and acting on that would publish again and again.
        self._slices_written: dict[str, int] = {}
        self._attributes: dict[tuple[str, str], Obj] = {}
        # node -> slice name -> slice, so a node's pools are found without scanning every slice.
        self._node_slices: dict[str, dict[str, Obj]] = {}
        # node -> host number -> pod uid, for unique pod IPs.
        self._ips: dict[str, dict[int, str]] = {name: {} for name in self.node_names}
        # node -> pod uid -> requests of the pods admitted there and not finished (resource admission).
        self._admitted: dict[str, dict[str, resources.Amounts]] = {name: {} for name in self.node_names}
        # node -> uid of the Node object whose Lease this process last renewed or created on registration.
        self._lease_synced: dict[str, str] = {}
        self.leases = Heartbeats("leases", settings.lease_interval, self._renew_lease, settings.heartbeats_in_flight(settings.lease_interval))
        self.node_status = Heartbeats(
            "node-status", settings.node_status_interval, self._beat_node_status, settings.heartbeats_in_flight(settings.node_status_interval)
        )
        # (namespace, claim name) -> pods on our nodes that use the claim.
        self._claim_users: dict[PodKey, set[PodKey]] = {}
        self._gone: dict[PodKey, Obj] = {}
        self._started: dict[str, float] = {}
        # pod uid -> the last phase (or "Pending: <message>") this process wrote. The informer
        # may not have seen our own write yet when the pod is processed again; this keeps a
        # stale cache from causing a second start, finish or event.
        self._written: dict[str, str] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.ready = asyncio.Event()
        for name in self.node_names:
            for driver in profile.drivers:
                for device in render_devices(driver, name):
                    self._attributes[(driver.name, device["name"])] = device.get("attributes") or {}
        self._wire_handlers()

    # ---- handlers: only bookkeeping and queueing -------------------------------------------------

    def _wire_handlers(self) -> None:
        self.nodes.on_add(lambda n: self._node_event(n))
        self.nodes.on_update(lambda old, new: self._node_event(new, old))
        self.nodes.on_delete(lambda n: self._node_event(n))
        self.slices.on_add(self._slice_event)
        self.slices.on_update(lambda _old, new: self._slice_event(new))
        self.slices.on_delete(lambda slice_: self._slice_event(slice_, deleted=True))
        self.pods.on_add(self._pod_event)
        self.pods.on_update(lambda _old, new: self._pod_event(new))
        self.pods.on_delete(self._pod_deleted)
        self.claims.on_add(self._claim_event)
        self.claims.on_update(lambda _old, new: self._claim_event(new))
        self.claims.on_delete(self._claim_event)

    def _node_event(self, node: Obj, old: Obj | None = None) -> None:
        name = _meta(node).get("name", "")
        if name not in self.node_index:
            return
        # Heartbeats update every node all the time; only a new node or one that lost what we maintain needs work.
        if (
            old is None
            or not self._node_healthy(node)
            or _meta(old).get("uid") != _meta(node).get("uid")
            or self._node_settings_patch(node) is not None
        ):
            self.queue.add(("node", name))

    def _slice_event(self, slice_: Obj, deleted: bool = False) -> None:
        node = _spec(slice_).get("nodeName")
        if node not in self.node_index:
            return
        name = _meta(slice_).get("name", "")
        ours = self._node_slices.setdefault(node, {})
        if deleted:
            ours.pop(name, None)
        else:
            ours[name] = slice_
        self.queue.add(("slices", node))

    def _pod_event(self, pod: Obj) -> None:
        key = (_meta(pod).get("namespace", ""), _meta(pod).get("name", ""))
        if _spec(pod).get("nodeName") not in self.node_index:
            return
        self._track_ip(pod)
        self._track_admission(pod)
        for _, claim, _ in pods_mod.pod_claim_names(pod):
            if claim:
                self._claim_users.setdefault((key[0], claim), set()).add(key)
        self.queue.add(("pod", *key))

    def _pod_deleted(self, pod: Obj) -> None:
        key = (_meta(pod).get("namespace", ""), _meta(pod).get("name", ""))
        if _spec(pod).get("nodeName") not in self.node_index:
            return
        self._release_ip(pod)
        self._admitted[_spec(pod).get("nodeName", "")].pop(_meta(pod).get("uid", ""), None)
        for _, claim, _ in pods_mod.pod_claim_names(pod):
            if claim:
                users = self._claim_users.get((key[0], claim))
                if users is not None:
                    users.discard(key)
                    if not users:
                        del self._claim_users[(key[0], claim)]
        # The worker unprepares what the pod left behind (e.g. after a forced deletion).
        self._gone[key] = pod
        self.queue.add(("pod", *key))

    def _claim_event(self, claim: Obj) -> None:
        for key in self._claim_users.get((_meta(claim).get("namespace", ""), _meta(claim).get("name", "")), ()):
            self.queue.add(("pod", *key))

    # ---- pod IPs ----------------------------------------------------------------------------------

    def _host_of(self, node: str, ip: str | None) -> int | None:
        return nodes_mod.pod_host(self.node_index[node], ip, self.settings.max_pods)

    def _track_ip(self, pod: Obj) -> None:
        node = _spec(pod).get("nodeName", "")
        uid = _meta(pod).get("uid", "")
        host = self._host_of(node, _status(pod).get("podIP"))
        live = _status(pod).get("phase") not in pods_mod.TERMINAL_PHASES and not _meta(pod).get("deletionTimestamp")
        if host is not None and live:
            self._ips[node][host] = uid
        else:
            self._release_ip(pod)

    def _track_admission(self, pod: Obj) -> None:
        """Keep the admitted pods' requests per node: a finished pod frees them; a pod that got its
        hostIP from an earlier run of this simulator counts as admitted (so a restart re-counts them)."""
        node = _spec(pod).get("nodeName", "")
        uid = _meta(pod).get("uid", "")
        phase = _status(pod).get("phase")
        admitted = self._admitted[node]
        if phase in pods_mod.TERMINAL_PHASES or self._written.get(uid) in pods_mod.TERMINAL_PHASES:
            admitted.pop(uid, None)
        elif uid not in admitted and _status(pod).get("hostIP"):
            admitted[uid] = self._requests(pod)

    def _release_ip(self, pod: Obj) -> None:
        node, uid = _spec(pod).get("nodeName", ""), _meta(pod).get("uid", "")
        hosts = self._ips.get(node, {})
        for host in [h for h, owner in hosts.items() if owner == uid]:
            del hosts[host]

    def _allocate_ip(self, node: str, uid: str) -> str | None:
        hosts = self._ips[node]
        index, max_pods = self.node_index[node], self.settings.max_pods
        for host, owner in hosts.items():
            if owner == uid:
                return nodes_mod.pod_ip(index, host, max_pods)
        for host in range(2, nodes_mod.max_host(max_pods) + 1):
            if host not in hosts:
                hosts[host] = uid
                return nodes_mod.pod_ip(index, host, max_pods)
        return None

    def _requests(self, pod: Obj) -> resources.Amounts:
        """What the pod takes from the node: the shared PodRequests rule, with what its claims
        charge (status.nodeAllocatableResourceClaimStatuses) when DRANodeAllocatableResources is on."""
        return pod_requests(pod, node_allocatable=self.node_allocatable)

    # ---- run ----------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Sync the caches, then reconcile until cancelled."""
        informers = [self.nodes, self.slices, self.pods, self.claims]
        for informer in informers:
            informer.start()
        try:
            for informer in informers:
                await informer.wait_synced()
            log.info("caches synced", extra={"nodes": len(self.node_names), "profile": self.profile.name})
            for name in self.node_names:
                self.queue.add(("node", name))
            self._tasks = [asyncio.create_task(self._worker(), name=f"worker-{i}") for i in range(self.settings.workers)]
            self._tasks += [
                asyncio.create_task(self.leases.run(), name="leases"),
                asyncio.create_task(self.node_status.run(), name="node-status"),
                asyncio.create_task(self._every(self.settings.resync_interval, self._resync), name="resync"),
                asyncio.create_task(keep_heap_frozen(), name="gc-freeze"),
            ]
            self.ready.set()
            await asyncio.gather(*self._tasks)
        finally:
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            self.queue.close()
            for informer in informers:
                await informer.stop()

    async def _every(self, interval: float, action: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await action()
            except (ApiError, httpx.HTTPError, OSError) as exc:
                log.warning("periodic task failed", extra={"task": getattr(action, "__name__", ""), "error": str(exc)})

    async def _resync(self) -> None:
        """Re-check everything now and then, in case an event was missed or a write raced (cheap: no writes when all is well)."""
        late, self.leases.max_late = self.leases.max_late, 0.0
        # How far behind its slots the lease loop ran: the first sign of a simulator (or server) that is overloaded.
        level = logging.WARNING if late > self.settings.lease_interval / 2 else logging.INFO
        log.log(level, "lease renewals", extra={"renewals": self.leases.beats, "maxLateSeconds": round(late, 3)})
        for name in self.node_names:
            self.queue.add(("node", name))
        for pod in self.pods.list():
            if _spec(pod).get("nodeName") in self.node_index:
                self.queue.add(("pod", _meta(pod).get("namespace", ""), _meta(pod).get("name", "")))

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self._dispatch(key)
                self._failures.pop(key, None)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures = self._failures.get(key, 0) + 1
                self._failures[key] = failures
                delay = min(0.05 * 2**failures, 10.0)
                level = logging.DEBUG if isinstance(exc, ApiError) and exc.code == 409 else logging.WARNING
                log.log(level, "reconcile failed, retrying", extra={"key": str(key), "error": str(exc), "retryIn": delay})
                self.queue.add_after(key, delay)
            finally:
                self.queue.done(key)
            # A key with nothing to do never awaits, and a non-empty queue hands out the next key
            # without suspending: without this, a resync of thousands of keys would hold the event
            # loop for seconds and delay every Lease renewal behind it.
            await asyncio.sleep(0)

    async def _dispatch(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        if key[0] == "node":
            await self._sync_node(key[1])
        elif key[0] == "slices":
            await self._sync_slices(key[1])
        elif key[0] == "pod":
            await self._sync_pod(key[1], key[2])

    # ---- nodes and leases ---------------------------------------------------------------------------

    def _node_healthy(self, node: Obj) -> bool:
        status = _status(node)
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        return ready and bool(status.get("nodeInfo")) and bool(status.get("allocatable"))

    def _node_settings_patch(self, node: Obj) -> Obj | None:
        """A status patch when the node's pod capacity or declared features are not this process's
        (it was registered by a run with another --max-pods or other gates), else None."""
        status = _status(node)
        pods = str(self.settings.max_pods)
        if (
            (status.get("capacity") or {}).get("pods") == pods
            and (status.get("allocatable") or {}).get("pods") == pods
            and sorted(status.get("declaredFeatures") or []) == self.declared_features
        ):
            return None
        return {
            "status": {
                "capacity": {"pods": pods},
                "allocatable": {"pods": pods},
                "declaredFeatures": self.declared_features or None,
            }
        }

    async def _sync_node(self, name: str) -> None:
        """Register the node if it is missing, restore its status, renew its Lease once, queue its slices."""
        node = self.nodes.get("", name)
        index = self.node_index[name]
        registered = False
        if node is None:
            try:
                node = await self.client.create(
                    NODES,
                    nodes_mod.build_node(
                        name, index, self.profile.name, max_pods=self.settings.max_pods, declared_features=self.declared_features
                    ),
                )
                registered = True
                log.info("registered node", extra={"node": name})
            except ApiError as exc:
                if exc.code != 409:
                    raise
                node = await self.client.get(resource_path("", "v1", "nodes", name=name))
        if not self._node_healthy(node):
            status = nodes_mod.node_status(name, index, max_pods=self.settings.max_pods, declared_features=self.declared_features)
            node = await self.client.patch(resource_path("", "v1", "nodes", name=name, subresource="status"), {"status": status})
        elif (settings := self._node_settings_patch(node)) is not None:
            node = await self.client.patch(resource_path("", "v1", "nodes", name=name, subresource="status"), settings)
        uid = _meta(node).get("uid", "")
        if self._lease_synced.get(name) != uid:
            # Right away (a kubelet renews when it starts); afterwards the heartbeat loop renews it at its
            # slot. A Node object new to us (registered now, or re-created) becomes the Lease's owner.
            await self._renew_lease(name, node, owner=registered or name in self._lease_synced)
            self._lease_synced[name] = uid
        self.leases.add(name)
        self.node_status.add(name)
        # Through the queue, so one node's slices are never published by two workers at once.
        self.queue.add(("slices", name))

    async def _renew_lease(self, name: str, node: Obj | None = None, owner: bool = False) -> None:
        """Renew the node's Lease (one merge patch); create it when missing. ``owner``: (re)point it at this Node object."""
        node = node or self.nodes.get("", name) or {"metadata": {"name": name}}
        lease = nodes_mod.build_lease(node)
        if owner:
            # A node we just registered most likely has no Lease yet: create first, patch only if one exists.
            try:
                await self.client.create(resource_path("coordination.k8s.io", "v1", "leases", nodes_mod.NODE_LEASE_NAMESPACE), lease)
                return
            except ApiError as exc:
                if exc.code != 409:
                    raise
        patch: Obj = {"spec": lease["spec"]}
        if owner and lease["metadata"].get("ownerReferences"):
            patch["metadata"] = {"ownerReferences": lease["metadata"]["ownerReferences"]}
        try:
            await self.client.patch(resource_path("coordination.k8s.io", "v1", "leases", nodes_mod.NODE_LEASE_NAMESPACE, name), patch)
        except ApiError as exc:
            if exc.code != 404:
                raise
            try:
                await self.client.create(resource_path("coordination.k8s.io", "v1", "leases", nodes_mod.NODE_LEASE_NAMESPACE), lease)
            except ApiError as create_exc:
                if create_exc.code != 409:
                    raise

    async def _beat_node_status(self, name: str) -> None:
        """Post the node's conditions with a fresh lastHeartbeatTime (keeping transition times)."""
        node = self.nodes.get("", name)
        if node is None:
            self.queue.add(("node", name))
            return
        transitions = {c.get("type", ""): c.get("lastTransitionTime", "") for c in _status(node).get("conditions") or []}
        conditions = nodes_mod.node_conditions(now_rfc3339(), transitions)
        await self.client.patch(resource_path("", "v1", "nodes", name=name, subresource="status"), {"status": {"conditions": conditions}})

    # ---- resource slices ----------------------------------------------------------------------------

    def _desired_slices(self, node: str, driver: DriverProfile, uid: str) -> list[Obj]:
        key = (node, driver.name)
        cached = self._desired.get(key)
        owner = cached[0]["metadata"].get("ownerReferences", [{}])[0].get("uid") if cached else None
        if cached is None or owner != uid:
            cached = build_pool_slices(driver, node, node_uid=uid)
            self._desired[key] = cached
        return cached

    @staticmethod
    def _same_slice(existing: Obj, desired: Obj) -> bool:
        def strip(obj: Obj) -> Obj:
            # Shallow copies: only the pool's generation is left out of the comparison.
            spec = dict(_spec(obj))
            spec["pool"] = {k: v for k, v in (spec.get("pool") or {}).items() if k != "generation"}
            return spec

        owners = [o.get("uid") for o in _meta(existing).get("ownerReferences") or []]
        wanted = [o.get("uid") for o in _meta(desired).get("ownerReferences") or []]
        return owners == wanted and strip(existing) == strip(desired)

    async def _sync_slices(self, name: str) -> None:
        """Make the node's pools match the profile; bump the pool generation whenever a pool changes."""
        node = self.nodes.get("", name)
        if node is None:
            return  # the node's own reconcile registers it and then queues its slices
        written = self._slices_written.get(name)
        if written is not None:
            if (_rv(self.slices.resource_version) or 0) < written:
                return  # the watch event of our own write is on its way and queues the node again
            del self._slices_written[name]
        uid = _meta(node).get("uid", "")
        ours = list(self._node_slices.get(name, {}).values())
        last_rv = 0
        for driver in self.profile.drivers:
            existing = {_meta(s)["name"]: s for s in ours if _spec(s).get("driver") == driver.name}
            desired = self._desired_slices(name, driver, uid)
            generations = {int((_spec(s).get("pool") or {}).get("generation") or 0) for s in existing.values()}
            if (
                len(existing) == len(desired)
                and len(generations) == 1
                and all(d["metadata"]["name"] in existing and self._same_slice(existing[d["metadata"]["name"]], d) for d in desired)
            ):
                continue
            # Remembered too, so a pool whose slices were all deleted does not restart at generation 1
            # while consumers may still hold the old one.
            generation = max(generations | {self._generations.get((name, driver.name), 0)}) + 1
            self._generations[(name, driver.name)] = generation
            for want in desired:
                obj = copy.deepcopy(want)
                obj["spec"]["pool"]["generation"] = generation
                have = existing.pop(want["metadata"]["name"], None)
                if have is None:
                    result = await self.client.create(SLICES, obj)
                else:
                    obj["metadata"]["resourceVersion"] = _meta(have).get("resourceVersion")
                    result = await self.client.update(
                        resource_path("resource.k8s.io", "v1", "resourceslices", name=obj["metadata"]["name"]), obj
                    )
                last_rv = max(last_rv, _rv(_meta(result).get("resourceVersion")) or 0)
            for stale in existing:
                deleted = await self.client.delete(resource_path("resource.k8s.io", "v1", "resourceslices", name=stale), missing_ok=True)
                last_rv = max(last_rv, _rv(_meta(deleted or {}).get("resourceVersion")) or 0)
            log.info(
                "published resource slices", extra={"node": name, "driver": driver.name, "generation": generation, "slices": len(desired)}
            )
        # Slices of drivers this node no longer runs (the profile changed between runs) go away.
        for stale_slice in ours:
            if _spec(stale_slice).get("driver") not in self.drivers:
                deleted = await self.client.delete(
                    resource_path("resource.k8s.io", "v1", "resourceslices", name=_meta(stale_slice)["name"]), missing_ok=True
                )
                last_rv = max(last_rv, _rv(_meta(deleted or {}).get("resourceVersion")) or 0)
        if last_rv:
            self._slices_written[name] = last_rv

    # ---- pods ---------------------------------------------------------------------------------------

    def _pod_path(self, namespace: str, name: str, subresource: str | None = None) -> str:
        return resource_path("", "v1", "pods", namespace, name, subresource)

    async def _sync_pod(self, namespace: str, name: str) -> None:
        """Move one pod along: admit and start it, finish it, or finish its deletion."""
        gone = self._gone.pop((namespace, name), None)
        pod = self.pods.get(namespace, name)
        if gone is not None and (pod is None or _meta(pod).get("uid") != _meta(gone).get("uid")):
            await self._unprepare(gone)
            self._started.pop(_meta(gone).get("uid", ""), None)
            self._written.pop(_meta(gone).get("uid", ""), None)
            self.queue.cancel_delayed(("pod", namespace, name))
        if pod is None:
            return
        node_name = _spec(pod).get("nodeName", "")
        if node_name not in self.node_index:
            return
        node = self.nodes.get("", node_name)
        if node is None:
            self.queue.add_after(("pod", namespace, name), 1.0)
            return
        meta, phase = _meta(pod), _status(pod).get("phase")
        written = self._written.get(meta.get("uid", ""), "")
        if written in ("Running", *pods_mod.TERMINAL_PHASES) and phase in (None, "Pending", "Running"):
            phase = written  # our own newer write, not yet in the cache
        if meta.get("deletionTimestamp"):
            # Graceful deletion: stop the "containers", release the devices, then let the pod go.
            await self._unprepare(pod)
            try:
                await self.client.delete(
                    self._pod_path(namespace, name), grace_period_seconds=0, preconditions={"uid": meta.get("uid", "")}, missing_ok=True
                )
            except ApiError as exc:
                if exc.code != 409:  # 409: a different pod of that name exists now
                    raise
            return
        if phase in pods_mod.TERMINAL_PHASES:
            await self._unprepare(pod)
            return
        if phase == "Running" and (_status(pod).get("podIP") or written == "Running"):
            await self._check_completion(pod)
            return
        await self._admit(pod, node)

    async def _admit(self, pod: Obj, node: Obj) -> None:
        """Admit a pod bound here (resources first, as the kubelet's admission handlers run before
        its DRA manager), then start it once every claim is ready for it."""
        meta = _meta(pod)
        namespace, name, uid = meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", "")
        node_name = _meta(node).get("name", "")
        host_ip = nodes_mod.node_ip(self.node_index[node_name])
        now = now_rfc3339()
        admitted = self._admitted[node_name]
        if uid not in admitted:
            requests = self._requests(pod)
            rejection = resources.check_fit(requests, admitted.values(), resources.node_allocatable(node))
            if rejection is not None:
                await self._reject(pod, rejection, now)
                return
            admitted[uid] = requests
        claims = {c: self.claims.get(namespace, c) for _, c, _ in pods_mod.pod_claim_names(pod) if c}
        admission = self._check_claims(pod, claims, node)
        if not admission.ok and self._written.get(uid) != f"Pending: {admission.message}" and claims:
            # The claim cache may not have the scheduler's write that preceded the binding yet. The
            # kubelet reads claims from the API server, so read them before reporting a problem.
            claims = {c: await self._get_claim(namespace, c) for c in claims}
            admission = self._check_claims(pod, claims, node)
        if not admission.ok:
            waiting = [((s.get("state") or {}).get("waiting") or {}).get("message") for s in _status(pod).get("containerStatuses") or []]
            if admission.message not in waiting and self._written.get(uid) != f"Pending: {admission.message}":
                # Report each new reason once (status + event), not on every re-check.
                status = pods_mod.pending_status(pod, host_ip, admission.message, now, self._report(pod))
                await self.client.patch(self._pod_path(namespace, name, "status"), {"metadata": {"uid": uid}, "status": status})
                await record_event(
                    self.client,
                    {"kind": "Pod", "apiVersion": "v1", **pod},
                    pods_mod.FAILED_PREPARE_REASON,
                    admission.message,
                    "Warning",
                    COMPONENT,
                )
                self._written[uid] = f"Pending: {admission.message}"
                log.info("pod waits for its claims", extra={"pod": f"{namespace}/{name}", "node": node_name, "reason": admission.message})
            return
        if self.gates.enabled("DRAResourceClaimDeviceStatus"):
            for claim_name, claim in admission.claims.items():
                await self._write_claim_devices(namespace, claim_name, lambda c: pods_mod.prepared_devices(c, now, self._attributes), claim)
        pod_ip = self._allocate_ip(node_name, uid)
        if pod_ip is None:
            raise RuntimeError(f"no free pod address on node {node_name}")
        try:
            status = pods_mod.running_status(pod, host_ip, pod_ip, now, self._report(pod))
            await self.client.patch(self._pod_path(namespace, name, "status"), {"metadata": {"uid": uid}, "status": status})
        except ApiError:
            self._release_ip(pod)
            raise
        self._started[uid] = time.time()
        self._written[uid] = "Running"
        log.info("pod running", extra={"pod": f"{namespace}/{name}", "node": node_name, "podIP": pod_ip, "claims": len(admission.claims)})
        seconds = pods_mod.run_seconds(pod)
        if seconds is not None:
            self.queue.add_after(("pod", namespace, name), seconds)

    def _report(self, pod: Obj) -> pods_mod.ResourceReport:
        return pods_mod.resource_report(pod, node_allocatable=self.node_allocatable)

    def _check_claims(self, pod: Obj, claims: dict[str, Obj | None], node: Obj) -> pods_mod.Admission:
        return pods_mod.check_admission(pod, claims, node, self.drivers, reserved_for_workloads=self.gates.enabled("DRAReservedForWorkloads"))

    async def _get_claim(self, namespace: str, name: str) -> Obj | None:
        try:
            return await self.client.get(resource_path("resource.k8s.io", "v1", "resourceclaims", namespace, name))
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    async def _reject(self, pod: Obj, rejection: resources.Rejection, now: str) -> None:
        """Fail a pod the node cannot admit, with upstream's reason, message and Warning event."""
        meta = _meta(pod)
        namespace, name, uid = meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", "")
        status = {"phase": "Failed", "reason": rejection.reason, "message": f"Pod was rejected: {rejection.message}"}
        if not _status(pod).get("startTime"):
            status["startTime"] = now
        await self.client.patch(self._pod_path(namespace, name, "status"), {"metadata": {"uid": uid}, "status": status})
        self._written[uid] = "Failed"
        await record_event(self.client, {"kind": "Pod", "apiVersion": "v1", **pod}, rejection.reason, rejection.message, "Warning", COMPONENT)
        log.info("pod rejected", extra={"pod": f"{namespace}/{name}", "node": _spec(pod).get("nodeName"), "reason": rejection.reason})

    async def _check_completion(self, pod: Obj) -> None:
        """Finish a pod whose simulated run time is over; otherwise come back when it is."""
        seconds = pods_mod.run_seconds(pod)
        if seconds is None:
            return
        meta = _meta(pod)
        started = self._started.get(meta.get("uid", ""))
        if started is None:
            # After a restart only the server's startTime (seconds) is known.
            parsed = parse_time(_status(pod).get("startTime") or "")
            started = parsed.timestamp() if parsed else time.time()
        remaining = started + seconds - time.time()
        key = ("pod", meta.get("namespace", ""), meta.get("name", ""))
        if remaining > 0:
            self.queue.add_after(key, remaining)
            return
        code = pods_mod.exit_code(pod)
        status = pods_mod.terminated_status(pod, code, now_rfc3339())
        await self.client.patch(self._pod_path(key[1], key[2], "status"), {"metadata": {"uid": meta.get("uid", "")}, "status": status})
        self._started.pop(meta.get("uid", ""), None)
        self._written[meta.get("uid", "")] = status["phase"]
        self._admitted[_spec(pod).get("nodeName", "")].pop(meta.get("uid", ""), None)
        log.info("pod finished", extra={"pod": f"{key[1]}/{key[2]}", "phase": status["phase"], "exitCode": code})
        await self._unprepare(pod)

    async def _unprepare(self, pod: Obj) -> None:
        """Remove this node's device entries from the pod's claims, unless another live pod here still uses the claim."""
        meta = _meta(pod)
        namespace, uid, node_name = meta.get("namespace", ""), meta.get("uid", ""), _spec(pod).get("nodeName", "")
        for _, claim_name, _ in pods_mod.pod_claim_names(pod):
            if not claim_name or self.claims.get(namespace, claim_name) is None:
                continue
            if any(self._uses_prepared(other, uid, node_name) for other in self._claim_users.get((namespace, claim_name), ())):
                continue
            await self._write_claim_devices(namespace, claim_name, lambda c: pods_mod.unprepared_devices(c, self.drivers, node_name))

    def _uses_prepared(self, key: PodKey, uid: str, node_name: str) -> bool:
        other = self.pods.get(*key)
        if other is None or _meta(other).get("uid") == uid or _spec(other).get("nodeName") != node_name:
            return False
        running = _status(other).get("phase") == "Running" or self._written.get(_meta(other).get("uid", "")) == "Running"
        return running and not _meta(other).get("deletionTimestamp")

    async def _write_claim_devices(
        self, namespace: str, name: str, compute: Callable[[Obj], list[Obj] | None], claim: Obj | None = None
    ) -> None:
        """PATCH the claim's status.devices to ``compute(claim)``, re-reading the claim on a conflict.

        ``claim``: the claim as last read (default: the cached one); a newer cached copy wins.
        """
        path = resource_path("resource.k8s.io", "v1", "resourceclaims", namespace, name, "status")
        cached = self.claims.get(namespace, name)
        if claim is None or (cached is not None and (_rv(_meta(cached).get("resourceVersion")) or 0) > (_rv(_meta(claim).get("resourceVersion")) or 0)):
            claim = cached
        for _attempt in range(5):
            if claim is None:
                return
            devices = compute(claim)
            if devices is None:
                return
            patch = {"metadata": {"resourceVersion": _meta(claim).get("resourceVersion")}, "status": {"devices": devices or None}}
            try:
                await self.client.patch(path, patch)
                return
            except ApiError as exc:
                if exc.code == 404:
                    return
                if exc.code != 409:
                    raise
            try:
                claim = await self.client.get(resource_path("resource.k8s.io", "v1", "resourceclaims", namespace, name))
            except ApiError as exc:
                if exc.code == 404:
                    return
                raise
        raise RuntimeError(f"could not update status.devices of ResourceClaim {namespace}/{name}: too many conflicts")
