"""The kubelet's resource admission of a pod (cpu, memory, ephemeral-storage, pods), as pure functions.

Upstream's kubelet admits a pod bound to its node only when the pod's requests fit into the
node's allocatable minus the requests of the pods it already admitted (lifecycle/predicate.go,
which runs the scheduler's NodeResourcesFit check); otherwise the pod fails with reason
``OutOf<resource>`` and the message of InsufficientResourceError. A pod's requests come from
the one rule the scheduler uses too, ``kube.dra.pods.pod_requests`` (component-helpers'
PodRequests: containers, init containers and sidecars, pod-level requests, pod overhead, and the
node allocatable resources its claims charge, KEP-5517).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kube.dra.pods import Resources, quantity_fraction

Amounts = Resources

CPU, MEMORY, EPHEMERAL_STORAGE, PODS = "cpu", "memory", "ephemeral-storage", "pods"
# The resources NodeResourcesFit always checks, in its order; others only when the node has them.
BASIC = (CPU, MEMORY, EPHEMERAL_STORAGE)


@dataclass(frozen=True)
class Rejection:
    """Why the kubelet refuses a pod: the pod's status.reason and upstream's message (without "Pod was rejected: ")."""

    reason: str
    message: str


def _add(total: Amounts, more: Mapping[str, Any]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Fraction(0)) + (value if isinstance(value, Fraction) else quantity_fraction(value))


def node_allocatable(node: Mapping[str, Any], extra: Mapping[str, Fraction] | None = None) -> Amounts:
    """The node's ``status.allocatable`` (``capacity`` when unset), plus ``extra``."""
    status = node.get("status") or {}
    allocatable: Amounts = {}
    _add(allocatable, status.get("allocatable") or status.get("capacity") or {})
    if extra:
        _add(allocatable, extra)
    return allocatable


def _scaled(name: str, value: Fraction) -> int:
    """Upstream compares cpu in millicores and everything else in whole units, both rounded up."""
    return math.ceil(value * 1000) if name == CPU else math.ceil(value)


def _insufficient(name: str, requested: int, used: int, capacity: int) -> Rejection:
    return Rejection(
        f"OutOf{name}", f"Node didn't have enough resource: {name}, requested: {requested}, used: {used}, capacity: {capacity}"
    )


def check_fit(requests: Mapping[str, Fraction], admitted: Iterable[Mapping[str, Fraction]], allocatable: Mapping[str, Fraction]) -> Rejection | None:
    """None when a pod with ``requests`` fits beside the ``admitted`` pods' requests, else the first failure.

    The order and the numbers are NodeResourcesFit's: the pod count first, then cpu (millicores),
    memory and ephemeral-storage (bytes), then any other resource the node reports. Resources the
    node does not report at all (extended resources of other nodes) are ignored, as the kubelet does.
    """
    admitted = list(admitted)
    if PODS in allocatable:
        capacity = _scaled(PODS, allocatable[PODS])
        if len(admitted) + 1 > capacity:
            return _insufficient(PODS, 1, len(admitted), capacity)
    wanted = {name: _scaled(name, value) for name, value in requests.items() if name != PODS}
    if not any(wanted.values()):
        return None
    others = sorted(name for name in wanted if name not in BASIC and name in allocatable)
    for name in (*BASIC, *others):
        amount = wanted.get(name, 0)
        if amount <= 0:
            continue
        capacity = _scaled(name, allocatable.get(name, Fraction(0)))
        # Summed per pod after rounding, as upstream's NodeInfo adds each pod's scaled requests.
        used = sum(_scaled(name, pod.get(name, Fraction(0))) for pod in admitted)
        if amount > capacity - used:
            return _insufficient(name, amount, used, capacity)
    return None
