"""NodeUnschedulable: a cordoned node (``spec.unschedulable``) takes only pods that tolerate its taint."""

from __future__ import annotations

from kube.dra.tolerations import tolerations_tolerate
from kube.objects import Obj
from schedulers.framework import CycleState, ExplainContext, Reason, Status, reasons_of

NAME = "NodeUnschedulable"
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
KIND = "NodeTaintNotTolerated"  # an explanation's reason kind (a cordon is the unschedulable taint)

_REJECTED = Status.unresolvable(REASON_UNSCHEDULABLE, plugin=NAME)


class NodeUnschedulable:
    """Upstream's NodeUnschedulable filter."""

    name = NAME
    spec_fields = ("unschedulable",)  # all the filter reads of the node: the cycle skips the call for nodes without it

    def filter(self, state: CycleState, pod: Obj, node: Obj) -> Status | None:
        spec = node.get("spec")
        if not spec or not spec.get("unschedulable"):
            return None
        if tolerations_tolerate((pod.get("spec") or {}).get("tolerations") or [], UNSCHEDULABLE_TAINT):
            return None
        return _REJECTED

    def explain(self, state: CycleState, pod: Obj, node: Obj, context: ExplainContext) -> list[Reason]:
        status = self.filter(state, pod, node)
        return reasons_of(status, KIND) if status is not None else []
