"""NodeAffinity: the pod's ``spec.nodeSelector`` and required node affinity against the node's labels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kube.labels import node_selector_matches
from kube.objects import Obj
from schedulers.framework import SKIP, CycleState, ExplainContext, Reason, Status

NAME = "NodeAffinity"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
KIND = "NodeSelectorMismatch"  # an explanation's reason kind

_REJECTED = Status.unresolvable(REASON_AFFINITY, plugin=NAME)


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


def selector_mismatch(pod: Mapping[str, Any], node: Mapping[str, Any]) -> list[str]:
    """What of the pod's node selection the node's labels do not meet (an explanation's facts)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    details = [
        f"nodeSelector {key}={value}: the node has {labels.get(key, 'no such label')}"
        for key, value in ((pod.get("spec") or {}).get("nodeSelector") or {}).items()
        if labels.get(key) != value
    ]
    required = (((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None and not node_selector_matches(required, node):
        details.append("required node affinity does not match the node's labels")
    return details


class NodeAffinity:
    """Upstream's NodeAffinity filter (its preferred terms are not scored here)."""

    name = NAME

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        spec = pod.get("spec") or {}
        if not spec.get("nodeSelector") and not (spec.get("affinity") or {}).get("nodeAffinity"):
            return SKIP
        return None

    def filter(self, state: CycleState, pod: Obj, node: Obj) -> Status | None:
        return None if matches_node_selector_and_affinity(pod, node) else _REJECTED

    def explain(self, state: CycleState, pod: Obj, node: Obj, context: ExplainContext) -> list[Reason]:
        if matches_node_selector_and_affinity(pod, node):
            return []
        return [Reason(KIND, REASON_AFFINITY, details=selector_mismatch(pod, node))]
