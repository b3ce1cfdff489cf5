"""StatefulSet (apps/v1, namespaced), served as storage: the scheduler's default topology spreading
selects pods by the stateful sets that own them."""

from __future__ import annotations

from app.registry.base import Obj, PrinterColumn
from app.registry.columns import age_column, container_columns, dig, name_column
from app.registry.storageonly import EXAMPLE_POD_TEMPLATE, StorageOnlyKind, StorageOnlyStrategy


def _ready(obj: Obj) -> str:
    return f"{dig(obj, 'status', 'readyReplicas', default=0) or 0}/{dig(obj, 'spec', 'replicas', default=0) or 0}"


STRATEGY: StorageOnlyStrategy = StorageOnlyStrategy(
    StorageOnlyKind(
        group="apps", kind="StatefulSet", plural="statefulsets", namespaced=True, short_names=("sts",), categories=("all",),
        status=True, tracks_generation=True,
        # Its pods are named after it, so its name is a DNS label.
        name_rule="label",
        create_example={"spec": {"replicas": 0, "selector": {"matchLabels": {"app": "example"}}, "template": EXAMPLE_POD_TEMPLATE}},
        printer_columns=(
            name_column(),
            PrinterColumn("Ready", "string", "Number of the pod with ready state", _ready),
            age_column(),
            *container_columns(),
        ),
    )
)  # fmt: skip
