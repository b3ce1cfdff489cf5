"""PriorityClass: upstream's pkg/apis/scheduling validation, the system classes, and the Priority
admission rules that resolve a pod's ``spec.priorityClassName`` (plugin/pkg/admission/priority)."""

from __future__ import annotations

from collections.abc import Iterable

from app.registry.accessors import as_str
from app.registry.base import Obj
from app.registry.objectmeta import is_int, validate_immutable
from kube.errors import FieldError, forbidden, invalid, not_supported, required

GROUP = "scheduling.k8s.io"
PLURAL = "priorityclasses"
# Values above this are reserved for the system classes.
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_CRITICAL_PRIORITY = 2 * HIGHEST_USER_DEFINABLE_PRIORITY
SYSTEM_PREFIX = "system-"
# A pod without a class when no class is the global default.
DEFAULT_PRIORITY = 0
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"
PREEMPTION_POLICIES = (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER)


def system_priority_classes() -> list[Obj]:
    """The two classes every cluster has from the start (scheduling/v1 SystemPriorityClasses)."""
    return [
        {
            "apiVersion": f"{GROUP}/v1", "kind": "PriorityClass", "metadata": {"name": "system-node-critical"},
            "value": SYSTEM_CRITICAL_PRIORITY + 1000,
            "description": "Used for system critical pods that must not be moved from their current node.",
        },
        {
            "apiVersion": f"{GROUP}/v1", "kind": "PriorityClass", "metadata": {"name": "system-cluster-critical"},
            "value": SYSTEM_CRITICAL_PRIORITY,
            "description": "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
        },
    ]  # fmt: skip


SYSTEM_CLASS_NAMES = frozenset(c["metadata"]["name"] for c in system_priority_classes())


def _known_system_class_problem(name: str, value: object, global_default: bool) -> str | None:
    """Why a class named with the system prefix is not one of the system classes (None: it is)."""
    for known in system_priority_classes():
        if known["metadata"]["name"] != name:
            continue
        if value != known["value"]:
            return f"value of {name} PriorityClass must be {known['value']}"
        if global_default:
            return f"globalDefault of {name} PriorityClass must be false"
        return None
    return f"{name} is not a known system priority class"


def validate_preemption_policy(value: object, path: str) -> list[FieldError]:
    """ValidatePreemptionPolicy: one of the two policies."""
    if value == "":
        return [required(path)]
    if value not in PREEMPTION_POLICIES:
        return [not_supported(path, value, PREEMPTION_POLICIES)]
    return []


def validate_priority_class(pc: Obj) -> list[FieldError]:
    """ValidatePriorityClass minus ObjectMeta: reserved names and values, the policy."""
    errs: list[FieldError] = []
    name = str(pc["metadata"].get("name") or "")
    value = pc.get("value", 0)
    if not is_int(value):
        errs.append(invalid("value", value, "must be an integer"))
    global_default = pc.get("globalDefault")
    if global_default is not None and not isinstance(global_default, bool):
        errs.append(invalid("globalDefault", global_default, "must be a boolean"))
    as_str(pc.get("description"), "description", errs)
    if name.startswith(SYSTEM_PREFIX):
        problem = _known_system_class_problem(name, value, bool(global_default))
        if problem is not None:
            errs.append(forbidden("metadata.name", f"priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only. error: {problem}"))
    elif is_int(value) and value > HIGHEST_USER_DEFINABLE_PRIORITY:
        errs.append(forbidden("value", f"maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"))
    if pc.get("preemptionPolicy") is not None:
        errs += validate_preemption_policy(pc.get("preemptionPolicy"), "preemptionPolicy")
    return errs


def validate_priority_class_update(new: Obj, old: Obj) -> list[FieldError]:
    """ValidatePriorityClassUpdate: value and preemptionPolicy never change."""
    errs: list[FieldError] = []
    if new.get("value", 0) != old.get("value", 0):
        errs.append(forbidden("value", "may not be changed in an update."))
    errs += validate_immutable(new.get("preemptionPolicy"), old.get("preemptionPolicy"), "preemptionPolicy")
    return errs


def global_default(classes: Iterable[Obj]) -> Obj | None:
    """The global default class; of several (a race), the one with the lowest value, as upstream picks."""
    best: Obj | None = None
    for pc in classes:
        if pc.get("globalDefault") is True and (best is None or int(pc.get("value") or 0) < int(best.get("value") or 0)):
            best = pc
    return best
