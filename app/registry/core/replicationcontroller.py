"""ReplicationController (v1, namespaced), served as storage: the scheduler's default topology
spreading selects pods by the controllers that own them."""

from __future__ import annotations

from app.registry.base import PrinterColumn
from app.registry.columns import dig, format_labels, replicas_columns
from app.registry.storageonly import EXAMPLE_POD_TEMPLATE, StorageOnlyKind, StorageOnlyStrategy

SPEC = "io.k8s.api.core.v1.ReplicationControllerSpec"
STATUS = "io.k8s.api.core.v1.ReplicationControllerStatus"


STRATEGY: StorageOnlyStrategy = StorageOnlyStrategy(
    StorageOnlyKind(
        group="", kind="ReplicationController", plural="replicationcontrollers", namespaced=True, short_names=("rc",),
        categories=("all",), status=True, tracks_generation=True,
        create_example={"spec": {"replicas": 0, "selector": {"app": "example"}, "template": EXAMPLE_POD_TEMPLATE}},
        printer_columns=replicas_columns(
            SPEC, STATUS, PrinterColumn("Selector", "string", "", lambda o: format_labels(dig(o, "spec", "selector")), priority=1, doc=(SPEC, "selector"))
        ),
    )
)  # fmt: skip
