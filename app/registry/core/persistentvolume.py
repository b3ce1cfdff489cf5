"""PersistentVolume (v1, cluster-scoped), served as storage: the scheduler's volume plugins watch it."""

from __future__ import annotations

from app.registry.base import Obj, PrinterColumn
from app.registry.columns import access_modes, age_column, dig, name_column
from app.registry.storageonly import StorageOnlyKind, StorageOnlyStrategy

SPEC = "io.k8s.api.core.v1.PersistentVolumeSpec"
STATUS = "io.k8s.api.core.v1.PersistentVolumeStatus"
# The annotation that named a volume's class before spec.storageClassName; it wins when present.
BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"


def storage_class(obj: Obj) -> str:
    """A volume's or claim's class: the beta annotation's, else spec.storageClassName."""
    annotations = obj["metadata"].get("annotations") or {}
    if BETA_STORAGE_CLASS in annotations:
        return str(annotations[BETA_STORAGE_CLASS])
    return str(dig(obj, "spec", "storageClassName", default="") or "")


def phase(obj: Obj) -> str:
    """A volume's or claim's phase, Terminating while it is being deleted."""
    if obj["metadata"].get("deletionTimestamp"):
        return "Terminating"
    return str(dig(obj, "status", "phase", default="") or "")


def _claim(obj: Obj) -> str:
    ref = dig(obj, "spec", "claimRef", default=None)
    return f"{ref.get('namespace') or ''}/{ref.get('name') or ''}" if isinstance(ref, dict) else ""


STRATEGY: StorageOnlyStrategy = StorageOnlyStrategy(
    StorageOnlyKind(
        group="", kind="PersistentVolume", plural="persistentvolumes", namespaced=False, short_names=("pv",), status=True,
        create_example={"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/example"}}},
        printer_columns=(
            name_column(),
            PrinterColumn("Capacity", "string", "", lambda o: str(dig(o, "spec", "capacity", "storage", default="0") or "0"), doc=(SPEC, "capacity")),
            PrinterColumn("Access Modes", "string", "", lambda o: access_modes(dig(o, "spec", "accessModes")), doc=(SPEC, "accessModes")),
            PrinterColumn("Reclaim Policy", "string", "", lambda o: str(dig(o, "spec", "persistentVolumeReclaimPolicy", default="") or ""), doc=(SPEC, "persistentVolumeReclaimPolicy")),
            PrinterColumn("Status", "string", "", phase, doc=(STATUS, "phase")),
            PrinterColumn("Claim", "string", "", _claim, doc=(SPEC, "claimRef")),
            PrinterColumn("StorageClass", "string", "StorageClass of the pv", storage_class),
            PrinterColumn("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv", lambda o: str(dig(o, "spec", "volumeAttributesClassName", default=None) or "<unset>")),
            PrinterColumn("Reason", "string", "", lambda o: str(dig(o, "status", "reason", default="") or ""), doc=(STATUS, "reason")),
            age_column(),
            PrinterColumn("VolumeMode", "string", "", lambda o: str(dig(o, "spec", "volumeMode", default=None) or "<unset>"), priority=1, doc=(SPEC, "volumeMode")),
        ),
    )
)  # fmt: skip
