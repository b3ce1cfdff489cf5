"""StatefulSet (apps/v1, namespaced, status and scale subresources): pods with stable names and
per-pod claims, created in order by the StatefulSet controller (controllers/statefulset.py)."""

from __future__ import annotations

from app.registry.apps.common import EXAMPLE_LABELS, example_template, omit_empty_status_fields
from app.registry.apps.statefulset_validation import (
    default_stateful_set_spec,
    validate_stateful_set_spec,
    validate_stateful_set_status,
    validate_stateful_set_update,
)
from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext, ScaleSubresource, StatusStrategy, StatusSubresource
from app.registry.columns import age_column, container_columns, dig, name_column
from app.registry.core.podtemplate import drop_disabled_template_fields
from kube.errors import FieldError


def _ready(obj: Obj) -> str:
    return f"{dig(obj, 'status', 'readyReplicas', default=0) or 0}/{dig(obj, 'spec', 'replicas', default=0) or 0}"


class StatefulSetStrategy(KindStrategy):
    group = "apps"
    kind = "StatefulSet"
    plural = "statefulsets"
    singular = "statefulset"
    namespaced = True
    short_names = ("sts",)
    categories = ("all",)
    has_status = True
    # Its pods are named after it, so its name is a DNS label.
    name_rule = "label"
    create_example: Obj = {"spec": {"replicas": 0, "selector": {"matchLabels": EXAMPLE_LABELS}, "template": example_template()}}
    printer_columns = (
        name_column(),
        PrinterColumn("Ready", "string", "Number of the pod with ready state", _ready),
        age_column(),
        *container_columns(),
    )

    def prepare_for_create(self, obj: Obj, ctx: RequestContext) -> None:
        super().prepare_for_create(obj, ctx)
        omit_empty_status_fields(self, obj)

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        default_stateful_set_spec(obj.get("spec"))

    def drop_disabled_fields(self, obj: Obj, old: Obj | None, ctx: RequestContext) -> None:
        drop_disabled_template_fields(dig(obj, "spec", "template"), dig(old, "spec", "template"), ctx.feature_gates)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_stateful_set_spec(obj.get("spec"), allow_privileged=ctx.allow_privileged)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_stateful_set_update(new.get("spec"), old.get("spec"), allow_privileged=ctx.allow_privileged)


class StatefulSetStatusStrategy(StatusStrategy, StatefulSetStrategy):
    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_update(new, old, ctx)
        omit_empty_status_fields(self, new)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_stateful_set_status(new.get("status"), old.get("status"))


STATUS_STRATEGY = StatefulSetStatusStrategy()
STRATEGY: StatefulSetStrategy = StatefulSetStrategy(subresources=(StatusSubresource(STATUS_STRATEGY), ScaleSubresource()))
