"""Lease (coordination.k8s.io/v1, namespaced): leader election and node heartbeats."""

from __future__ import annotations

from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext
from app.registry.columns import age_column, dig, name_column
from app.registry.coordination.lease_validation import validate_lease_spec
from kube.errors import FieldError


class LeaseStrategy(KindStrategy):
    group = "coordination.k8s.io"
    kind = "Lease"
    plural = "leases"
    singular = "lease"
    namespaced = True
    create_example: Obj = {"spec": {"holderIdentity": "example", "leaseDurationSeconds": 15}}
    tracks_generation = False
    allow_create_on_update = True
    printer_columns = (
        name_column(),
        PrinterColumn("Holder", "string", "The holder of the lease", lambda o: dig(o, "spec", "holderIdentity", default="") or ""),
        age_column(),
    )
    # coordination validation uses apimachinery's ObjectMeta rules, without core's extra
    # "standard finalizer name or fully qualified" check.
    object_meta_kube_finalizers = False

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_lease_spec(obj)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_lease_spec(new)


STRATEGY: LeaseStrategy = LeaseStrategy()
