"""Validation of access review specs (upstream's pkg/apis/authorization/validation)."""

from __future__ import annotations

from typing import Any

from kube.errors import FieldError, invalid


def validate_access_spec(spec: Any) -> list[FieldError]:
    spec = spec if isinstance(spec, dict) else {}
    resource, other = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if resource is not None and other is not None:
        return [invalid("spec.nonResourceAttributes", other, "cannot be specified in combination with resourceAttributes")]
    if resource is None and other is None:
        return [invalid("spec.resourceAttributes", None, "exactly one of nonResourceAttributes or resourceAttributes must be specified")]
    return []


def validate_subject_spec(spec: Any) -> list[FieldError]:
    errs = validate_access_spec(spec)
    spec = spec if isinstance(spec, dict) else {}
    if not spec.get("user") and not spec.get("groups"):
        errs.append(invalid("spec.user", spec.get("user") or "", "at least one of user or group must be specified"))
    return errs


def validate_local_subject_spec(spec: Any, namespace: str) -> list[FieldError]:
    """A subject access review confined to ``namespace``: resources there only, no paths."""
    errs = validate_subject_spec(spec)
    spec = spec if isinstance(spec, dict) else {}
    resource, other = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if isinstance(resource, dict) and (resource.get("namespace") or "") != namespace:
        errs.append(invalid("spec.resourceAttributes.namespace", resource.get("namespace") or "", "must match metadata.namespace"))
    if other is not None:
        errs.append(invalid("spec.nonResourceAttributes", other, "disallowed on this kind of request"))
    return errs
