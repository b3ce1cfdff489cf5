"""ReplicaSet (apps/v1, namespaced, status and scale subresources): the pods of one template,
kept at spec.replicas by the ReplicaSet controller (controllers/replicaset.py)."""

from __future__ import annotations

from app.registry.apps.common import EXAMPLE_LABELS, example_template, omit_empty_status_fields
from app.registry.apps.replicaset_validation import (
    default_replica_set_spec,
    validate_replica_set_spec,
    validate_replica_set_status,
    validate_replica_set_update,
)
from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext, ScaleSubresource, StatusStrategy, StatusSubresource
from app.registry.columns import dig, format_label_selector, replicas_columns
from app.registry.core.podtemplate import drop_disabled_template_fields
from kube.errors import FieldError

SPEC = "io.k8s.api.apps.v1.ReplicaSetSpec"
STATUS = "io.k8s.api.apps.v1.ReplicaSetStatus"


class ReplicaSetStrategy(KindStrategy):
    group = "apps"
    kind = "ReplicaSet"
    plural = "replicasets"
    singular = "replicaset"
    namespaced = True
    short_names = ("rs",)
    categories = ("all",)
    has_status = True
    field_selectors = {"status.replicas": lambda o: str(dig(o, "status", "replicas", default=0) or 0)}
    create_example: Obj = {"spec": {"replicas": 0, "selector": {"matchLabels": EXAMPLE_LABELS}, "template": example_template()}}
    printer_columns = replicas_columns(
        SPEC, STATUS, PrinterColumn("Selector", "string", "", lambda o: format_label_selector(dig(o, "spec", "selector")), priority=1, doc=(SPEC, "selector"))
    )

    def prepare_for_create(self, obj: Obj, ctx: RequestContext) -> None:
        super().prepare_for_create(obj, ctx)
        omit_empty_status_fields(self, obj)

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        default_replica_set_spec(obj.get("spec"))

    def drop_disabled_fields(self, obj: Obj, old: Obj | None, ctx: RequestContext) -> None:
        drop_disabled_template_fields(dig(obj, "spec", "template"), dig(old, "spec", "template"), ctx.feature_gates)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_replica_set_spec(obj.get("spec"), allow_privileged=ctx.allow_privileged)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_replica_set_update(new.get("spec"), old.get("spec"), allow_privileged=ctx.allow_privileged)


class ReplicaSetStatusStrategy(StatusStrategy, ReplicaSetStrategy):
    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_update(new, old, ctx)
        omit_empty_status_fields(self, new)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_replica_set_status(new.get("status"))


STATUS_STRATEGY = ReplicaSetStatusStrategy()
STRATEGY: ReplicaSetStrategy = ReplicaSetStrategy(subresources=(StatusSubresource(STATUS_STRATEGY), ScaleSubresource()))
