"""CSINode (storage.k8s.io/v1, cluster-scoped), served as storage: the scheduler's volume limits
and binding watch it. Since v1.37 it has a status (the drivers' storage health) and upstream
serves csinodes/status."""

from __future__ import annotations

from app.registry.base import PrinterColumn
from app.registry.columns import age_column, dig, name_column
from app.registry.storageonly import StorageOnlyKind, StorageOnlyStrategy

STRATEGY: StorageOnlyStrategy = StorageOnlyStrategy(
    StorageOnlyKind(
        group="storage.k8s.io", kind="CSINode", plural="csinodes", namespaced=False, status=True,
        create_example={"spec": {"drivers": []}},
        printer_columns=(
            name_column(),
            PrinterColumn(
                "Drivers", "integer", "Drivers indicates the number of CSI drivers registered on the node",
                lambda o: len(d) if isinstance(d := dig(o, "spec", "drivers"), list) else 0,
            ),
            age_column(),
        ),
    )
)  # fmt: skip
