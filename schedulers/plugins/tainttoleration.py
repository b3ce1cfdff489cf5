"""TaintToleration: the node's NoSchedule and NoExecute taints the pod does not tolerate (Filter),
and its PreferNoSchedule ones (Score: fewer untolerated is better, scaled to 0..100 over the
feasible nodes, as upstream's TaintToleration scores)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kube.dra.tolerations import tolerations_tolerate
from kube.objects import Obj
from schedulers.framework import CycleState, ExplainContext, Reason, Status, default_normalize, reasons_of

NAME = "TaintToleration"
KIND = "NodeTaintNotTolerated"  # an explanation's reason kind
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
PREFER_NO_SCHEDULE = "PreferNoSchedule"
WEIGHT = 3  # upstream's default profile weight
PREFERRED = NAME + "/preferNoSchedule"  # the cycle state's key of the tolerations that count in scoring


def has_soft_taint(node: Mapping[str, Any]) -> bool:
    """Whether the node has a PreferNoSchedule taint (the only ones the score counts)."""
    return any(t.get("effect") == PREFER_NO_SCHEDULE for t in (node.get("spec") or {}).get("taints") or [])


def untolerated_soft_taints(tolerations: Sequence[Mapping[str, Any]], node: Mapping[str, Any]) -> int:
    """How many of the node's PreferNoSchedule taints ``tolerations`` do not tolerate."""
    taints = (node.get("spec") or {}).get("taints") or []
    return sum(1 for t in taints if t.get("effect") == PREFER_NO_SCHEDULE and not tolerations_tolerate(tolerations, t))


class SoftTaintedNodes(Protocol):
    """What the score reads of the cache: whether any node has a PreferNoSchedule taint."""

    def any_soft_tainted_node(self) -> bool: ...


def untolerated_taint(pod: Mapping[str, Any], node: Mapping[str, Any]) -> str | None:
    """Upstream's reason for the first NoSchedule/NoExecute taint the pod does not tolerate, or None."""
    taints = (node.get("spec") or {}).get("taints")
    if not taints:
        return None
    tolerations: Sequence[Mapping[str, Any]] = (pod.get("spec") or {}).get("tolerations") or []
    for taint in taints:
        if taint.get("effect") not in BLOCKING_EFFECTS:
            continue
        if not tolerations_tolerate(tolerations, taint):
            return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"
    return None


class TaintToleration:
    """Upstream's TaintToleration: Filter on NoSchedule and NoExecute taints, Score on
    PreferNoSchedule ones. ``nodes`` (the cache) tells whether any node has one: without, every
    node scores the same and the plugin stays out of the cycle's scoring."""

    name = NAME
    weight = WEIGHT
    spec_fields = ("taints",)  # all the filter reads of the node: the cycle skips the call for nodes without it

    def __init__(self, nodes: SoftTaintedNodes | None = None) -> None:
        self.nodes = nodes
        self._statuses: dict[str, Status] = {}

    def filter(self, state: CycleState, pod: Obj, node: Obj) -> Status | None:
        spec = node.get("spec")
        if not spec or not spec.get("taints"):
            return None
        reason = untolerated_taint(pod, node)
        if reason is None:
            return None
        status = self._statuses.get(reason)
        if status is None:
            status = self._statuses[reason] = Status.unresolvable(reason, plugin=NAME)
        return status

    def explain(self, state: CycleState, pod: Obj, node: Obj, context: ExplainContext) -> list[Reason]:
        status = self.filter(state, pod, node)
        return reasons_of(status, KIND) if status is not None else []

    # --- Score ---

    def may_score(self, state: CycleState, pod: Obj) -> bool:
        return self.nodes is not None and self.nodes.any_soft_tainted_node()

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[Obj]) -> Status | None:
        # Tolerations of any effect, or of PreferNoSchedule, count against PreferNoSchedule taints.
        tolerations = [t for t in (pod.get("spec") or {}).get("tolerations") or [] if t.get("effect") in (None, "", PREFER_NO_SCHEDULE)]
        state.write(PREFERRED, tolerations)
        return None

    def score(self, state: CycleState, pod: Obj, node: Obj) -> int:
        """The node's PreferNoSchedule taints the pod does not tolerate (fewer is better)."""
        return untolerated_soft_taints(state.data[PREFERRED], node)

    def normalize(self, state: CycleState, names: Sequence[str], scores: list[int]) -> list[int]:
        return default_normalize(scores, reverse=True)
