"""ResourceSlice (resource.k8s.io/v1, cluster-scoped)."""

from __future__ import annotations

from typing import cast

from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext
from app.registry.columns import age_column, dig, name_column
from app.registry.resource.common import V1BETA2
from app.registry.resource.resourceslice_validation import (
    default_slice_spec,
    uppercase_driver_warning,
    validate_slice_spec,
)
from kube.apitypes import ResourceSliceSpec
from kube.errors import FieldError
from kube.gatedfields import SLICE_SPEC, drop_disabled


def _spec(obj: Obj) -> ResourceSliceSpec:
    """A stored (so validated) slice's spec, typed."""
    spec = obj.get("spec")
    return cast(ResourceSliceSpec, spec) if isinstance(spec, dict) else {}


class ResourceSliceStrategy(KindStrategy):
    group = "resource.k8s.io"
    older_versions = (V1BETA2,)
    kind = "ResourceSlice"
    plural = "resourceslices"
    singular = "resourceslice"
    namespaced = False
    create_example: Obj = {
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": "example", "generation": 1, "resourceSliceCount": 1},
            "allNodes": True,
            "devices": [{"name": "gpu-0"}],
        }
    }
    field_selector_error_names_kind = True
    field_selectors = {
        "spec.nodeName": lambda o: _spec(o).get("nodeName") or "",
        "spec.driver": lambda o: _spec(o).get("driver") or "",
        "spec.pool.name": lambda o: (_spec(o).get("pool") or {}).get("name") or "",
    }
    printer_columns = (
        name_column(),
        PrinterColumn("Node", "string", "The node providing the resources.", lambda o: dig(o, "spec", "nodeName", default="")),
        PrinterColumn("Driver", "string", "The name of the driver which provides the resources.", lambda o: dig(o, "spec", "driver", default="")),
        PrinterColumn("Pool", "string", "The name of the pool which contains the resources.", lambda o: dig(o, "spec", "pool", "name", default="")),
        age_column(),
    )

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        default_slice_spec(obj.get("spec"))

    def drop_disabled_fields(self, obj: Obj, old: Obj | None, ctx: RequestContext) -> None:
        drop_disabled(SLICE_SPEC, obj.get("spec"), old.get("spec") if old is not None else None, ctx.feature_gates)

    def _warn(self, obj: Obj, ctx: RequestContext) -> None:
        warning = uppercase_driver_warning(obj.get("spec"))
        if warning:
            ctx.warnings.append(warning)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        self._warn(obj, ctx)
        return validate_slice_spec(obj.get("spec"), None, ctx.feature_gates)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        self._warn(new, ctx)
        old_spec = old.get("spec") if isinstance(old.get("spec"), dict) else {}
        return validate_slice_spec(new.get("spec"), old_spec, ctx.feature_gates)


STRATEGY: ResourceSliceStrategy = ResourceSliceStrategy()
