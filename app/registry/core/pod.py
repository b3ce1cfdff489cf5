"""Pod (v1, namespaced, status and binding subresources).

Validation covers what the DRA stack and the scheduler rely on (resource claims, scheduling gates,
containers, resources, affinity and topology spread constraints, the spec-immutability rule and
the DRA status lists); volumes, probes' handlers and security contexts are not validated here.
"""

from __future__ import annotations

from app.registry.base import (
    ActionSubresource,
    KindStrategy,
    Obj,
    PrinterColumn,
    RequestContext,
    StatusStrategy,
    StatusSubresource,
)
from app.registry.columns import age_column, dig, name_column
from app.registry.core.pod_validation import validate_pod_create, validate_pod_status_update, validate_pod_update
from app.registry.core.podtemplate import DEFAULT_GRACE_PERIOD_SECONDS, default_pod_spec
from app.registry.scheduling.priorityclass import admit_pod, keep_pod_priority
from kube import errors
from kube.dra.pods import merge_pod_affinity_label_keys, merge_topology_spread_label_keys, qos_class
from kube.errors import FieldError
from kube.features import Gate
from kube.gatedfields import POD, drop_disabled
from kube.timeutil import now_rfc3339

# The PodScheduled condition a pod created with scheduling gates gets (v1.PodReasonSchedulingGated).
SCHEDULING_GATED = "SchedulingGated"
SCHEDULING_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


def pod_ready(pod: Obj) -> str:
    containers = dig(pod, "spec", "containers", default=[]) or []
    statuses = dig(pod, "status", "containerStatuses", default=[]) or []
    ready = sum(1 for s in statuses if s.get("ready"))
    return f"{ready}/{len(containers)}"


def pod_restarts(pod: Obj) -> int:
    return sum(int(s.get("restartCount") or 0) for s in dig(pod, "status", "containerStatuses", default=[]) or [])


def pod_phase_column(pod: Obj) -> str:
    """The STATUS column, following kubectl's printer in its common cases."""
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Pending"
    # As upstream's printPod: a gated pod shows SchedulingGated unless a container state says more.
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == SCHEDULING_GATED:
            reason = SCHEDULING_GATED
    for container in reversed(status.get("containerStatuses") or []):
        state = container.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif state.get("terminated", {}).get("reason"):
            reason = state["terminated"]["reason"]
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return str(reason)


def merges_spread_label_keys(ctx: RequestContext) -> bool:
    """Whether a created pod's spread constraints get their matchLabelKeys merged into their
    selectors (both gates on), which also picks the rule validation holds matchLabelKeys to."""
    gates = ctx.feature_gates
    return gates.enabled(Gate.MatchLabelKeysInPodTopologySpread) and gates.enabled(Gate.MatchLabelKeysInPodTopologySpreadSelectorMerge)


def readiness_gates(pod: Obj) -> str:
    gates = dig(pod, "spec", "readinessGates", default=[]) or []
    if not gates:
        return "<none>"
    conditions = {c.get("type"): c.get("status") for c in dig(pod, "status", "conditions", default=[]) or []}
    ready = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
    return f"{ready}/{len(gates)}"


