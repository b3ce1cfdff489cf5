"""ResourceClaim (resource.k8s.io/v1, namespaced, status subresource)."""

from __future__ import annotations

from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext
from app.registry.columns import age_column, name_column


def claim_state(claim: Obj) -> str:
    """The State column: deleted / pending / allocated / reserved, comma-joined."""
    states: list[str] = []
    deleting = bool(claim["metadata"].get("deletionTimestamp"))
    status = claim.get("status") or {}
    if deleting:
        states.append("deleted")
    if not status.get("allocation"):
        if not deleting:
            states.append("pending")
    else:
        states.append("allocated")
        if status.get("reservedFor"):
            states.append("reserved")
    return ",".join(states)


class ResourceClaimStrategy(KindStrategy):
    group = "resource.k8s.io"
    kind = "ResourceClaim"
    plural = "resourceclaims"
    singular = "resourceclaim"
    namespaced = True
    subresources = ("status",)
    has_status = True
    printer_columns = (
        name_column(),
        PrinterColumn(
            "State",
            "string",
            "A summary of the current state (allocated, pending, reserved, etc.).",
            claim_state,
        ),
        age_column(),
    )

    def prepare_for_status_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_status_update(new, old, ctx)
        # Upstream discards metadata changes made through /status for claims.
        keep = {k: v for k, v in new["metadata"].items() if k in ("resourceVersion", "managedFields")}
        new["metadata"] = {**old["metadata"], **keep}


STRATEGY = ResourceClaimStrategy()
