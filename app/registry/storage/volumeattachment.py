"""VolumeAttachment (storage.k8s.io/v1, cluster-scoped), served as storage: the scheduler's volume
limits watch it."""

from __future__ import annotations

from app.registry.base import PrinterColumn
from app.registry.columns import age_column, dig, name_column
from app.registry.storageonly import StorageOnlyKind, StorageOnlyStrategy

SPEC = "io.k8s.api.storage.v1.VolumeAttachmentSpec"

STRATEGY: StorageOnlyStrategy = StorageOnlyStrategy(
    StorageOnlyKind(
        group="storage.k8s.io", kind="VolumeAttachment", plural="volumeattachments", namespaced=False, status=True,
        create_example={"spec": {"attacher": "example.com/example", "nodeName": "example", "source": {"persistentVolumeName": "example"}}},
        printer_columns=(
            name_column(),
            PrinterColumn("Attacher", "string", "", lambda o: str(dig(o, "spec", "attacher", default="") or ""), "name", doc=(SPEC, "attacher")),
            PrinterColumn(
                "PV", "string", "", lambda o: str(dig(o, "spec", "source", "persistentVolumeName", default="") or ""),
                doc=("io.k8s.api.storage.v1.VolumeAttachmentSource", "persistentVolumeName"),
            ),
            PrinterColumn("Node", "string", "", lambda o: str(dig(o, "spec", "nodeName", default="") or ""), doc=(SPEC, "nodeName")),
            PrinterColumn("Attached", "boolean", "", lambda o: dig(o, "status", "attached") is True, doc=("io.k8s.api.storage.v1.VolumeAttachmentStatus", "attached")),
            age_column(),
        ),
    )
)  # fmt: skip
