"""PriorityClass (scheduling.k8s.io/v1, cluster-scoped): a name for a pod priority.

The two system classes exist from the start (the server creates them) and cannot be deleted.
Upstream's Priority admission plugin lives here too, as two rules: at most one class may be the
global default, and a new pod's ``spec.priorityClassName`` (or the global default) is resolved
into ``spec.priority`` and ``spec.preemptionPolicy`` (:func:`admit_pod`).
"""

from __future__ import annotations

from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext
from app.registry.columns import age_column, dig, name_column
from app.registry.scheduling.priorityclass_validation import (
    DEFAULT_PRIORITY,
    GROUP,
    PLURAL,
    PREEMPT_LOWER_PRIORITY,
    SYSTEM_CLASS_NAMES,
    global_default,
    validate_priority_class,
    validate_priority_class_update,
)
from kube.errors import ApiError, FieldError, forbidden_object

QUALIFIED = f"{PLURAL}.{GROUP}"


def _classes(ctx: RequestContext) -> list[Obj]:
    return ctx.lookup_all(GROUP, PLURAL) if ctx.lookup_all is not None else []


class PriorityClassStrategy(KindStrategy):
    group = GROUP
    kind = "PriorityClass"
    plural = PLURAL
    singular = "priorityclass"
    short_names = ("pc",)
    namespaced = False
    spec_fields = ("value", "globalDefault", "description", "preemptionPolicy")
    create_example: Obj = {"value": 1000, "description": "an example priority"}
    printer_columns = (
        name_column(),
        PrinterColumn(
            "Value", "integer",
            "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec.",
            lambda o: o.get("value", 0),
        ),
        PrinterColumn(
            "Global-Default", "boolean",
            "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. "
            "Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, "
            "the smallest value of such global default PriorityClasses will be used as the default priority.",
            lambda o: bool(o.get("globalDefault")),
        ),
        age_column(),
        PrinterColumn(
            "PreemptionPolicy", "string",
            "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.",
            lambda o: dig(o, "preemptionPolicy", default="") or "",
        ),
    )  # fmt: skip

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        if obj.get("preemptionPolicy") is None:
            obj["preemptionPolicy"] = PREEMPT_LOWER_PRIORITY

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = validate_priority_class(obj)
        if not errs:
            self._check_single_default(obj, ctx)
        return errs

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = validate_priority_class(new) + validate_priority_class_update(new, old)
        if not errs:
            self._check_single_default(new, ctx)
        return errs

    @staticmethod
    def _check_single_default(pc: Obj, ctx: RequestContext) -> None:
        """The Priority admission plugin's rule: one global default at a time."""
        if pc.get("globalDefault") is not True:
            return
        name = pc["metadata"].get("name", "")
        existing = global_default(_classes(ctx))
        if existing is not None and existing["metadata"].get("name") != name:
            why = f"PriorityClass {existing['metadata'].get('name')} is already marked as default. Only one default can exist"
            raise forbidden_object(QUALIFIED, name, GROUP, PLURAL, why)

    def check_delete(self, obj: Obj) -> None:
        name = obj["metadata"].get("name", "")
        if name in SYSTEM_CLASS_NAMES:
            raise forbidden_object(QUALIFIED, name, GROUP, PLURAL, "this is a system priority class and cannot be deleted")


def admit_pod(pod: Obj, ctx: RequestContext) -> None:
    """The Priority admission plugin on pod create: resolve the class (or the global default) into
    ``spec.priority`` and ``spec.preemptionPolicy``; a pod may not name a priority or policy other
    than the class's. Raises the plugin's 403."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return  # validation reports the missing spec
    meta = pod.get("metadata") or {}
    # Admission names an object by its name, else by its generateName.
    name = str(meta.get("name") or meta.get("generateName") or "")

    def refuse(why: str) -> ApiError:
        return forbidden_object("pods", name, "", "pods", why)

    class_name = spec.get("priorityClassName")
    policy: str | None
    if not class_name:
        default_class = global_default(_classes(ctx))
        if default_class is not None:
            spec["priorityClassName"] = default_class["metadata"]["name"]
            priority, policy = int(default_class.get("value") or 0), default_class.get("preemptionPolicy")
        else:
            priority, policy = DEFAULT_PRIORITY, PREEMPT_LOWER_PRIORITY
    else:
        found = ctx.lookup(GROUP, PLURAL, "", str(class_name)) if ctx.lookup is not None else None
        if found is None:
            raise refuse(f"no PriorityClass with name {class_name} was found")
        priority, policy = int(found.get("value") or 0), found.get("preemptionPolicy")
    given = spec.get("priority")
    if given is not None and given != priority:
        raise refuse(
            f"the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
        )
    spec["priority"] = priority
    if policy is not None:
        given_policy = spec.get("preemptionPolicy")
        if given_policy is not None and given_policy != policy:
            raise refuse(
                f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
            )
        spec["preemptionPolicy"] = policy


def keep_pod_priority(new: Obj, old: Obj) -> None:
    """The Priority admission plugin on pod update: an update that leaves out the priority keeps it."""
    new_spec, old_spec = new.get("spec"), old.get("spec")
    if not isinstance(new_spec, dict) or not isinstance(old_spec, dict):
        return
    for key in ("priority", "preemptionPolicy"):
        if new_spec.get(key) is None and old_spec.get(key) is not None:
            new_spec[key] = old_spec[key]


STRATEGY: PriorityClassStrategy = PriorityClassStrategy()
