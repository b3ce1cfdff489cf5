"""Node filters that do not involve devices: node selector/affinity, taints, cpu/memory/pods fit.

Each filter returns None when the node fits or upstream's per-node reason string, which the
scheduler counts into the ``0/N nodes are available: ...`` message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from kube.labels import node_selector_matches
from kube.pods import Resources, quantity_fraction
from kube.tolerations import tolerations_tolerate

REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_TOO_MANY_PODS = "Too many pods"
INSUFFICIENT = "Insufficient "  # + the resource name
NOT_HELPFUL = "Preemption is not helpful for scheduling"  # preemption's reason for nodes it does not look at
FIT_RESOURCES = ("cpu", "memory")


def node_allocatable(node: Mapping[str, Any]) -> Resources:
    """``status.allocatable`` (falling back to ``status.capacity``) as fractions."""
    status = node.get("status") or {}
    raw = status.get("allocatable") or status.get("capacity") or {}
    return {name: quantity_fraction(value) for name, value in raw.items()}


def matches_node_selector_and_affinity(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """``spec.nodeSelector`` (all labels equal) and required node affinity (terms ORed)."""
    spec = pod.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    # An empty term list matches nothing, like upstream; a missing one does not constrain.
    return required is None or node_selector_matches(required, node)


def untolerated_taint(pod: Mapping[str, Any], node: Mapping[str, Any]) -> str | None:
    """Upstream TaintToleration/NodeUnschedulable reasons for NoSchedule/NoExecute taints, or None."""
    tolerations: Sequence[Mapping[str, Any]] = (pod.get("spec") or {}).get("tolerations") or []
    node_spec = node.get("spec") or {}
    if node_spec.get("unschedulable"):
        taint = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
        if not tolerations_tolerate(tolerations, taint):
            return REASON_UNSCHEDULABLE
    for taint in node_spec.get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not tolerations_tolerate(tolerations, taint):
            return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"
    return None


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


def fit_error_message(total_nodes: int, reasons: Mapping[str, int], preemption: bool = True) -> str:
    """Upstream's FitError text: ``0/N nodes are available: <count> <reason>, ... .`` (sorted)."""
    if total_nodes == 0:
        return "no nodes available to schedule pods"
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    message = f"0/{total_nodes} nodes are available: {', '.join(parts)}."
    if preemption:
        message += f" preemption: 0/{total_nodes} nodes are available: {total_nodes} {NOT_HELPFUL}."
    return message
