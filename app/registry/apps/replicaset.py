"""ReplicaSet (apps/v1, namespaced), served as storage: the scheduler's default topology spreading
selects pods by the replica sets that own them."""

from __future__ import annotations

from app.registry.base import PrinterColumn
from app.registry.columns import dig, format_label_selector, replicas_columns
from app.registry.storageonly import EXAMPLE_POD_TEMPLATE, StorageOnlyKind, StorageOnlyStrategy

SPEC = "io.k8s.api.apps.v1.ReplicaSetSpec"
STATUS = "io.k8s.api.apps.v1.ReplicaSetStatus"

STRATEGY: StorageOnlyStrategy = StorageOnlyStrategy(
    StorageOnlyKind(
        group="apps", kind="ReplicaSet", plural="replicasets", namespaced=True, short_names=("rs",), categories=("all",),
        status=True, tracks_generation=True,
        create_example={"spec": {"replicas": 0, "selector": {"matchLabels": {"app": "example"}}, "template": EXAMPLE_POD_TEMPLATE}},
        printer_columns=replicas_columns(
            SPEC, STATUS, PrinterColumn("Selector", "string", "", lambda o: format_label_selector(dig(o, "spec", "selector")), priority=1, doc=(SPEC, "selector"))
        ),
    )
)  # fmt: skip
