"""Workload (scheduling.k8s.io/v1beta1, namespaced, no status), served with GenericWorkload."""

from __future__ import annotations

from app.registry.base import KindStrategy, Obj, RequestContext
from app.registry.columns import age_column, name_column
from app.registry.scheduling.podgroupspec import GROUP, VERSION
from app.registry.scheduling.workload_validation import (
    validate_workload_spec,
    validate_workload_update,
)
from kube.errors import FieldError
from kube.features import Gate
from kube.gatedfields import WORKLOAD_SPEC, drop_disabled


class WorkloadStrategy(KindStrategy):
    group = GROUP
    version = VERSION
    kind = "Workload"
    plural = "workloads"
    singular = "workload"
    namespaced = True
    feature_gate = Gate.GenericWorkload
    create_example: Obj = {"spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"basic": {}}}]}}
    printer_columns = (name_column(), age_column())

    def drop_disabled_fields(self, obj: Obj, old: Obj | None, ctx: RequestContext) -> None:
        drop_disabled(WORKLOAD_SPEC, obj.get("spec"), (old or {}).get("spec"), ctx.feature_gates)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_workload_spec(obj.get("spec"))

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_workload_update(new.get("spec"), old.get("spec"))


STRATEGY: WorkloadStrategy = WorkloadStrategy()
