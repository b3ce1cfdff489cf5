"""The pod side of the simulated kubelet as pure functions: claim admission, device status, pod status.

Nothing here does I/O; ``kubeletsim.simulator`` feeds these functions cached objects and
writes what they return.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import cast

from kube.apitypes import AllocatedDeviceStatus, DeviceRequestAllocationResult, NetworkDeviceData, ResourceClaim
from kube.dra import podgroups
from kube.dra.claims import extended_resource_claim_name
from kube.dra.pods import (
    HUGEPAGES_PREFIX,
    container_claim_amounts,
    pod_level_resources,
    pod_limits,
    pod_requests,
    quantity_fraction,
    resource_list,
)
from kube.labels import node_selector_matches
from kube.objects import Obj

RUN_SECONDS_ANNOTATION = "dra.example.dev/run-seconds"
EXIT_CODE_ANNOTATION = "dra.example.dev/exit-code"
# The event reason upstream's kubelet records when NodePrepareResources cannot run.
FAILED_PREPARE_REASON = "FailedPrepareDynamicResources"
DEVICE_READY_REASON = "DevicePrepared"
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass
class Admission:
    """Whether a pod may start on this node, and the claims it uses when it may."""

    ok: bool
    message: str = ""
    # (namespace-less) claim name -> claim, for every claim the pod uses.
    claims: dict[str, Obj] = field(default_factory=dict)


def pod_claim_names(pod: Obj) -> list[tuple[str, str | None, bool]]:
    """(pod claim name, ResourceClaim name or None when not known yet, created for the pod): the
    pod's claims, then the claim for its extended resources (named after itself)."""
    statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    out: list[tuple[str, str | None, bool]] = []
    for pc in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = pc.get("name", "")
        if pc.get("resourceClaimName"):
            out.append((name, pc["resourceClaimName"], False))
        else:
            out.append((name, (statuses.get(name) or {}).get("resourceClaimName"), True))
    extended = extended_resource_claim_name(pod)
    if extended:
        out.append((extended, extended, True))  # the scheduler's claim for the pod's extended resources
    return out


def _skips(result: DeviceRequestAllocationResult, operation: str) -> bool:
    skip = result.get("skipNodeOperations") or []
    return operation in skip or "*" in skip


def node_results(claim: Obj, operation: str = "NodePrepareResources") -> list[DeviceRequestAllocationResult]:
    """The allocation results this node has to prepare (or unprepare)."""
    allocation = (cast(ResourceClaim, claim).get("status") or {}).get("allocation") or {}
    results = ((allocation.get("devices") or {}).get("results")) or []
    return [r for r in results if not _skips(r, operation)]


