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
