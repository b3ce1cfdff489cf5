"""ResourceClaimTemplate: the template's own rules (its metadata); its spec.spec is a
ResourceClaimSpec, validated, defaulted and dropped by app.registry.resource.claimspec."""

from __future__ import annotations

from typing import Any

from app.registry.base import Obj
from kube.errors import FieldError, forbidden, invalid
from kube.labels import label_key_errors, label_value_errors


def _claim_spec(obj: Obj | None) -> Any:
    spec = obj.get("spec") if isinstance(obj, dict) else None
    return spec.get("spec") if isinstance(spec, dict) else None


def _template_meta_errors(spec: Any) -> list[FieldError]:
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
            errs += [invalid(f"{path}.labels", k, m) for m in label_key_errors(k)]
            if isinstance(v, str):
                errs += [invalid(f"{path}.labels", v, m) for m in label_value_errors(v)]
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        for k in annotations:
            errs += [invalid(f"{path}.annotations", k, m) for m in label_key_errors(k.lower())]
    return errs
