"""ResourcePoolStatusRequest (resource.k8s.io/v1alpha3 only, cluster-scoped, status subresource):
a one-time question about the pools of a driver, which a controller answers in the status. Served
only when v1alpha3 is enabled (--runtime-config) and the DRAResourcePoolStatus gate is on."""

from __future__ import annotations

from app.registry.base import KindStrategy, Obj, RequestContext, StatusStrategy, StatusSubresource, reset_metadata_for_status
from app.registry.columns import age_column, name_column
from app.registry.resource.resourcepoolstatusrequest_validation import (
    default_request_spec,
    validate_request_spec,
    validate_request_spec_update,
    validate_request_status,
)
from kube.errors import FieldError
from kube.features import Gate
from kube.gatedfields import POOL_STATUS_REQUEST_SPEC, drop_disabled


class ResourcePoolStatusRequestStrategy(KindStrategy):
    group = "resource.k8s.io"
    version = "v1alpha3"
    kind = "ResourcePoolStatusRequest"
    plural = "resourcepoolstatusrequests"
    singular = "resourcepoolstatusrequest"
    namespaced = False
    feature_gate = Gate.DRAResourcePoolStatus
    create_example: Obj = {"spec": {"driver": "gpu.example.com"}}
    has_status = True
    tracks_generation = False
    allow_unconditional_update = False
    printer_columns = (name_column(), age_column())

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        default_request_spec(obj.get("spec"))

    def drop_disabled_fields(self, obj: Obj, old: Obj | None, ctx: RequestContext) -> None:
        drop_disabled(POOL_STATUS_REQUEST_SPEC, obj.get("spec"), old.get("spec") if old is not None else None, ctx.feature_gates)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_request_spec(obj.get("spec"))

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_request_spec_update(new.get("spec"), old.get("spec"))


class ResourcePoolStatusRequestStatusStrategy(StatusStrategy, ResourcePoolStatusRequestStrategy):
    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_update(new, old, ctx)
        reset_metadata_for_status(new, old)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_request_status(new.get("status"), old.get("status"))


STATUS_STRATEGY = ResourcePoolStatusRequestStatusStrategy()
STRATEGY: ResourcePoolStatusRequestStrategy = ResourcePoolStatusRequestStrategy(subresources=(StatusSubresource(STATUS_STRATEGY),))
