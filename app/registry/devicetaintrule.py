"""DeviceTaintRule (resource.k8s.io/v1, cluster-scoped, status subresource)."""

from __future__ import annotations

from app.registry.base import KindStrategy, Obj, RequestContext
from app.registry.columns import age_column, name_column


class DeviceTaintRuleStrategy(KindStrategy):
    group = "resource.k8s.io"
    kind = "DeviceTaintRule"
    plural = "devicetaintrules"
    singular = "devicetaintrule"
    namespaced = False
    subresources = ("status",)
    has_status = True
    # v1 requires a resourceVersion on update (upstream's AllowUnconditionalUpdate is false for v1).
    allow_unconditional_update = False
    return_deleted_object = False
    printer_columns = (name_column(), age_column())

    def prepare_for_status_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_status_update(new, old, ctx)
        keep = {k: v for k, v in new["metadata"].items() if k in ("resourceVersion", "managedFields")}
        new["metadata"] = {**old["metadata"], **keep}


STRATEGY = DeviceTaintRuleStrategy()
