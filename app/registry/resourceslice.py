"""ResourceSlice (resource.k8s.io/v1, cluster-scoped)."""

from __future__ import annotations

from app.registry.base import KindStrategy, PrinterColumn
from app.registry.columns import age_column, dig, name_column


class ResourceSliceStrategy(KindStrategy):
    group = "resource.k8s.io"
    kind = "ResourceSlice"
    plural = "resourceslices"
    singular = "resourceslice"
    namespaced = False
    field_selectors = {
        "spec.nodeName": lambda o: dig(o, "spec", "nodeName", default="") or "",
        "spec.driver": lambda o: dig(o, "spec", "driver", default="") or "",
        "spec.pool.name": lambda o: dig(o, "spec", "pool", "name", default="") or "",
    }
    printer_columns = (
        name_column(),
        PrinterColumn("Node", "string", "The node providing the resources.", lambda o: dig(o, "spec", "nodeName", default="")),
        PrinterColumn("Driver", "string", "The name of the driver which provides the resources.", lambda o: dig(o, "spec", "driver", default="")),
        PrinterColumn("Pool", "string", "The name of the pool which contains the resources.", lambda o: dig(o, "spec", "pool", "name", default="")),
        age_column(),
    )


STRATEGY = ResourceSliceStrategy()
