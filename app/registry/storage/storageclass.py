"""StorageClass (storage.k8s.io/v1, cluster-scoped), served as storage: the scheduler's volume
binding watches it."""

from __future__ import annotations

from app.registry.base import PrinterColumn
from app.registry.columns import age_column, name_column
from app.registry.storageonly import StorageOnlyKind, StorageOnlyStrategy

CLASS = "io.k8s.api.storage.v1.StorageClass"

STRATEGY: StorageOnlyStrategy = StorageOnlyStrategy(
    StorageOnlyKind(
        group="storage.k8s.io", kind="StorageClass", plural="storageclasses", namespaced=False, short_names=("sc",),
        create_example={"provisioner": "example.com/example"},
        printer_columns=(
            name_column(),
            PrinterColumn("Provisioner", "string", "", lambda o: str(o.get("provisioner") or ""), doc=(CLASS, "provisioner")),
            # Unset fields print as the defaults upstream would have stored.
            PrinterColumn("ReclaimPolicy", "string", "", lambda o: str(o.get("reclaimPolicy") or "Delete"), doc=(CLASS, "reclaimPolicy")),
            PrinterColumn("VolumeBindingMode", "string", "", lambda o: str(o.get("volumeBindingMode") or "Immediate"), doc=(CLASS, "volumeBindingMode")),
            PrinterColumn("AllowVolumeExpansion", "string", "", lambda o: o.get("allowVolumeExpansion") is True, doc=(CLASS, "allowVolumeExpansion")),
            age_column(),
        ),
    )
)  # fmt: skip
