"""ResourceClaim (resource.k8s.io/v1, namespaced, status subresource)."""

from __future__ import annotations

from typing import cast

from app.protobuf import same_in_go
from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext, StatusStrategy, StatusSubresource, reset_metadata_for_status
from app.registry.columns import age_column, name_column
from app.registry.resource.claimspec import (
    ClaimOptions,
    admin_access_errors,
    default_claim_spec,
    drop_claim_spec_fields,
    validate_claim_spec,
)
from app.registry.resource.common import CLAIM_SPEC_MESSAGE, V1BETA2
from app.registry.resource.resourceclaim_authorization import granular_status_errors
from app.registry.resource.resourceclaim_validation import (
    admin_access_status_errors,
    prune_stale_device_status,
    validate_claim_status,
)
from kube.apitypes import ResourceClaim
from kube.errors import FieldError, invalid
from kube.gatedfields import CLAIM_SPEC, RESOURCE_CLAIM, drop_disabled, schema_properties


def claim_state(claim: Obj) -> str:
    """The State column: deleted / pending / allocated / reserved, comma-joined."""
    states: list[str] = []
    typed = cast(ResourceClaim, claim)  # a stored claim: validated, so as the types say
    deleting = bool(typed["metadata"].get("deletionTimestamp"))
    status = typed.get("status") or {}
    if deleting:
        states.append("deleted")
    if not status.get("allocation"):
        if not deleting:
            states.append("pending")
    else:
        states.append("allocated")
        if status.get("reservedFor"):
            states.append("reserved")
    return ",".join(states)


class ResourceClaimStrategy(KindStrategy):
    group = "resource.k8s.io"
    older_versions = (V1BETA2,)
    kind = "ResourceClaim"
    plural = "resourceclaims"
    singular = "resourceclaim"
    namespaced = True
    create_example: Obj = {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}
    has_status = True
    extra_schema_properties = schema_properties((CLAIM_SPEC, RESOURCE_CLAIM))
    printer_columns = (
        name_column(),
        PrinterColumn(
            "State",
            "string",
            "A summary of the current state (allocated, pending, reserved, etc.).",
            claim_state,
        ),
        age_column(),
    )

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        default_claim_spec(obj.get("spec"))

    def drop_disabled_fields(self, obj: Obj, old: Obj | None, ctx: RequestContext) -> None:
        gates = ctx.feature_gates
        drop_claim_spec_fields(obj.get("spec"), old.get("spec") if old is not None else None, gates)
        drop_disabled(RESOURCE_CLAIM, obj, old, gates)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        spec = obj.get("spec")
        errs = admin_access_errors(spec, "spec", ctx.namespace_labels)
        return errs + validate_claim_spec(spec, "spec", ClaimOptions(ctx.feature_gates))

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        # The spec is immutable; upstream reports only that, nothing else about the spec, and
        # (its declarative immutable rule, authoritative since v1.37) without the value: null.
        if not same_in_go(new.get("spec"), old.get("spec"), CLAIM_SPEC_MESSAGE):
            return [invalid("spec", None, "field is immutable")]
        return []


class ResourceClaimStatusStrategy(StatusStrategy, ResourceClaimStrategy):
    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_update(new, old, ctx)
        # Upstream discards metadata changes made through /status for claims.
        reset_metadata_for_status(new, old)
        # Status entries of devices this update deallocates go with them (before the drop rules,
        # which is equivalent: the drops only remove whole fields).
        prune_stale_device_status(new, old, ctx.feature_gates)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = admin_access_status_errors(new, old, ctx.namespace_labels)
        errs += validate_claim_status(new, old)
        return errs + granular_status_errors(new, old, ctx)


STATUS_STRATEGY = ResourceClaimStatusStrategy()
STRATEGY: ResourceClaimStrategy = ResourceClaimStrategy(subresources=(StatusSubresource(STATUS_STRATEGY),))
