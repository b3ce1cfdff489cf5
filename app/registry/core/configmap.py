"""ConfigMap (v1, namespaced), served as storage: components with delegated authentication read
kube-system's extension-apiserver-authentication at start."""

from __future__ import annotations

from app.registry.base import Obj, PrinterColumn
from app.registry.columns import age_column, name_column
from app.registry.storageonly import StorageOnlyKind, StorageOnlyStrategy


def _entries(obj: Obj) -> int:
    return sum(len(obj[key]) for key in ("data", "binaryData") if isinstance(obj.get(key), dict))


STRATEGY: StorageOnlyStrategy = StorageOnlyStrategy(
    StorageOnlyKind(
        group="", kind="ConfigMap", plural="configmaps", namespaced=True, short_names=("cm",),
        create_example={"data": {"key": "value"}},
        printer_columns=(
            name_column(),
            PrinterColumn("Data", "string", "", _entries, doc=("io.k8s.api.core.v1.ConfigMap", "data")),
            age_column(),
        ),
    )
)  # fmt: skip
