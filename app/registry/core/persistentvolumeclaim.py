"""PersistentVolumeClaim (v1, namespaced), served as storage: the scheduler's volume plugins watch it."""

from __future__ import annotations

from app.registry.base import Obj, PrinterColumn
from app.registry.columns import access_modes, age_column, dig, name_column
from app.registry.core.persistentvolume import phase, storage_class
from app.registry.storageonly import StorageOnlyKind, StorageOnlyStrategy

SPEC = "io.k8s.api.core.v1.PersistentVolumeClaimSpec"
STATUS = "io.k8s.api.core.v1.PersistentVolumeClaimStatus"


def _bound(obj: Obj) -> bool:
    return bool(dig(obj, "spec", "volumeName", default=""))


STRATEGY: StorageOnlyStrategy = StorageOnlyStrategy(
    StorageOnlyKind(
        group="", kind="PersistentVolumeClaim", plural="persistentvolumeclaims", namespaced=True, short_names=("pvc",), status=True,
        create_example={"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
        printer_columns=(
            name_column(),
            PrinterColumn("Status", "string", "", phase, doc=(STATUS, "phase")),
            PrinterColumn("Volume", "string", "", lambda o: str(dig(o, "spec", "volumeName", default="") or ""), doc=(SPEC, "volumeName")),
            # Capacity and access modes are the bound volume's: empty until the claim is bound.
            PrinterColumn("Capacity", "string", "", lambda o: str(dig(o, "status", "capacity", "storage", default="0") or "0") if _bound(o) else "", doc=(STATUS, "capacity")),
            PrinterColumn("Access Modes", "string", "", lambda o: access_modes(dig(o, "status", "accessModes")) if _bound(o) else "", doc=(STATUS, "accessModes")),
            PrinterColumn("StorageClass", "string", "StorageClass of the pvc", storage_class),
            PrinterColumn("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc", lambda o: str(dig(o, "spec", "volumeAttributesClassName", default=None) or "<unset>")),
            age_column(),
            PrinterColumn("VolumeMode", "string", "", lambda o: str(dig(o, "spec", "volumeMode", default=None) or "<unset>"), priority=1, doc=(SPEC, "volumeMode")),
        ),
    )
)  # fmt: skip
