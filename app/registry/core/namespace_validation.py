"""Namespace: validation of spec.finalizers and of the status phase."""

from __future__ import annotations

from app.registry.accessors import as_dict
from app.registry.base import Obj
from app.registry.objectmeta import STANDARD_FINALIZERS, validate_qualified_name
from kube.errors import FieldError, invalid


def validate_namespace_finalizers(namespace: Obj) -> list[FieldError]:
    """spec.finalizers: qualified names, and a name without a domain must be a standard one.
    Upstream reports both at the list's path on create (only /finalize indexes them)."""
    errs: list[FieldError] = []
    spec = as_dict(namespace.get("spec"), "spec", errs)
    finalizers = spec.get("finalizers")
    if finalizers is None:
        return errs
    if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
        return [*errs, invalid("spec.finalizers", finalizers, "must be a list of strings")]
    for finalizer in finalizers:
        errs += validate_qualified_name(finalizer, "spec.finalizers")
        if "/" not in finalizer and finalizer not in STANDARD_FINALIZERS:
            errs.append(invalid("spec.finalizers", finalizer, "name is neither a standard finalizer name nor is it fully qualified"))
    return errs


def validate_namespace_status(namespace: Obj) -> list[FieldError]:
    """status.phase is Active until deletion starts and Terminating after (upstream's path
    spells the field "Phase")."""
    errs: list[FieldError] = []
    status = as_dict(namespace.get("status"), "status", errs)
    metadata = namespace.get("metadata") if isinstance(namespace.get("metadata"), dict) else {}
    assert isinstance(metadata, dict)
    phase = status.get("phase") or ""
    if not metadata.get("deletionTimestamp"):
        if phase != "Active":
            errs.append(invalid("status.Phase", phase, "may only be 'Active' if `deletionTimestamp` is empty"))
    elif phase != "Terminating":
        errs.append(invalid("status.Phase", phase, "may only be 'Terminating' if `deletionTimestamp` is not empty"))
    return errs
