"""DeviceTaintRule (resource.k8s.io/v1, cluster-scoped, status subresource)."""

from __future__ import annotations

from app.registry.base import (
    Deprecation,
    KindStrategy,
    Obj,
    OlderVersion,
    RequestContext,
    StatusStrategy,
    StatusSubresource,
    reset_metadata_for_status,
)
from app.registry.columns import age_column, name_column
from app.registry.resource.common import default_taint, now_rfc3339
from app.registry.resource.devicetaintrule_validation import validate_taint_rule_spec, validate_taint_rule_status
from kube.errors import FieldError


class DeviceTaintRuleStrategy(KindStrategy):
    group = "resource.k8s.io"
    kind = "DeviceTaintRule"
    plural = "devicetaintrules"
    singular = "devicetaintrule"
    namespaced = False
    # Upstream's registry answers requests in the older versions as it did before v1: an update
    # without a resourceVersion is allowed and a DELETE answers with the deleted object.
    older_versions = tuple(
        OlderVersion(version, allow_unconditional_update=True, return_deleted_object=True, deprecation=deprecation)
        for version, deprecation in (("v1beta2", Deprecation((1, 39), (1, 42))), ("v1alpha3", Deprecation((1, 36), (1, 39))))
    )
    create_example: Obj = {
        "spec": {
            "deviceSelector": {"driver": "gpu.example.com"},
            "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"},
        }
    }
    has_status = True
    # v1 requires a resourceVersion on update (upstream's AllowUnconditionalUpdate is false for v1).
    allow_unconditional_update = False
    return_deleted_object = False
    printer_columns = (name_column(), age_column())

    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_update(new, old, ctx)
        # A changed effect restarts the clock unless the client set timeAdded itself.
        taint = (new.get("spec") or {}).get("taint") if isinstance(new.get("spec"), dict) else None
        old_taint = (old.get("spec") or {}).get("taint") if isinstance(old.get("spec"), dict) else None
        if (
            isinstance(taint, dict)
            and isinstance(old_taint, dict)
            and taint.get("effect") != old_taint.get("effect")
            and taint.get("timeAdded") == old_taint.get("timeAdded")
        ):
            taint["timeAdded"] = now_rfc3339()

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            default_taint(spec.get("taint"))

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_taint_rule_spec(obj.get("spec"), None)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        old_spec = old.get("spec") if isinstance(old.get("spec"), dict) else {}
        return validate_taint_rule_spec(new.get("spec"), old_spec)


class DeviceTaintRuleStatusStrategy(StatusStrategy, DeviceTaintRuleStrategy):
    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_update(new, old, ctx)
        reset_metadata_for_status(new, old)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_taint_rule_status(new.get("status"))


STATUS_STRATEGY = DeviceTaintRuleStatusStrategy()
STRATEGY: DeviceTaintRuleStrategy = DeviceTaintRuleStrategy(subresources=(StatusSubresource(STATUS_STRATEGY),))