def check_admission(
    pod: Obj,
    claims: Mapping[str, Obj | None],
    node: Obj,
    drivers: Collection[str],
    *,
    reserved_for_workloads: bool = False,
    pod_group_claims: bool = False,
) -> Admission:
    """Whether every claim of ``pod`` is ready for it on ``node``, as the kubelet's DRA manager checks.

    ``claims`` maps claim names (in the pod's namespace) to the cached claim or None. A claim
    must exist, be allocated, be reserved for the pod (or, with DRAReservedForWorkloads, for any
    pod; with DRAWorkloadResourceClaims, for the pod's PodGroup) and be allocated for this node;
    devices of the built-in ``drivers`` must be in the node's own pools. Devices of other drivers
    are their plugins' business (the DRA manager).
    """
    meta = pod.get("metadata") or {}
    uid = meta.get("uid")
    node_name = (node.get("metadata") or {}).get("name", "")
    used: dict[str, Obj] = {}
    statuses = {s.get("name") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    for pod_claim, claim_name, from_template in pod_claim_names(pod):
        if claim_name is None:
            if from_template and pod_claim in statuses:
                continue  # the controller decided no claim is needed (resourceClaimName: null)
            return Admission(False, f"waiting for the ResourceClaim of pod claim {pod_claim!r} to be created")
        found = claims.get(claim_name)
        if found is None:
            return Admission(False, f'failed to fetch ResourceClaim {claim_name}: resourceclaim "{claim_name}" not found')
        claim = cast(ResourceClaim, found)  # the informer's JSON, typed from here on (kube/apitypes.pyi)
        owned = any(o.get("uid") == uid for o in (claim.get("metadata") or {}).get("ownerReferences") or [])
        if from_template and not owned and not (pod_group_claims and podgroups.owned_by_pod_group(found, pod)):
            return Admission(False, f"ResourceClaim {claim_name} was not created for the pod")
        allocation = (claim.get("status") or {}).get("allocation")
        if not allocation:
            return Admission(False, f"ResourceClaim {claim_name} is not allocated")
        reserved = any(r.get("uid") == uid for r in (claim.get("status") or {}).get("reservedFor") or [])
        # KEP-5729: a claim reserved for the pod's PodGroup (by name) serves every pod of the group.
        reserved = reserved or (pod_group_claims and podgroups.reserved_for_pod_group(found, pod))
        if not reserved and not (reserved_for_workloads and allocation.get("reservedForAnyPod") is True):
            return Admission(
                False, f"pod {meta.get('name')} is not allowed to use ResourceClaim {claim_name}: it is not reserved for the pod"
            )
        if not node_selector_matches(allocation.get("nodeSelector"), node):
            return Admission(False, f"ResourceClaim {claim_name} is allocated for another node, not {node_name}")
        for result in node_results(found):
            if result.get("driver") in drivers and result.get("pool") != node_name:
                return Admission(
                    False, f"device {result.get('pool')}/{result.get('device')} of ResourceClaim {claim_name} is not on node {node_name}"
                )
        used[claim_name] = found
    return Admission(True, claims=used)


def _device_key(entry: AllocatedDeviceStatus | DeviceRequestAllocationResult) -> tuple[str, str, str, str]:
    return (entry.get("driver", ""), entry.get("pool", ""), entry.get("device", ""), entry.get("shareID") or "")


def prepared_devices(
    claim: Obj, now: str, attributes: Mapping[tuple[str, str], Obj] | None = None, drivers: Collection[str] | None = None
) -> list[AllocatedDeviceStatus] | None:
    """The claim's ``status.devices`` with every device of this node marked Ready, or None if nothing changes.

    ``attributes`` maps (driver, device) to the device's published attributes; network devices
    with ``interfaceName``/``macAddress`` attributes get ``networkData`` like a CNI-style driver reports.
    ``drivers``: only the devices of these drivers (default: all).
    """
    existing: list[AllocatedDeviceStatus] = list((cast(ResourceClaim, claim).get("status") or {}).get("devices") or [])
    by_key = {_device_key(e): e for e in existing}
    changed = False
    for result in node_results(claim):
        if drivers is not None and result.get("driver") not in drivers:
            continue
        key = _device_key(result)
        entry = by_key.get(key)
        if entry is not None and any(c.get("type") == "Ready" and c.get("status") == "True" for c in entry.get("conditions") or []):
            continue
        new: AllocatedDeviceStatus = {"driver": key[0], "pool": key[1], "device": key[2]}
        if key[3]:
            new["shareID"] = key[3]
        new["conditions"] = [
            {
                "type": "Ready",
                "status": "True",
                "reason": DEVICE_READY_REASON,
                "message": "device prepared by kubeletsim",
                "lastTransitionTime": now,
            }
        ]
        attrs = (attributes or {}).get((key[0], key[2])) or {}
        network: NetworkDeviceData = {}
        if isinstance(attrs.get("interfaceName"), dict) and attrs["interfaceName"].get("string"):
            network["interfaceName"] = attrs["interfaceName"]["string"]
        if isinstance(attrs.get("macAddress"), dict) and attrs["macAddress"].get("string"):
            network["hardwareAddress"] = attrs["macAddress"]["string"]
        if network:
            new["networkData"] = network
        if entry is None:
            existing.append(new)
        else:
            existing[existing.index(entry)] = {**entry, **new}
        changed = True
    return existing if changed else None


def attached_devices(
    claim: Obj, drivers: Collection[str], node_name: str, now: str, *, fail: bool = False
) -> list[AllocatedDeviceStatus] | None:
    """The claim's ``status.devices`` with this node's devices that carry binding conditions
    reported as a driver's attachment controller would: every binding condition True, or with
    ``fail`` every binding failure condition True. None when nothing changes."""
    status = cast(ResourceClaim, claim).get("status") or {}
    existing: list[AllocatedDeviceStatus] = list(status.get("devices") or [])
    by_key = {_device_key(e): e for e in existing}
    changed = False
    for result in (((status.get("allocation") or {}).get("devices") or {}).get("results")) or []:
        if result.get("driver") not in drivers or result.get("pool") != node_name or not result.get("bindingConditions"):
            continue
        types = result.get("bindingFailureConditions") if fail else result.get("bindingConditions")
        key = _device_key(result)
        found = by_key.get(key)
        entry: AllocatedDeviceStatus = {**found} if found else {"driver": key[0], "pool": key[1], "device": key[2]}
        if not found and key[3]:
            entry["shareID"] = key[3]
        conditions = {c.get("type"): c for c in entry.get("conditions") or []}
        if all((conditions.get(t) or {}).get("status") == "True" for t in types or []):
            continue
        reason, message = ("AttachFailed", "the simulated driver could not attach the device") if fail else ("Attached", "attached by kubeletsim")
        for t in types or []:
            conditions[t] = {"type": t, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now}
        entry["conditions"] = list(conditions.values())
        by_key[key] = entry
        changed = True
    return list(by_key.values()) if changed else None


def unprepared_devices(claim: Obj, drivers: Collection[str], node_name: str) -> list[AllocatedDeviceStatus] | None:
    """The claim's ``status.devices`` without this node's entries, or None if there are none."""
    existing: list[AllocatedDeviceStatus] = list((cast(ResourceClaim, claim).get("status") or {}).get("devices") or [])
    kept = [e for e in existing if not (e.get("driver") in drivers and e.get("pool") == node_name)]
    return kept if len(kept) != len(existing) else None


# ---- pod status ----------------------------------------------------------------------------------


def _hash(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def container_id(pod: Obj, container: str) -> str:
    """A stable fake containerd ID (the same across simulator restarts)."""
    return f"containerd://{_hash((pod.get('metadata') or {}).get('uid', ''), container)}"


def image_id(image: str) -> str:
    """A stable fake image digest for ``image``."""
    return f"{image.split(':')[0]}@sha256:{_hash(image)}"


def _condition(type_: str, status: str, now: str, reason: str = "", message: str = "") -> Obj:
    cond: Obj = {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": now}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def merge_conditions(old: list[Obj] | None, new: list[Obj]) -> list[Obj]:
    """``new``, keeping an old lastTransitionTime where the condition's status did not change."""
    before = {c.get("type"): c for c in old or []}
    out = []
    for cond in new:
        prev = before.get(cond["type"])
        if prev is not None and prev.get("status") == cond["status"] and prev.get("lastTransitionTime"):
            cond = {**cond, "lastTransitionTime": prev["lastTransitionTime"]}
        out.append(cond)
    return out


def _scheduled(pod: Obj, now: str) -> Obj:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
            return dict(cond)
    return _condition("PodScheduled", "True", now)


def _containers(pod: Obj) -> tuple[list[Obj], list[Obj]]:
    spec = pod.get("spec") or {}
    return list(spec.get("initContainers") or []), list(spec.get("containers") or [])


def _base(pod: Obj, host_ip: str, now: str) -> Obj:
    status = pod.get("status") or {}
    base: Obj = {"hostIP": host_ip, "hostIPs": [{"ip": host_ip}], "startTime": status.get("startTime") or now}
    # The API server owns qosClass (it computes it on create; it is immutable afterwards).
    if status.get("qosClass"):
        base["qosClass"] = status["qosClass"]
    return base


def _running(c: Obj, pod: Obj, started: str) -> Obj:
    image = c.get("image", "")
    return {
        "name": c.get("name", ""),
        "state": {"running": {"startedAt": started}},
        "lastState": {},
        "ready": True,
        "started": True,
        "restartCount": 0,
        "image": image,
        "imageID": image_id(image),
        "containerID": container_id(pod, c.get("name", "")),
    }


def _terminated(c: Obj, pod: Obj, started: str, finished: str, exit_code: int) -> Obj:
    image = c.get("image", "")
    return {
        "name": c.get("name", ""),
        "state": {
            "terminated": {
                "exitCode": exit_code,
                "reason": "Completed" if exit_code == 0 else "Error",
                "startedAt": started,
                "finishedAt": finished,
                "containerID": container_id(pod, c.get("name", "")),
            }
        },
        "lastState": {},
        "ready": False,
        "started": False,
        "restartCount": 0,
        "image": image,
        "imageID": image_id(image),
        "containerID": container_id(pod, c.get("name", "")),
    }


def _requirements(c: Obj, kind: str) -> Obj:
    raw = (c.get("resources") or {}).get(kind)
    return dict(raw) if isinstance(raw, dict) else {}


@dataclass
class ResourceReport:
    """What a kubelet reports about a pod's resources once it admitted the pod (KEP-5517 "Pod Status Updates").

    ``pod``: the pod-level status fields. ``allocatedResources`` is the pod's effective requests
    without the pod overhead: pod-level requests where set, else the containers' requests plus
    everything its claims charge. ``resources`` (the pod cgroup's requests and limits) is reported
    when the pod sets pod-level resources or its claims charge node allocatable resources; its
    limits include the claims' amounts (for resources that have a limit).
    ``allocated`` / ``actual``: per container, ``allocatedResources`` (the spec's requests, never
    anything from claims) and ``resources`` (requests as in the spec; limits = the spec's limit,
    or the pod-level one, plus what the claims the container references charge).
    """

    pod: Obj = field(default_factory=dict)
    allocated: dict[str, Obj] = field(default_factory=dict)
    actual: dict[str, Obj] = field(default_factory=dict)


def resource_report(pod: Obj, *, node_allocatable: bool = True) -> ResourceReport:
    """The resource fields of ``pod``'s status; ``node_allocatable``: DRANodeAllocatableResources is on."""
    report = ResourceReport()
    requests = pod_requests(pod, node_allocatable=node_allocatable, overhead=False)
    if requests:
        report.pod["allocatedResources"] = resource_list(requests)
    uses_claims = node_allocatable and bool((pod.get("status") or {}).get("nodeAllocatableResourceClaimStatuses"))
    pod_level_limits = pod_level_resources(pod, "limits")
    if uses_claims or pod_level_limits or pod_level_resources(pod, "requests"):
        limits = pod_limits(pod, node_allocatable=node_allocatable, overhead=False)
        report.pod["resources"] = {k: v for k, v in (("requests", resource_list(requests)), ("limits", resource_list(limits))) if v}
    init, containers = _containers(pod)
    for c in [*init, *containers]:
        name = c.get("name", "")
        own_requests, own_limits = _requirements(c, "requests"), _requirements(c, "limits")
        if own_requests:
            report.allocated[name] = own_requests
        limits = {k: quantity_fraction(v) for k, v in own_limits.items()}
        for resource, amount in pod_level_limits.items():
            limits.setdefault(resource, amount)
        extra = container_claim_amounts(pod, name) if node_allocatable else {}
        changed = {r for r, amount in extra.items() if amount and (r in limits or r.startswith(HUGEPAGES_PREFIX))}
        for resource in changed:
            limits[resource] = limits.get(resource, quantity_fraction(0)) + extra[resource]
        # The spec's own strings where nothing was added, as the runtime would echo them back.
        reported = dict(own_limits)
        for resource, text in resource_list(limits).items():
            if resource in changed or resource not in own_limits:
                reported[resource] = text
        actual = {k: v for k, v in (("requests", own_requests), ("limits", reported)) if v}
        if actual:
            report.actual[name] = actual
    return report


def _with_resources(status: Obj, report: ResourceReport | None, *, running: bool) -> Obj:
    """Add the report's fields to the container statuses (by name) and the pod status."""
    if report is None:
        return status
    for key in ("initContainerStatuses", "containerStatuses"):
        for entry in status.get(key) or []:
            name = entry.get("name", "")
            if name in report.allocated:
                entry["allocatedResources"] = report.allocated[name]
            if running and name in report.actual:
                entry["resources"] = report.actual[name]
    status.update({k: v for k, v in report.pod.items() if running or k == "allocatedResources"})
    return status


def _is_sidecar(c: Obj) -> bool:
    return c.get("restartPolicy") == "Always"


def pending_status(pod: Obj, host_ip: str, message: str, now: str, report: ResourceReport | None = None) -> Obj:
    """Status of a pod that waits for its resources: Pending, containers ContainerCreating.

    ``report``: the pod was admitted with these resources (allocatedResources are reported).
    """
    init, containers = _containers(pod)
    names = ", ".join(c.get("name", "") for c in containers)

    def waiting(c: Obj) -> Obj:
        return {
            "name": c.get("name", ""),
            "state": {"waiting": {"reason": "ContainerCreating", "message": message}},
            "lastState": {},
            "ready": False,
            "started": False,
            "restartCount": 0,
            "image": c.get("image", ""),
            "imageID": "",
        }

    conditions = [
        _condition("PodReadyToStartContainers", "False", now),
        _condition("Initialized", "False", now, "ContainersNotInitialized") if init else _condition("Initialized", "True", now),
        _condition("Ready", "False", now, "ContainersNotReady", f"containers with unready status: [{names}]"),
        _condition("ContainersReady", "False", now, "ContainersNotReady", f"containers with unready status: [{names}]"),
        _scheduled(pod, now),
    ]
    status: Obj = {
        **_base(pod, host_ip, now),
        "phase": "Pending",
        "conditions": merge_conditions((pod.get("status") or {}).get("conditions"), conditions),
        "containerStatuses": [waiting(c) for c in containers],
    }
    if init:
        status["initContainerStatuses"] = [waiting(c) for c in init]
    return _with_resources(status, report, running=False)


def running_status(pod: Obj, host_ip: str, pod_ip: str, now: str, report: ResourceReport | None = None) -> Obj:
    """Status of a started pod: Running, every container running and ready (with ``report``'s resource fields)."""
    init, containers = _containers(pod)
    conditions = [
        _condition("PodReadyToStartContainers", "True", now),
        _condition("Initialized", "True", now),
        _condition("Ready", "True", now),
        _condition("ContainersReady", "True", now),
        _scheduled(pod, now),
    ]
    status: Obj = {
        **_base(pod, host_ip, now),
        "phase": "Running",
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "conditions": merge_conditions((pod.get("status") or {}).get("conditions"), conditions),
        "containerStatuses": [_running(c, pod, now) for c in containers],
    }
    if init:
        status["initContainerStatuses"] = [
            _running(c, pod, now) if _is_sidecar(c) else {**_terminated(c, pod, now, now, 0), "ready": True} for c in init
        ]
    return _with_resources(status, report, running=True)


def terminated_status(pod: Obj, exit_code: int, now: str) -> Obj:
    """Status of a pod whose containers finished: Succeeded (exit 0) or Failed."""
    init, containers = _containers(pod)
    old = pod.get("status") or {}
    started = {
        s.get("name"): ((s.get("state") or {}).get("running") or {}).get("startedAt") or now for s in old.get("containerStatuses") or []
    }
    reason = "PodCompleted" if exit_code == 0 else "PodFailed"
    conditions = [
        _condition("PodReadyToStartContainers", "False", now),
        _condition("Initialized", "True", now, "PodCompleted" if exit_code == 0 else ""),
        _condition("Ready", "False", now, reason),
        _condition("ContainersReady", "False", now, reason),
        _scheduled(pod, now),
    ]
    status: Obj = {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "conditions": merge_conditions(old.get("conditions"), conditions),
        "containerStatuses": [_terminated(c, pod, started.get(c.get("name"), now), now, exit_code) for c in containers],
    }
    if init:
        status["initContainerStatuses"] = [_terminated(c, pod, now, now, 0) for c in init]
    return status


def run_seconds(pod: Obj) -> float | None:
    """How long the pod's containers run before they exit (annotation), or None for "until deleted"."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(RUN_SECONDS_ANNOTATION)
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None


def exit_code(pod: Obj) -> int:
    """The exit code the containers end with (annotation; default 0)."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(EXIT_CODE_ANNOTATION)
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        return 1
