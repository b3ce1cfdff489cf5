"""PodGroup (scheduling.k8s.io/v1beta1): validation, defaults and drop rules of spec and status."""

from __future__ import annotations

from typing import Any

from app.registry.accessors import Errs, dict_entries, get_dict, get_list, get_str, type_error
from app.registry.common import validate_conditions
from app.registry.objectmeta import validate_immutable
from app.registry.scheduling.podgroupspec import (
    MAX_RESOURCE_CLAIMS,
    disabled_by_gate,
    validate_group_fields,
    validate_group_fields_update,
    validate_long_name,
    validate_required_name,
)
from kube.errors import invalid, required, too_many

# Stamped on every PodGroup at creation (upstream's PodGroupProtection admission); the claim
# controller removes it once no active pod names the group.
PROTECTION_FINALIZER = "scheduling.k8s.io/podgroup-protection"


def default_pod_group_spec(spec: Any) -> None:
    if isinstance(spec, dict) and spec.get("disruptionMode") is None:
        spec["disruptionMode"] = {"single": {}}


def validate_pod_group_spec(spec: Any) -> Errs:
    if spec is None:
        return [required("spec")]
    if not isinstance(spec, dict):
        return [type_error("spec", spec, "object")]
    errs: Errs = []
    if spec.get("parentCompositePodGroupName") is not None:
        errs.append(disabled_by_gate("spec.parentCompositePodGroupName", "CompositePodGroup"))
    ref = get_dict(spec, "workloadRef", "spec", errs)
    if ref is not None:
        validate_required_name(ref, "workloadName", "spec.workloadRef", False, errs)
        validate_required_name(ref, "templateName", "spec.workloadRef", True, errs)
    validate_group_fields(spec, "spec", errs)
    return errs


def validate_pod_group_update(new: Any, old: Any) -> Errs:
    errs = validate_pod_group_spec(new)
    new_spec = new if isinstance(new, dict) else {}
    old_spec = old if isinstance(old, dict) else {}
    errs.extend(validate_immutable(new_spec.get("workloadRef"), old_spec.get("workloadRef"), "spec.workloadRef"))
    errs.extend(validate_group_fields_update(new_spec, old_spec, "spec"))
    return errs


def validate_pod_group_status(status: Any, spec: Any) -> Errs:
    if status is None:
        return []
    if not isinstance(status, dict):
        return [type_error("status", status, "object")]
    errs: Errs = []
    conditions = get_list(status, "conditions", "status", errs)
    if conditions is not None:
        errs.extend(validate_conditions(conditions, "status.conditions"))
    entries = get_list(status, "resourceClaimStatuses", "status", errs)
    if entries is None:
        return errs
    path = "status.resourceClaimStatuses"
    if len(entries) > MAX_RESOURCE_CLAIMS:
        errs.append(too_many(path, len(entries), MAX_RESOURCE_CLAIMS))
    claims = spec.get("resourceClaims") if isinstance(spec, dict) else None
    names = {c.get("name") for c in claims if isinstance(c, dict)} if isinstance(claims, list) else set()
    for _, entry, epath in dict_entries(entries, path, errs):
        name = get_str(entry, "name", epath, errs)
        if name not in names:
            errs.append(invalid(f"{epath}.name", name, "must match the name of an entry in `spec.resourceClaims`"))
        claim_name = get_str(entry, "resourceClaimName", epath, errs)
        if claim_name is not None:
            errs.extend(validate_long_name(claim_name, f"{epath}.resourceClaimName"))
    return errs