class PodStrategy(KindStrategy):
    group = ""
    kind = "Pod"
    plural = "pods"
    singular = "pod"
    namespaced = True
    create_example: Obj = {"spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}
    short_names = ("po",)
    categories = ("all",)
    has_status = True
    field_selectors = {
        "spec.nodeName": lambda o: dig(o, "spec", "nodeName", default="") or "",
        "spec.restartPolicy": lambda o: dig(o, "spec", "restartPolicy", default="") or "",
        "spec.schedulerName": lambda o: dig(o, "spec", "schedulerName", default="") or "",
        "spec.serviceAccountName": lambda o: dig(o, "spec", "serviceAccountName", default="") or "",
        "spec.hostNetwork": lambda o: "true" if dig(o, "spec", "hostNetwork") else "false",
        "status.phase": lambda o: dig(o, "status", "phase", default="") or "",
        "status.podIP": lambda o: dig(o, "status", "podIP", default="") or "",
        "status.nominatedNodeName": lambda o: dig(o, "status", "nominatedNodeName", default="") or "",
    }
    printer_columns = (
        name_column(),
        PrinterColumn("Ready", "string", "The aggregate readiness state of this pod for accepting traffic.", pod_ready),
        PrinterColumn("Status", "string", "The aggregate status of the containers in this pod.", pod_phase_column),
        PrinterColumn("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.", pod_restarts),
        age_column(),
        PrinterColumn("IP", "string", "IP address allocated to the pod.", lambda o: dig(o, "status", "podIP", default="") or "<none>", priority=1),
        PrinterColumn("Node", "string", "Name of the Node this pod is assigned to.", lambda o: dig(o, "spec", "nodeName", default="") or "<none>", priority=1),
        PrinterColumn("Nominated Node", "string", "Name of the node where this pod is nominated to run.", lambda o: dig(o, "status", "nominatedNodeName", default="") or "<none>", priority=1),
        PrinterColumn("Readiness Gates", "string", "Pod readiness gates", readiness_gates, priority=1),
    )

    def prepare_for_create(self, obj: Obj, ctx: RequestContext) -> None:
        super().prepare_for_create(obj, ctx)
        # Upstream's mutating admission (Priority) runs before the strategy; nothing here depends on it.
        admit_pod(obj, ctx)
        # MatchLabelKeysInPodAffinity (GA): the terms' label keys become selector requirements with
        # this pod's label values now, so later relabelling does not change whom the terms select.
        merge_pod_affinity_label_keys(obj)
        if merges_spread_label_keys(ctx):
            merge_topology_spread_label_keys(obj)
        status: Obj = {"phase": "Pending", "qosClass": qos_class(obj)}
        if dig(obj, "spec", "schedulingGates"):
            # Upstream's applySchedulingGatedCondition: a gated pod says why it is not scheduled
            # from the start (the scheduler never looks at it, so nobody else would say so).
            status["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": SCHEDULING_GATED,
                    "message": SCHEDULING_GATED_MESSAGE,
                    "lastProbeTime": None,
                    "lastTransitionTime": obj["metadata"].get("creationTimestamp"),
                }
            ]
        obj["status"] = status

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        spec = obj.setdefault("spec", {})
        if not isinstance(spec, dict):
            return  # validation reports the wrong type
        default_pod_spec(spec)
        # Pods only: upstream leaves it out of templates (SetDefaults_Pod, not SetDefaults_PodSpec).
        spec.setdefault("enableServiceLinks", True)

    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_update(new, old, ctx)
        keep_pod_priority(new, old)

    def drop_disabled_fields(self, obj: Obj, old: Obj | None, ctx: RequestContext) -> None:
        drop_disabled(POD, obj, old, ctx.feature_gates)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_pod_create(obj, allow_privileged=ctx.allow_privileged, merged_spread_label_keys=merges_spread_label_keys(ctx))

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_pod_update(new, old, allow_privileged=ctx.allow_privileged, merged_spread_label_keys=merges_spread_label_keys(ctx))

    def delete_grace_period(self, obj: Obj, requested: int | None) -> int:
        # Upstream: a pod that never reached a node, or has finished, goes at once.
        if not dig(obj, "spec", "nodeName") or dig(obj, "status", "phase") in ("Succeeded", "Failed"):
            return 0
        if requested is not None:
            # Upstream's BeforeDelete reads a negative grace period as one second.
            return 1 if requested < 0 else requested
        grace = dig(obj, "spec", "terminationGracePeriodSeconds")
        return DEFAULT_GRACE_PERIOD_SECONDS if grace is None else int(grace)


class PodStatusStrategy(StatusStrategy, PodStrategy):
    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_update(new, old, ctx)
        # The status endpoint may not touch deletion or ownership.
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences"):
            if key in old["metadata"]:
                new["metadata"][key] = old["metadata"][key]
            else:
                new["metadata"].pop(key, None)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_pod_status_update(new, old)


class PodBinding(ActionSubresource):
    """``pods/NAME/binding``: set spec.nodeName once, atomically (what a scheduler does)."""

    name = "binding"
    verbs = ("create",)
    kind = ("", "v1", "Binding")
    answers_status = True

    def check(self, owner: KindStrategy, name: str, body: Obj) -> None:
        metadata = body.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise errors.bad_request("metadata must be an object")
        if metadata.get("name") not in (None, "", name):
            raise errors.bad_request("name in URL does not match name in Binding object")
        target = body.get("target") or {}
        if not isinstance(target, dict):
            raise errors.bad_request("target must be an object")
        errs: list[FieldError] = []
        if target.get("kind") not in (None, "", "Node"):
            errs.append(errors.not_supported("target.kind", target.get("kind"), ["Node", "<empty>"]))
        if not target.get("name"):
            errs.append(errors.required("target.name", ""))
        if errs:
            raise errors.invalid_object("Binding", name, "", errs)

    def preconditions(self, body: Obj) -> tuple[str | None, str | None]:
        metadata = body.get("metadata") or {}
        # An empty uid or resourceVersion in a Binding demands nothing.
        return metadata.get("uid") or None, metadata.get("resourceVersion") or None

    def apply(self, owner: KindStrategy, name: str, body: Obj, obj: Obj) -> Obj:
        meta = obj["metadata"]
        conflict = errors.conflict("pods/binding", name, "", "pods/binding", "")
        spec = obj.setdefault("spec", {})
        if meta.get("deletionTimestamp"):
            conflict.message = f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is being deleted, cannot be assigned to a host'
            raise conflict
        if spec.get("nodeName"):
            conflict.message = f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is already assigned to node "{spec["nodeName"]}"'
            raise conflict
        if spec.get("schedulingGates"):
            conflict.message = f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} has non-empty .spec.schedulingGates'
            raise conflict
        spec["nodeName"] = str(body["target"]["name"])
        annotations = (body.get("metadata") or {}).get("annotations") or {}
        if annotations:
            meta.setdefault("annotations", {}).update(annotations)
        status = obj.setdefault("status", {})
        status.pop("nominatedNodeName", None)
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_rfc3339()})
        status["conditions"] = conditions
        if owner.tracks_generation:
            meta["generation"] = int(meta.get("generation") or 0) + 1
        return obj


STATUS_STRATEGY = PodStatusStrategy()
BINDING = PodBinding()
STRATEGY: PodStrategy = PodStrategy(subresources=(StatusSubresource(STATUS_STRATEGY), BINDING))
