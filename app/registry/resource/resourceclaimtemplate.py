"""ResourceClaimTemplate (resource.k8s.io/v1, namespaced)."""

from __future__ import annotations

from app.protobuf import same_in_go
from app.registry.base import KindStrategy, Obj, RequestContext
from app.registry.columns import age_column, name_column
from app.registry.resource.claimspec import (
    ClaimOptions,
    admin_access_errors,
    default_claim_spec,
    drop_claim_spec_fields,
    validate_claim_spec,
)
from app.registry.resource.common import TEMPLATE_SPEC_MESSAGE, V1BETA2
from app.registry.resource.resourceclaimtemplate_validation import template_claim_spec, validate_template_metadata
from kube.errors import FieldError, invalid
from kube.gatedfields import CLAIM_SPEC, schema_properties


class ResourceClaimTemplateStrategy(KindStrategy):
    group = "resource.k8s.io"
    older_versions = (V1BETA2,)
    kind = "ResourceClaimTemplate"
    plural = "resourceclaimtemplates"
    singular = "resourceclaimtemplate"
    namespaced = True
    create_example: Obj = {"spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}}
    tracks_generation = False
    extra_schema_properties = schema_properties((CLAIM_SPEC,))
    printer_columns = (name_column(), age_column())

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        default_claim_spec(template_claim_spec(obj))

    def drop_disabled_fields(self, obj: Obj, old: Obj | None, ctx: RequestContext) -> None:
        drop_claim_spec_fields(template_claim_spec(obj), template_claim_spec(old) if old is not None else None, ctx.feature_gates)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        spec = obj.get("spec")
        errs = admin_access_errors(template_claim_spec(obj), "spec.spec", ctx.namespace_labels)
        errs += validate_template_metadata(spec)
        if spec is not None and not isinstance(spec, dict):
            return [*errs, invalid("spec", spec, "must be of type object")]
        return errs + validate_claim_spec(template_claim_spec(obj), "spec.spec", ClaimOptions(ctx.feature_gates))

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        if not same_in_go(new.get("spec"), old.get("spec"), TEMPLATE_SPEC_MESSAGE):
            return [invalid("spec", new.get("spec"), "field is immutable")]
        return []


STRATEGY: ResourceClaimTemplateStrategy = ResourceClaimTemplateStrategy()
