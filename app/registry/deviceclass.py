"""DeviceClass (resource.k8s.io/v1, cluster-scoped)."""

from __future__ import annotations

from app.registry.base import KindStrategy
from app.registry.columns import age_column, name_column


class DeviceClassStrategy(KindStrategy):
    group = "resource.k8s.io"
    kind = "DeviceClass"
    plural = "deviceclasses"
    singular = "deviceclass"
    namespaced = False
    printer_columns = (name_column(), age_column())


STRATEGY = DeviceClassStrategy()
