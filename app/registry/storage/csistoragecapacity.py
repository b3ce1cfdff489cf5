"""CSIStorageCapacity (storage.k8s.io/v1, namespaced), served as storage: the scheduler's volume
binding watches it."""

from __future__ import annotations

from app.registry.base import PrinterColumn
from app.registry.columns import name_column
from app.registry.storageonly import StorageOnlyKind, StorageOnlyStrategy

CAPACITY = "io.k8s.api.storage.v1.CSIStorageCapacity"

STRATEGY: StorageOnlyStrategy = StorageOnlyStrategy(
    StorageOnlyKind(
        group="storage.k8s.io", kind="CSIStorageCapacity", plural="csistoragecapacities", namespaced=True,
        create_example={"storageClassName": "example"},
        printer_columns=(
            name_column(),
            PrinterColumn("StorageClassName", "string", "", lambda o: str(o.get("storageClassName") or ""), doc=(CAPACITY, "storageClassName")),
            PrinterColumn("Capacity", "string", "", lambda o: str(o["capacity"]) if o.get("capacity") is not None else "<unset>", doc=(CAPACITY, "capacity")),
        ),
    )
)  # fmt: skip
