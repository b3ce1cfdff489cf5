"""Lease (coordination.k8s.io/v1, namespaced): leader election and node heartbeats."""

from __future__ import annotations

from app.registry.base import KindStrategy, PrinterColumn
from app.registry.columns import age_column, dig, name_column


class LeaseStrategy(KindStrategy):
    group = "coordination.k8s.io"
    kind = "Lease"
    plural = "leases"
    singular = "lease"
    namespaced = True
    tracks_generation = False
    allow_create_on_update = True
    printer_columns = (
        name_column(),
        PrinterColumn("Holder", "string", "The holder of the lease", lambda o: dig(o, "spec", "holderIdentity", default="") or ""),
        age_column(),
    )


STRATEGY = LeaseStrategy()
