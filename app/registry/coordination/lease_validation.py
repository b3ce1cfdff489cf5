"""Lease: upstream's pkg/apis/coordination/validation rules for the spec."""

from __future__ import annotations

from app.registry.accessors import as_dict, as_str
from app.registry.base import Obj
from app.registry.objectmeta import IS_NEGATIVE, is_int, validate_qualified_name
from kube.errors import FieldError, forbidden, invalid, not_supported

LEASE_STRATEGIES = ("OldestEmulationVersion",)


def validate_lease_spec(lease: Obj) -> list[FieldError]:
    """ValidateLeaseSpec: positive duration, non-negative transitions, strategy, preferredHolder."""
    errs: list[FieldError] = []
    spec = as_dict(lease.get("spec"), "spec", errs)
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and (not is_int(duration) or duration <= 0):
        errs.append(invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if transitions is not None and (not is_int(transitions) or transitions < 0):
        errs.append(invalid("spec.leaseTransitions", transitions, IS_NEGATIVE))
    strategy = spec.get("strategy")
    if strategy is not None:
        text = as_str(strategy, "spec.strategy", errs)
        # Upstream appends "strategy" to a path that already ends in it; kept for parity.
        if "/" not in text:
            if text not in LEASE_STRATEGIES:
                errs.append(not_supported("spec.strategy.strategy", text, LEASE_STRATEGIES))
        else:
            errs += validate_qualified_name(text, "spec.strategy.strategy")
    for key in ("holderIdentity", "preferredHolder", "acquireTime", "renewTime"):
        as_str(spec.get(key), f"spec.{key}", errs)
    if spec.get("preferredHolder") and not strategy:
        errs.append(forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined"))
    return errs
