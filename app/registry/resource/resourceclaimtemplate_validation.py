"""ResourceClaimTemplate: the template's own rules (its metadata); its spec.spec is a
ResourceClaimSpec, validated, defaulted and dropped by app.registry.resource.claimspec."""

from __future__ import annotations

from typing import Any

from app.registry.base import Obj
from app.registry.objectmeta import validate_label_key, validate_label_value
from kube.errors import FieldError, forbidden, invalid


def template_claim_spec(obj: Obj | None) -> Any:
    """The ResourceClaimSpec a template stamps out (its spec.spec), None when it has none."""
    spec = obj.get("spec") if isinstance(obj, dict) else None
    return spec.get("spec") if isinstance(spec, dict) else None


def validate_template_metadata(spec: Any) -> list[FieldError]:
    """spec.metadata of a template: only labels and annotations may be set."""
    meta = spec.get("metadata") if isinstance(spec, dict) else None
    if meta is None:
        return []
    path = "spec.metadata"
    if not isinstance(meta, dict):
        return [invalid(path, meta, "must be of type object")]
    errs: list[FieldError] = []
    for key in meta:
        if key not in ("labels", "annotations"):
            errs.append(forbidden(f"{path}.{key}", "cannot be set for a template"))
    labels = meta.get("labels")
    if isinstance(labels, dict):
        for k, v in labels.items():
            errs += validate_label_key(k, f"{path}.labels")
            if isinstance(v, str):
                errs += validate_label_value(v, f"{path}.labels")
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        for k in annotations:
            errs += validate_label_key(k.lower(), f"{path}.annotations")
    return errs
