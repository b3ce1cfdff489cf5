"""PodGroup (scheduling.k8s.io/v1beta1, namespaced, status subresource), served with GenericWorkload."""

from __future__ import annotations

from app.registry.base import KindStrategy, Obj, RequestContext, StatusStrategy, StatusSubresource
from app.registry.columns import age_column, name_column
from app.registry.scheduling.podgroup_validation import (
    PROTECTION_FINALIZER,
    default_pod_group_spec,
    validate_pod_group_spec,
    validate_pod_group_status,
    validate_pod_group_update,
)
from app.registry.scheduling.podgroupspec import GROUP, VERSION
from kube.errors import FieldError
from kube.features import Gate
from kube.gatedfields import POD_GROUP, drop_disabled


class PodGroupStrategy(KindStrategy):
    group = GROUP
    version = VERSION
    kind = "PodGroup"
    plural = "podgroups"
    singular = "podgroup"
    namespaced = True
    feature_gate = Gate.GenericWorkload
    has_status = True
    create_example: Obj = {"spec": {"schedulingPolicy": {"basic": {}}}}
    printer_columns = (name_column(), age_column())

    def prepare_for_create(self, obj: Obj, ctx: RequestContext) -> None:
        super().prepare_for_create(obj, ctx)
        finalizers = obj["metadata"].setdefault("finalizers", [])
        if isinstance(finalizers, list) and PROTECTION_FINALIZER not in finalizers:
            finalizers.append(PROTECTION_FINALIZER)

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        default_pod_group_spec(obj.get("spec"))

    def drop_disabled_fields(self, obj: Obj, old: Obj | None, ctx: RequestContext) -> None:
        drop_disabled(POD_GROUP, obj, old, ctx.feature_gates)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_pod_group_spec(obj.get("spec"))

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_pod_group_update(new.get("spec"), old.get("spec"))


class PodGroupStatusStrategy(StatusStrategy, PodGroupStrategy):
    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_pod_group_status(new.get("status"), new.get("spec"))


STATUS_STRATEGY = PodGroupStatusStrategy()
STRATEGY: PodGroupStrategy = PodGroupStrategy(subresources=(StatusSubresource(STATUS_STRATEGY),))
