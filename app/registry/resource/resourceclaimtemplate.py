"""ResourceClaimTemplate (resource.k8s.io/v1, namespaced)."""

from __future__ import annotations

from typing import Any

from app.registry.base import KindStrategy, Obj, RequestContext
from app.registry.columns import age_column, name_column
from app.registry.resource import validation as rv
from kube.errors import FieldError, forbidden, invalid
from kube.labels import label_key_errors, label_value_errors


def _claim_spec(obj: Obj | None) -> Any:
    spec = obj.get("spec") if isinstance(obj, dict) else None
    return spec.get("spec") if isinstance(spec, dict) else None


def _template_meta_errors(spec: Any) -> list[FieldError]:
    """spec.metadata of a template: only labels and annotations may be set."""
    meta = spec.get("metadata") if isinstance(spec, dict) else None
    if meta is None:
        return []
    path = "spec.metadata"
    if not isinstance(meta, dict):
        return [invalid(path, meta, "must be of type object")]
    errs: list[FieldError] = []
    for key in meta:
        if key not in ("labels", "annotations"):
            errs.append(forbidden(f"{path}.{key}", "cannot be set for a template"))
    labels = meta.get("labels")
    if isinstance(labels, dict):
        for k, v in labels.items():
            errs += [invalid(f"{path}.labels", k, m) for m in label_key_errors(k)]
            if isinstance(v, str):
                errs += [invalid(f"{path}.labels", v, m) for m in label_value_errors(v)]
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        for k in annotations:
            errs += [invalid(f"{path}.annotations", k, m) for m in label_key_errors(k.lower())]
    return errs


class ResourceClaimTemplateStrategy(KindStrategy):
    group = "resource.k8s.io"
    kind = "ResourceClaimTemplate"
    plural = "resourceclaimtemplates"
    singular = "resourceclaimtemplate"
    namespaced = True
    create_example: Obj = {"spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}}
    tracks_generation = False
    printer_columns = (name_column(), age_column())

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        rv.default_claim_spec(_claim_spec(obj))

    def drop_disabled_fields(self, obj: Obj, old: Obj | None, ctx: RequestContext) -> None:
        rv.drop_claim_spec_fields(_claim_spec(obj), _claim_spec(old) if old is not None else None, ctx.feature_gates)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        spec = obj.get("spec")
        errs = rv.admin_access_errors(_claim_spec(obj), "spec.spec", ctx.namespace_labels)
        errs += _template_meta_errors(spec)
        if spec is not None and not isinstance(spec, dict):
            return [*errs, invalid("spec", spec, "must be of type object")]
        return errs + rv.validate_claim_spec(_claim_spec(obj), "spec.spec", rv.ClaimOptions(ctx.feature_gates))

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        if new.get("spec") != old.get("spec"):
            return [invalid("spec", new.get("spec"), "field is immutable")]
        return []


STRATEGY = ResourceClaimTemplateStrategy()
