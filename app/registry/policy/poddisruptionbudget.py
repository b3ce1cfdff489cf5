"""PodDisruptionBudget (policy/v1, namespaced), served as storage: upstream's kube-scheduler
watches them (its preemption prefers victims whose budgets allow their eviction); this project's
scheduler does not read them yet."""

from __future__ import annotations

from typing import Any

from app.registry.base import PrinterColumn
from app.registry.columns import age_column, dig, name_column
from app.registry.storageonly import StorageOnlyKind, StorageOnlyStrategy


def _int_or_string(value: Any) -> str:
    """An IntOrString budget as upstream prints it, N/A when it is unset."""
    return "N/A" if value is None else str(value)


STRATEGY: StorageOnlyStrategy = StorageOnlyStrategy(
    StorageOnlyKind(
        group="policy", kind="PodDisruptionBudget", plural="poddisruptionbudgets", namespaced=True, short_names=("pdb",),
        status=True, tracks_generation=True,
        create_example={"spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "example"}}}},
        printer_columns=(
            name_column(),
            PrinterColumn("Min Available", "string", "The minimum number of pods that must be available.", lambda o: _int_or_string(dig(o, "spec", "minAvailable"))),
            PrinterColumn("Max Unavailable", "string", "The maximum number of pods that may be unavailable.", lambda o: _int_or_string(dig(o, "spec", "maxUnavailable"))),
            PrinterColumn("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time.", lambda o: int(dig(o, "status", "disruptionsAllowed", default=0) or 0)),
            age_column(),
        ),
    )
)  # fmt: skip
