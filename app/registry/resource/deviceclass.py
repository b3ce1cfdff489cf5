"""DeviceClass (resource.k8s.io/v1, cluster-scoped)."""

from __future__ import annotations

from app.registry.base import KindStrategy, Obj, RequestContext
from app.registry.columns import age_column, name_column
from app.registry.resource.common import V1BETA2
from app.registry.resource.deviceclass_validation import validate_device_class_spec
from kube.errors import FieldError
from kube.gatedfields import DEVICE_CLASS_SPEC, drop_disabled


class DeviceClassStrategy(KindStrategy):
    group = "resource.k8s.io"
    older_versions = (V1BETA2,)
    kind = "DeviceClass"
    plural = "deviceclasses"
    singular = "deviceclass"
    namespaced = False
    create_example: Obj = {"spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}
    printer_columns = (name_column(), age_column())

    def drop_disabled_fields(self, obj: Obj, old: Obj | None, ctx: RequestContext) -> None:
        drop_disabled(DEVICE_CLASS_SPEC, obj.get("spec"), old.get("spec") if old is not None else None, ctx.feature_gates)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_device_class_spec(obj.get("spec"), None, ctx.feature_gates)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        old_spec = old.get("spec") if isinstance(old.get("spec"), dict) else {}
        return validate_device_class_spec(new.get("spec"), old_spec, ctx.feature_gates)


STRATEGY: DeviceClassStrategy = DeviceClassStrategy()
