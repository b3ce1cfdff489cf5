"""TaintToleration: the node's NoSchedule and NoExecute taints the pod does not tolerate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kube.objects import Obj
from kube.tolerations import tolerations_tolerate
from schedulers.framework import CycleState, ExplainContext, Reason, Status, reasons_of

NAME = "TaintToleration"
KIND = "NodeTaintNotTolerated"  # an explanation's reason kind
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


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
    """Upstream's TaintToleration filter (PreferNoSchedule taints are not scored here)."""

    name = NAME
    spec_fields = ("taints",)  # all the filter reads of the node: the cycle skips the call for nodes without it

    def __init__(self) -> None:
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
