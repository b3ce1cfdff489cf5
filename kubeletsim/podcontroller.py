"""The pod side of the simulated kubelets: admission, device prepare/unprepare, pod lifecycle.

For each pod bound to a simulated node it does what the kubelet does: admit it (resources
first, then its claims, as the kubelet's admission handlers run before its DRA manager),
prepare its claims, start the pod with an address from the node's pod range, finish it when
its simulated run time is over, and on deletion release the devices and let the pod go.

Devices of the node's built-in profile are "prepared" here (the claims' ``status.devices`` are
written as their driver would). Devices of any other driver go to the node's DRA manager,
which calls the driver's registered plugin over gRPC (NodePrepareResources before the pod
starts, NodeUnprepareResources after the last pod using the claim on the node is done); a
failure keeps the pod Pending with the kubelet's event and is retried with back-off. Device
health from the drivers shows in ``allocatedResourcesStatus`` (ResourceHealthStatus). The pure
rules live in ``kubeletsim.pods``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kube.client import KubeClient, record_event, resource_path
from kube.dra.claims import update_device_status
from kube.dra.pods import pod_requests
from kube.errors import ApiError
from kube.features import FeatureGates, Gate
from kube.informer import Informer, resource_version_number
from kube.objects import Obj
from kube.objects import meta as _meta
from kube.objects import spec as _spec
from kube.objects import status as _status
from kube.timeutil import now_rfc3339, parse_time
from kube.workqueue import ExponentialBackoff, WorkQueue
from kubeletsim import nodes as nodes_mod
from kubeletsim import pods as pods_mod
from kubeletsim import resources
from kubeletsim.identities import Identities
from kubeletsim.plugins.checkpoint import Checkpoint
from kubeletsim.plugins.draplugin import PluginStore
from kubeletsim.plugins.health import HealthCache
from kubeletsim.plugins.manager import DRAManager, PrepareError
from kubeletsim.profiles import Profile, render_devices

PodKey = tuple[str, str]

log = logging.getLogger("kubeletsim")

COMPONENT = "kubelet"
# What the kubelet's event (and this simulator's waiting message) says when preparing failed.
FAILED_PREPARE_MESSAGE = "Failed to prepare dynamic resources: {error}"
HEALTH_FEATURE = Gate.ResourceHealthStatus


def _rv(obj: Obj) -> int:
    return resource_version_number(_meta(obj).get("resourceVersion")) or 0


class PodController:
    """Runs the pods bound to the nodes named ``node_names``; ``queue`` holds (namespace, name), ``sync(key)`` moves one pod along."""

    def __init__(
        self,
        client: KubeClient,
        nodes: Informer,
        pods: Informer,
        claims: Informer,
        node_names: Sequence[str] | Mapping[str, int],
        profile: Profile,
        *,
        max_pods: int,
        gates: FeatureGates,
        backoff: ExponentialBackoff,
        identities: Identities | None = None,
        managers: Mapping[str, DRAManager] | None = None,
    ) -> None:
        """``node_names``: the nodes, or the nodes -> their numbers in the whole node range when this
        process runs a shard of it (node and pod addresses derive from the number); ``managers``:
        each node's DRA manager, for the devices of drivers the profile does not simulate (default:
        managers with no plugins, so such devices are never ready)."""
        self.client = client
        self.identities = identities or Identities(client)
        self.nodes = nodes
        self.pods = pods
        self.claims = claims
        self.node_index = dict(node_names) if isinstance(node_names, Mapping) else {name: i for i, name in enumerate(node_names)}
        self.max_pods = max_pods
        self.gates = gates
        # KEP-5517: with the gate, admission counts what claims charge.
        self.node_allocatable = gates.enabled(nodes_mod.NODE_ALLOCATABLE_FEATURE)
        self.drivers = set(profile.driver_names)
        self.managers = dict(managers) if managers is not None else {name: _without_plugins(name, self.drivers) for name in node_names}
        self.health_status = gates.enabled(HEALTH_FEATURE)
        self.queue: WorkQueue[PodKey] = WorkQueue(backoff)
        # (driver, device) -> the device's attributes, reported in claim status.devices.
        self._attributes: dict[tuple[str, str], Obj] = {}
        for name in node_names:
            for driver in profile.drivers:
                for device in render_devices(driver, name):
                    self._attributes[(driver.name, device["name"])] = device.get("attributes") or {}
        # node -> host number -> pod uid, for unique pod IPs.
        self._ips: dict[str, dict[int, str]] = {name: {} for name in node_names}
        # node -> pod uid -> requests of the pods admitted there and not finished (resource admission).
        self._admitted: dict[str, dict[str, resources.Amounts]] = {name: {} for name in node_names}
        # (namespace, claim name) -> pods on our nodes that use the claim.
        self._claim_users: dict[PodKey, set[PodKey]] = {}
        self._gone: dict[PodKey, Obj] = {}
        # pod uid -> key, and node -> keys, of the pods on our nodes (health updates name pods by
        # uid; PodResources lists a node's pods).
        self._keys: dict[str, PodKey] = {}
        self._on_node: dict[str, set[PodKey]] = {name: set() for name in node_names}
        self._started: dict[str, float] = {}
        # pod uid -> the last phase (or "Pending: <message>") this process wrote. The informer
        # may not have seen our own write yet when the pod is processed again; this keeps a
        # stale cache from causing a second start, finish or event.
        self._written: dict[str, str] = {}
        pods.on_add(self._pod_event)
        pods.on_update(lambda _old, new: self._pod_event(new))
        pods.on_delete(self._pod_deleted)
        claims.on_add(self._claim_event)
        claims.on_update(lambda _old, new: self._claim_event(new))
        claims.on_delete(self._claim_event)

    def resync(self) -> None:
        """Re-check every pod on the simulated nodes."""
        for pod in self.pods.list():
            if _spec(pod).get("nodeName") in self.node_index:
                self.queue.add((_meta(pod).get("namespace", ""), _meta(pod).get("name", "")))

    # ---- handlers: only bookkeeping and queueing -----------------------------------------------------

    def _pod_event(self, pod: Obj) -> None:
        key = (_meta(pod).get("namespace", ""), _meta(pod).get("name", ""))
        if _spec(pod).get("nodeName") not in self.node_index:
            return
        self._keys[_meta(pod).get("uid", "")] = key
        self._on_node[_spec(pod).get("nodeName", "")].add(key)
        self._track_ip(pod)
        self._track_admission(pod)
        for _, claim, _ in pods_mod.pod_claim_names(pod):
            if claim:
                self._claim_users.setdefault((key[0], claim), set()).add(key)
        self.queue.add(key)

    def _pod_deleted(self, pod: Obj) -> None:
        key = (_meta(pod).get("namespace", ""), _meta(pod).get("name", ""))
        if _spec(pod).get("nodeName") not in self.node_index:
            return
        self._release_ip(pod)
        self._admitted[_spec(pod).get("nodeName", "")].pop(_meta(pod).get("uid", ""), None)
        if self._keys.get(_meta(pod).get("uid", "")) == key:
            del self._keys[_meta(pod).get("uid", "")]
        self._on_node[_spec(pod).get("nodeName", "")].discard(key)
        for _, claim, _ in pods_mod.pod_claim_names(pod):
            if claim:
                users = self._claim_users.get((key[0], claim))
                if users is not None:
                    users.discard(key)
                    if not users:
                        del self._claim_users[(key[0], claim)]
        # The worker unprepares what the pod left behind (e.g. after a forced deletion).
        self._gone[key] = pod
        self.queue.add(key)

    def _claim_event(self, claim: Obj) -> None:
        for key in self._claim_users.get((_meta(claim).get("namespace", ""), _meta(claim).get("name", "")), ()):
            self.queue.add(key)

    def health_changed(self, pod_uids: set[str]) -> None:
        """The health of devices these pods use changed: report it in their status."""
        for uid in pod_uids:
            key = self._keys.get(uid)
            if key is not None:
                self.queue.add(key)

    # ---- what the node's services ask -------------------------------------------------------------

    def active_pods(self, node: str) -> list[Obj]:
        """The node's pods that are not finished, as PodResources lists them."""
        out = []
        for key in self._on_node.get(node, ()):
            pod = self.pods.get(*key)
            if pod is not None and _status(pod).get("phase") not in pods_mod.TERMINAL_PHASES:
                out.append(pod)
        return sorted(out, key=lambda p: (_meta(p).get("namespace", ""), _meta(p).get("name", "")))

    async def release_orphans(self) -> None:
        """Unprepare the claims the nodes' checkpoints hold for pods that no longer exist (they went
        away while this simulator was down); failures are retried on the next call."""
        for node, manager in self.managers.items():
            for uid, (namespace, claims) in manager.pods_with_claims().items():
                if uid in self._keys:
                    continue
                try:
                    await manager.unprepare_resources(uid, namespace, claims)
                except PrepareError as exc:
                    log.warning("cannot unprepare the claims of a pod that is gone", extra={"node": node, "podUID": uid, "error": str(exc)})

    # ---- pod IPs ----------------------------------------------------------------------------------

    def _host_of(self, node: str, ip: str | None) -> int | None:
        return nodes_mod.pod_host(self.node_index[node], ip, self.max_pods)

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
        index, max_pods = self.node_index[node], self.max_pods
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

    # ---- syncing one pod -----------------------------------------------------------------------------

    def _pod_path(self, namespace: str, name: str, subresource: str | None = None) -> str:
        return resource_path("", "v1", "pods", namespace, name, subresource)

    async def sync(self, key: PodKey) -> bool:
        """Move one pod along: admit and start it, finish it, or finish its deletion. False: try
        again after a back-off (its claims could not be prepared)."""
        namespace, name = key
        gone = self._gone.pop((namespace, name), None)
        pod = self.pods.get(namespace, name)
        if gone is not None and (pod is None or _meta(pod).get("uid") != _meta(gone).get("uid")):
            try:
                await self._unprepare(gone)
            except Exception:
                self._gone.setdefault(key, gone)  # released on the retry
                raise
            self._started.pop(_meta(gone).get("uid", ""), None)
            self._written.pop(_meta(gone).get("uid", ""), None)
            self.queue.cancel_delayed((namespace, name))
        if pod is None:
            return True
        node_name = _spec(pod).get("nodeName", "")
        if node_name not in self.node_index:
            return True
        node = self.nodes.get("", node_name)
        if node is None:
            self.queue.add_after((namespace, name), 1.0)
            return True
        meta, phase = _meta(pod), _status(pod).get("phase")
        written = self._written.get(meta.get("uid", ""), "")
        if written in ("Running", *pods_mod.TERMINAL_PHASES) and phase in (None, "Pending", "Running"):
            phase = written  # our own newer write, not yet in the cache
        if meta.get("deletionTimestamp"):
            # Graceful deletion: stop the "containers", release the devices, then let the pod go.
            await self._unprepare(pod)
            try:
                await self.identities.node(node_name).delete(
                    self._pod_path(namespace, name), grace_period_seconds=0, preconditions={"uid": meta.get("uid", "")}, missing_ok=True
                )
            except ApiError as exc:
                if exc.code != 409:  # 409: a different pod of that name exists now
                    raise
            return True
        if phase in pods_mod.TERMINAL_PHASES:
            await self._unprepare(pod)
            return True
        if phase == "Running" and (_status(pod).get("podIP") or written == "Running"):
            await self._report_health(pod)
            await self._check_completion(pod)
            return True
        return await self._admit(pod, node)

    async def _admit(self, pod: Obj, node: Obj) -> bool:
        """Admit a pod bound here (resources first, as the kubelet's admission handlers run before
        its DRA manager), then start it once every claim is ready for it and prepared. False when
        preparing failed (to be retried after a back-off)."""
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
                return True
            admitted[uid] = requests
        claims = {c: self.claims.get(namespace, c) for _, c, _ in pods_mod.pod_claim_names(pod) if c}
        admission = self._check_claims(pod, claims, node)
        if not admission.ok and self._written.get(uid) != f"Pending: {admission.message}" and claims:
            # The claim cache may not have the scheduler's write that preceded the binding yet. The
            # kubelet reads claims from the API server, so read them before reporting a problem.
            claims = {c: await self._get_claim(namespace, c) for c in claims}
            admission = self._check_claims(pod, claims, node)
        if not admission.ok:
            await self._wait(pod, host_ip, admission.message, now)
            return True  # a change of the claims brings the pod back
        manager = self.managers[node_name]
        try:
            await manager.prepare_resources(pod, admission.claims)
        except PrepareError as exc:
            message = FAILED_PREPARE_MESSAGE.format(error=exc)
            log.error("preparing the pod's claims failed", extra={"pod": f"{namespace}/{name}", "node": node_name, "error": str(exc)})
            await self._wait(pod, host_ip, message, now)
            return False
        if self.gates.enabled(Gate.DRAResourceClaimDeviceStatus):
            for claim_name, claim in admission.claims.items():
                await self._write_claim_devices(
                    node_name, namespace, claim_name, lambda c: pods_mod.prepared_devices(c, now, self._attributes, self.drivers), claim
                )
        pod_ip = self._allocate_ip(node_name, uid)
        if pod_ip is None:
            raise RuntimeError(f"no free pod address on node {node_name}")
        try:
            status = pods_mod.running_status(pod, host_ip, pod_ip, now, self._report(pod))
            if self.health_status:
                status["containerStatuses"] = manager.allocated_resources_status(pod, status["containerStatuses"])
            await self.identities.node(node_name).patch(self._pod_path(namespace, name, "status"), {"metadata": {"uid": uid}, "status": status})
        except ApiError:
            self._release_ip(pod)
            raise
        self._started[uid] = time.time()
        self._written[uid] = "Running"
        log.info("pod running", extra={"pod": f"{namespace}/{name}", "node": node_name, "podIP": pod_ip, "claims": len(admission.claims)})
        seconds = pods_mod.run_seconds(pod)
        if seconds is not None:
            self.queue.add_after((namespace, name), seconds)
        return True

    async def _wait(self, pod: Obj, host_ip: str, message: str, now: str) -> None:
        """Keep the pod Pending, its containers waiting with ``message``, and record the kubelet's
        Warning event: once per new message, not on every re-check."""
        meta = _meta(pod)
        namespace, name, uid = meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", "")
        waiting = [((s.get("state") or {}).get("waiting") or {}).get("message") for s in _status(pod).get("containerStatuses") or []]
        if message in waiting or self._written.get(uid) == f"Pending: {message}":
            return
        kubelet = self.identities.node(_spec(pod).get("nodeName", ""))
        status = pods_mod.pending_status(pod, host_ip, message, now, self._report(pod))
        await kubelet.patch(self._pod_path(namespace, name, "status"), {"metadata": {"uid": uid}, "status": status})
        await record_event(kubelet, {"kind": "Pod", "apiVersion": "v1", **pod}, pods_mod.FAILED_PREPARE_REASON, message, "Warning", COMPONENT)
        self._written[uid] = f"Pending: {message}"
        log.info("pod waits for its claims", extra={"pod": f"{namespace}/{name}", "node": _spec(pod).get("nodeName"), "reason": message})

    async def _report_health(self, pod: Obj) -> None:
        """Bring the containers' ``allocatedResourcesStatus`` in line with the devices' health.

        Only from a cached pod that shows the Running status: right after this process started
        the pod, the watch event of that write brings the pod back here.
        """
        status = _status(pod)
        current = status.get("containerStatuses") or []
        if not self.health_status or status.get("phase") != "Running" or not current:
            return
        meta = _meta(pod)
        node_name = _spec(pod).get("nodeName", "")
        desired = self.managers[node_name].allocated_resources_status(pod, current)
        if desired == current:
            return
        # The resourceVersion guards against writing statuses computed from a stale copy.
        await self.identities.node(node_name).patch(
            self._pod_path(meta.get("namespace", ""), meta.get("name", ""), "status"),
            {"metadata": {"uid": meta.get("uid", ""), "resourceVersion": meta.get("resourceVersion")}, "status": {"containerStatuses": desired}},
        )
        log.info("device health reported", extra={"pod": f"{meta.get('namespace')}/{meta.get('name')}", "node": node_name})

    def _report(self, pod: Obj) -> pods_mod.ResourceReport:
        return pods_mod.resource_report(pod, node_allocatable=self.node_allocatable)

    def _check_claims(self, pod: Obj, claims: dict[str, Obj | None], node: Obj) -> pods_mod.Admission:
        return pods_mod.check_admission(
            pod, claims, node, self.drivers,
            reserved_for_workloads=self.gates.enabled(Gate.DRAReservedForWorkloads),
            pod_group_claims=self.gates.enabled(Gate.DRAWorkloadResourceClaims),
        )  # fmt: skip

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
        kubelet = self.identities.node(_spec(pod).get("nodeName", ""))
        await kubelet.patch(self._pod_path(namespace, name, "status"), {"metadata": {"uid": uid}, "status": status})
        self._written[uid] = "Failed"
        await record_event(kubelet, {"kind": "Pod", "apiVersion": "v1", **pod}, rejection.reason, rejection.message, "Warning", COMPONENT)
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
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        if remaining > 0:
            self.queue.add_after((namespace, name), remaining)
            return
        code = pods_mod.exit_code(pod)
        status = pods_mod.terminated_status(pod, code, now_rfc3339())
        await self.identities.node(_spec(pod).get("nodeName", "")).patch(self._pod_path(namespace, name, "status"), {"metadata": {"uid": meta.get("uid", "")}, "status": status})
        self._started.pop(meta.get("uid", ""), None)
        self._written[meta.get("uid", "")] = status["phase"]
        self._admitted[_spec(pod).get("nodeName", "")].pop(meta.get("uid", ""), None)
        log.info("pod finished", extra={"pod": f"{namespace}/{name}", "phase": status["phase"], "exitCode": code})
        await self._unprepare(pod)

    async def _unprepare(self, pod: Obj) -> None:
        """Release the pod's claims on its node: the node's DRA manager unprepares what drivers
        prepared once no other pod here uses it (PrepareError when a driver fails), and this
        node's built-in device entries leave the claims unless another live pod here still uses them."""
        meta = _meta(pod)
        namespace, uid, node_name = meta.get("namespace", ""), meta.get("uid", ""), _spec(pod).get("nodeName", "")
        claim_names = [c for _, c, _ in pods_mod.pod_claim_names(pod) if c]
        if claim_names:
            await self.managers[node_name].unprepare_resources(uid, namespace, claim_names)
        for _, claim_name, _ in pods_mod.pod_claim_names(pod):
            if not claim_name or self.claims.get(namespace, claim_name) is None:
                continue
            if any(self._uses_prepared(other, uid, node_name) for other in self._claim_users.get((namespace, claim_name), ())):
                continue
            await self._write_claim_devices(node_name, namespace, claim_name, lambda c: pods_mod.unprepared_devices(c, self.drivers, node_name))

    def _uses_prepared(self, key: PodKey, uid: str, node_name: str) -> bool:
        other = self.pods.get(*key)
        if other is None or _meta(other).get("uid") == uid or _spec(other).get("nodeName") != node_name:
            return False
        running = _status(other).get("phase") == "Running" or self._written.get(_meta(other).get("uid", "")) == "Running"
        return running and not _meta(other).get("deletionTimestamp")

    async def _write_claim_devices(
        self, node_name: str, namespace: str, name: str, compute: Callable[[Obj], Sequence[Mapping[str, Any]] | None], claim: Obj | None = None
    ) -> None:
        """PATCH the claim's status.devices to ``compute(claim)`` as the node's drivers, re-reading the claim on a conflict.

        ``claim``: the claim as last read (default: the cached one); a newer cached copy wins.
        """
        cached = self.claims.get(namespace, name)
        if claim is None or (cached is not None and _rv(cached) > _rv(claim)):
            claim = cached
        if claim is not None:
            await update_device_status(await self.identities.driver(node_name), namespace, name, compute, claim)


def _without_plugins(node: str, builtin: set[str]) -> DRAManager:
    """A DRA manager for a node that meets no drivers: its claims of other drivers never get prepared."""
    return DRAManager(node, PluginStore(node, reserved=builtin), Checkpoint(None), HealthCache(), builtin_drivers=builtin)
