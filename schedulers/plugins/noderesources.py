"""NodeResourcesFit: the pod's cpu, memory, pods and other resources against the node's allocatable.

The pods charged to a node (bound, and assumed while their binding is written) and, for a pod of
lower or equal priority, what preemptors were promised there (nominations) count as used.
Extended resources a DeviceClass serves with devices are left to DynamicResources on nodes that do
not advertise them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, Protocol

from kube.dra.pods import Resources, add_resources, pod_priority, pod_requests, quantity_fraction
from kube.objects import Obj, meta
from schedulers.extended import extended_requests
from schedulers.framework import CycleState, ExplainContext, Reason, Status

NAME = "NodeResourcesFit"
KIND = "NodeResourcesInsufficient"  # an explanation's reason kind
REASON_TOO_MANY_PODS = "Too many pods"
INSUFFICIENT = "Insufficient "  # + the resource name
FIT_RESOURCES = ("cpu", "memory")

# A pod's requests in exact integers (name, numerator, denominator), cheap to compare with a memo.
RequestsKey = tuple[tuple[str, int, int], ...]


def node_allocatable(node: Mapping[str, Any]) -> Resources:
    """``status.allocatable`` (falling back to ``status.capacity``) as fractions."""
    status = node.get("status") or {}
    raw = status.get("allocatable") or status.get("capacity") or {}
    return {name: quantity_fraction(value) for name, value in raw.items()}


def insufficient(requests: Resources, used: Resources, pod_count: int, allocatable: Resources) -> list[str]:
    """NodeResourcesFit reasons (``Insufficient cpu``, ``Too many pods``), empty when the pod fits.

    A node that reports no ``pods`` allocatable is not limited in pod count (nodes created
    without status would otherwise refuse everything); cpu and memory follow upstream: a
    missing value is 0, so only pods without requests fit.
    """
    reasons: list[str] = []
    if "pods" in allocatable and pod_count + 1 > allocatable["pods"]:
        reasons.append(REASON_TOO_MANY_PODS)
    for name, amount in requests.items():
        if amount <= 0 or name == "pods":
            continue
        if name not in FIT_RESOURCES and name not in allocatable:
            continue  # extended resources are out of scope (no device plugins here)
        if used.get(name, Fraction(0)) + amount > allocatable.get(name, Fraction(0)):
            reasons.append(INSUFFICIENT + name)
    return reasons


def resources_may_free(reason: str) -> bool:
    """Whether removing pods from the node can fix this reason (upstream's Unschedulable, as
    opposed to UnschedulableAndUnresolvable): only a shortage of cpu, memory, pods or another resource."""
    return reason == REASON_TOO_MANY_PODS or reason.startswith(INSUFFICIENT)


def served_by_devices(reasons: list[str], extended: Mapping[str, int], allocatable: Resources) -> list[str]:
    """NodeResourcesFit reasons without those for extended resources the node does not advertise:
    devices serve them (the allocator decides)."""
    return [r for r in reasons if not (r.startswith(INSUFFICIENT) and r[len(INSUFFICIENT) :] in extended and not allocatable.get(r[len(INSUFFICIENT) :]))]


class Held(Protocol):
    """What a preemptor holds on a node (the cache's Nomination)."""

    requests: Resources
    allocations: list[Mapping[str, Any]]


class NodeAccounting(Protocol):
    """What this plugin reads of the scheduler's cache."""

    @property
    def features(self) -> Any: ...

    @property
    def nominated_on(self) -> Mapping[str, Any]: ...

    def insufficient(self, name: str, node: Obj, requests: Resources, memo_key: RequestsKey | None = None) -> list[str]: ...

    def allocatable(self, node: Obj) -> Resources: ...

    def node_usage(self, node: str) -> tuple[Resources, int]: ...

    def nominated_for(self, node: str, pod_uid: str, priority: int) -> Sequence[Held]: ...

    def resource_classes(self) -> Mapping[str, str]: ...


class PodFit:
    """What the node filters need from the pod, worked out once per cycle instead of per node."""

    __slots__ = ("extended", "key", "priority", "requests", "uid")

    def __init__(self, pod: Obj, requests: Resources, extended: dict[str, int] | None = None) -> None:
        self.requests = requests
        self.uid: str = meta(pod).get("uid", "")
        self.priority = pod_priority(pod)
        # Exact integers, so comparing with a cached key costs no Fraction arithmetic.
        self.key: RequestsKey = tuple(sorted((k, v.numerator, v.denominator) for k, v in requests.items()))
        self.extended: dict[str, int] = extended or {}  # extended resources some class serves with devices


def pod_fit(state: CycleState) -> PodFit:
    """This plugin's PreFilter result (the pod's requests, priority and uid)."""
    fit: PodFit = state.read(NAME)
    return fit


class NodeResourcesFit:
    """Upstream's NodeResourcesFit filter: every node's free cpu, memory, pod slots and other
    advertised resources, after what is charged to it and what preemptors hold there."""

    name = NAME

    def __init__(self, cache: NodeAccounting) -> None:
        self.cache = cache
        self._statuses: dict[tuple[str, ...], Status] = {}

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        # Claim charges are added per node (they depend on the devices chosen); entries an earlier,
        # failed attempt wrote into the pod status must not count.
        requests = pod_requests(pod, node_allocatable=False)
        extended: dict[str, int] = {}
        if self.cache.features.extended_resource and any("/" in name for name in requests):
            extended = extended_requests(pod, self.cache.resource_classes())
        state.write(NAME, PodFit(pod, requests, extended))
        return None

    def shortages(self, fit: PodFit, node: Obj) -> list[str]:
        """Every reason the node lacks room for the pod (the filter's status has them all, as upstream's)."""
        name: str = node["metadata"]["name"]
        cache = self.cache
        held = cache.nominated_for(name, fit.uid, fit.priority) if name in cache.nominated_on else ()
        if held:
            # Other preemptors' promised cpu, memory and pod slots on this node count as taken.
            used, count = cache.node_usage(name)
            for nomination in held:
                used = add_resources(dict(used), nomination.requests)
            short = insufficient(fit.requests, used, count + len(held), cache.allocatable(node))
        else:
            short = cache.insufficient(name, node, fit.requests, fit.key)
        if short and fit.extended:
            short = served_by_devices(short, fit.extended, cache.allocatable(node))
        return short

    def filter(self, state: CycleState, pod: Obj, node: Obj) -> Status | None:
        fit: PodFit = state.data[NAME]
        name: str = node["metadata"]["name"]
        cache = self.cache
        if name in cache.nominated_on or fit.extended:
            short = self.shortages(fit, node)
        else:
            short = cache.insufficient(name, node, fit.requests, fit.key)
        if not short:
            return None
        key = tuple(short)
        status = self._statuses.get(key)
        if status is None:
            status = self._statuses[key] = Status.unschedulable(*short, plugin=NAME)
        return status

    def explain(self, state: CycleState, pod: Obj, node: Obj, context: ExplainContext) -> list[Reason]:
        fit = pod_fit(state)
        name = meta(node).get("name", "")
        return [Reason(KIND, short, details=self._details(short, name, node, fit.requests)) for short in self.shortages(fit, node)]

    def _details(self, short: str, name: str, node: Obj, requests: Mapping[str, Fraction]) -> list[str]:
        allocatable = self.cache.allocatable(node)
        used, pods = self.cache.node_usage(name)
        if short.startswith(INSUFFICIENT):
            resource = short[len(INSUFFICIENT) :]
            free = allocatable.get(resource, Fraction(0)) - used.get(resource, Fraction(0))
            return [f"requests {_amount(requests.get(resource, Fraction(0)))} {resource}, {_amount(free)} of {_amount(allocatable.get(resource, Fraction(0)))} free"]
        return [f"{pods} pods on the node, it takes {_amount(allocatable.get('pods', Fraction(0)))}"]


def _amount(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):g}"
