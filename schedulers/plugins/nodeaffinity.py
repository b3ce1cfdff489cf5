"""NodeAffinity: the pod's ``spec.nodeSelector`` and required node affinity against the node's
labels (Filter), and its preferred node affinity terms (Score: the sum of the weights of the terms
a node matches, scaled to 0..100 over the feasible nodes, as upstream's NodeAffinity scores)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kube.labels import node_selector_matches, node_selector_term_matches
from kube.objects import Obj
from schedulers.framework import SKIP, CycleState, ExplainContext, Reason, Status, default_normalize

NAME = "NodeAffinity"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
KIND = "NodeSelectorMismatch"  # an explanation's reason kind
WEIGHT = 2  # upstream's default profile weight
PREFERRED = NAME + "/preferred"  # the cycle state's key of the pod's weighted preferred terms

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


def preferred_terms(pod: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    """The pod's preferred node affinity terms that count: (weight, node selector term), without
    the ones of weight 0 or with no requirement (upstream leaves those out)."""
    node_affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    terms = []
    for term in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        preference = term.get("preference") or {}
        if term.get("weight") and (preference.get("matchExpressions") or preference.get("matchFields")):
            terms.append((int(term["weight"]), preference))
    return terms


class NodeAffinity:
    """Upstream's NodeAffinity: Filter on the required terms and the node selector, Score on the
    preferred terms."""

    name = NAME
    weight = WEIGHT

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

    # --- Score ---

    def may_score(self, state: CycleState, pod: Obj) -> bool:
        terms = preferred_terms(pod)
        if terms:
            state.write(PREFERRED, terms)
        return bool(terms)

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[Obj]) -> Status | None:
        if PREFERRED not in state.data:
            terms = preferred_terms(pod)
            if not terms:
                return SKIP
            state.write(PREFERRED, terms)
        return None

    def score(self, state: CycleState, pod: Obj, node: Obj) -> int:
        """The sum of the weights of the preferred terms ``node`` matches."""
        terms: list[tuple[int, Mapping[str, Any]]] = state.data[PREFERRED]
        return sum(weight for weight, term in terms if node_selector_term_matches(term, node))

    def normalize(self, state: CycleState, names: Sequence[str], scores: list[int]) -> list[int]:
        return default_normalize(scores)
