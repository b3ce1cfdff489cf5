"""Deployment (apps/v1, namespaced, status and scale subresources): a ReplicaSet per pod template,
rolled from the old ones to the new one by the Deployment controller (controllers/deployment.py)."""

from __future__ import annotations

from typing import Any

from app.registry.apps.common import EXAMPLE_LABELS, example_template, omit_empty_status_fields, selector_of
from app.registry.apps.deployment_validation import (
    default_deployment_spec,
    validate_deployment_spec,
    validate_deployment_status,
    validate_deployment_update,
)
from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext, ScaleSubresource, StatusStrategy, StatusSubresource
from app.registry.columns import age_column, container_columns, dig, name_column
from app.registry.core.podtemplate import drop_disabled_template_fields
from kube.errors import FieldError

SPEC = "io.k8s.api.apps.v1.DeploymentSpec"
STATUS = "io.k8s.api.apps.v1.DeploymentStatus"


def _count(obj: Obj, *path: str) -> int:
    return int(dig(obj, *path, default=0) or 0)


def selector_cell(obj: Obj) -> str:
    """The selector as upstream's Deployment printer shows it (``<invalid>`` when it cannot be parsed)."""
    selector: Any = dig(obj, "spec", "selector")
    parsed = selector_of(selector) if selector is not None else None
    if selector is not None and parsed is None:
        return "<invalid>"
    return str(parsed) if parsed is not None else ""


class DeploymentStrategy(KindStrategy):
    group = "apps"
    kind = "Deployment"
    plural = "deployments"
    singular = "deployment"
    namespaced = True
    short_names = ("deploy",)
    categories = ("all",)
    has_status = True
    create_example: Obj = {"spec": {"replicas": 0, "selector": {"matchLabels": EXAMPLE_LABELS}, "template": example_template()}}
    printer_columns = (
        name_column(),
        PrinterColumn("Ready", "string", "Number of the pod with ready state", lambda o: f"{_count(o, 'status', 'readyReplicas')}/{_count(o, 'spec', 'replicas')}"),
        PrinterColumn("Up-to-date", "string", "", lambda o: _count(o, "status", "updatedReplicas"), doc=(STATUS, "updatedReplicas")),
        PrinterColumn("Available", "string", "", lambda o: _count(o, "status", "availableReplicas"), doc=(STATUS, "availableReplicas")),
        age_column(),
        *container_columns(),
        PrinterColumn("Selector", "string", "", selector_cell, priority=1, doc=(SPEC, "selector")),
    )

    def prepare_for_create(self, obj: Obj, ctx: RequestContext) -> None:
        super().prepare_for_create(obj, ctx)
        omit_empty_status_fields(self, obj)

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        default_deployment_spec(obj.get("spec"))

    def drop_disabled_fields(self, obj: Obj, old: Obj | None, ctx: RequestContext) -> None:
        drop_disabled_template_fields(dig(obj, "spec", "template"), dig(old, "spec", "template"), ctx.feature_gates)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_deployment_spec(obj.get("spec"), allow_privileged=ctx.allow_privileged)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_deployment_update(new.get("spec"), old.get("spec"), allow_privileged=ctx.allow_privileged)

    def spec_changed(self, new: Obj, old: Obj) -> bool:
        # Annotations move the generation too: the controller copies them to the ReplicaSets.
        return super().spec_changed(new, old) or new["metadata"].get("annotations") != old["metadata"].get("annotations")


class DeploymentStatusStrategy(StatusStrategy, DeploymentStrategy):
    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_update(new, old, ctx)
        omit_empty_status_fields(self, new)
        # Upstream's status strategy also keeps the labels as stored.
        if "labels" in old["metadata"]:
            new["metadata"]["labels"] = old["metadata"]["labels"]
        else:
            new["metadata"].pop("labels", None)

    def spec_changed(self, new: Obj, old: Obj) -> bool:
        return KindStrategy.spec_changed(self, new, old)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_deployment_status(new.get("status"), old.get("status"))

    def reset_fields(self) -> list[tuple[str, ...]]:
        return [*super().reset_fields(), ("metadata", "labels")]


STATUS_STRATEGY = DeploymentStatusStrategy()
STRATEGY: DeploymentStrategy = DeploymentStrategy(subresources=(StatusSubresource(STATUS_STRATEGY), ScaleSubresource()))
