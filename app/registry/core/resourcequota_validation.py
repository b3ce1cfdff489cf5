"""ResourceQuota validation (upstream's ValidateResourceQuota, ValidateResourceQuotaUpdate and
ValidateResourceQuotaStatusUpdate) and the warnings upstream gives on create."""

from __future__ import annotations

import json
from typing import Any

from app.registry.accessors import as_dict, as_dict_entries, as_list, as_str
from app.registry.base import Obj
from app.registry.common import HUGEPAGES_PREFIXES, validate_resource_name, validate_resource_quantity
from app.registry.objectmeta import FIELD_IMMUTABLE
from kube.errors import FieldError, GoSyntax, invalid, required
from kube.quantity import parse_quantity_or_none

# helper.IsStandardQuotaResourceName.
STANDARD_QUOTA_RESOURCES = frozenset(
    {
        "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.storage",
        "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods",
        "resourcequotas", "services", "replicationcontrollers", "secrets", "persistentvolumeclaims",
        "configmaps", "services.nodeports", "services.loadbalancers",
    }
)  # fmt: skip
SCOPES = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass", "VolumeAttributesClass", "CrossNamespacePodAffinity")
# Scopes that only say whether something is so: their selectors take Exists and nothing else.
_EXISTS_ONLY = ("BestEffort", "NotBestEffort", "Terminating", "NotTerminating", "CrossNamespacePodAffinity")
_CONFLICTING = (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating"))
_POD_COUNT = frozenset({"pods"})
_POD_COMPUTE = frozenset({"cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"})
_PVC = frozenset({"persistentvolumeclaims", "requests.storage"})
NOT_QUOTA_RESOURCE = "must be a standard resource for quota"
EXISTS_ONLY_OPERATOR = (
    "must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, "
    "ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"
)
# Requests that should not exceed their limits, and the bare names that mean the request (cpu, memory).
_WARNED = (("cpu", True), ("memory", True), ("storage", False), ("ephemeral-storage", False))


def is_standard_quota_resource(name: str) -> bool:
    return name in STANDARD_QUOTA_RESOURCES or name.startswith(HUGEPAGES_PREFIXES)


def scope_valid_for_resource(scope: str, resource: str) -> bool:
    """helper.IsResourceQuotaScopeValidForResource."""
    if scope in ("Terminating", "NotTerminating", "NotBestEffort", "PriorityClass", "CrossNamespacePodAffinity"):
        return resource in _POD_COUNT or resource in _POD_COMPUTE
    if scope == "BestEffort":
        return resource in _POD_COUNT
    if scope == "VolumeAttributesClass":
        return resource in _PVC
    return True


def validate_quota_resource_name(name: str, path: str) -> list[FieldError]:
    errs = validate_resource_name(name, path)
    if "/" not in name and not is_standard_quota_resource(name):
        errs.append(invalid(path, name, NOT_QUOTA_RESOURCE))
    return errs


def _resource_list(raw: Any, path: str) -> list[FieldError]:
    """Names a quota may count and amounts it may count them in (in name order: upstream walks a map)."""
    errs: list[FieldError] = []
    entries = as_dict(raw, path, errs)
    for name in sorted(entries):
        key_path = f"{path}[{name}]"
        errs += validate_quota_resource_name(name, key_path)
        errs += validate_resource_quantity(name, entries[name], key_path)
    return errs


def _go_json(value: Any) -> GoSyntax:
    """A value as upstream's field errors print a structure: its JSON (Go's field names, no spaces)."""
    return GoSyntax(json.dumps(value, separators=(",", ":")))


def _internal_selector(selector: Obj) -> Obj:
    """The scope selector as upstream's internal type marshals it (no JSON tags there)."""
    expressions = [
        {"ScopeName": e.get("scopeName", ""), "Operator": e.get("operator", ""), "Values": e.get("values")}
        for e in selector.get("matchExpressions") or [] if isinstance(e, dict)
    ]  # fmt: skip
    return {"MatchExpressions": expressions or None}


def _scopes(spec: Obj, hard: list[str], errs: list[FieldError]) -> None:
    scopes = as_list(spec.get("scopes"), "spec.scopes", errs)
    if not scopes:
        return
    shown = _go_json(scopes)
    for scope in scopes:
        if scope not in SCOPES:
            errs.append(invalid("spec.scopes", shown, "unsupported scope"))
        for name in hard:
            if is_standard_quota_resource(name) and not scope_valid_for_resource(str(scope), name):
                errs.append(invalid("spec.scopes", shown, "unsupported scope applied to resource"))
    for pair in _CONFLICTING:
        if all(s in scopes for s in pair):
            errs.append(invalid("spec.scopes", shown, "conflicting scopes"))


def _scope_selector(spec: Obj, hard: list[str], errs: list[FieldError]) -> None:
    selector = spec.get("scopeSelector")
    if selector is None:
        return
    selector = as_dict(selector, "spec.scopeSelector", errs)
    path = "spec.scopeSelector.matchExpressions"
    seen: set[str] = set()
    for _index, requirement, _rpath in as_dict_entries(selector.get("matchExpressions"), path, errs):
        scope = as_str(requirement.get("scopeName"), f"{path}.scopeName", errs) or ""
        operator = as_str(requirement.get("operator"), f"{path}.operator", errs) or ""
        values = as_list(requirement.get("values"), f"{path}.values", errs) or []
        if scope not in SCOPES:
            errs.append(invalid(f"{path}.scopeName", _go_json(scope), "unsupported scope"))
        for name in hard:
            if is_standard_quota_resource(name) and not scope_valid_for_resource(scope, name):
                errs.append(invalid(path, _go_json(_internal_selector(selector)), "unsupported scope applied to resource"))
        if scope in _EXISTS_ONLY and operator != "Exists":
            errs.append(invalid(f"{path}.operator", _go_json(operator), EXISTS_ONLY_OPERATOR))
        if operator in ("In", "NotIn"):
            if not values:
                errs.append(required(f"{path}.values", "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errs.append(invalid(f"{path}.values", _go_json(values), "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"))
        else:
            errs.append(invalid(f"{path}.operator", _go_json(operator), "not a valid selector operator"))
        seen.add(scope)
    for pair in _CONFLICTING:
        if seen.issuperset(pair):
            # Upstream shows the spec's scopes here, not the selector.
            errs.append(invalid(path, _go_json(spec.get("scopes")), "conflicting scopes"))


def validate_spec(obj: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    spec = as_dict(obj.get("spec"), "spec", errs)
    hard_raw = spec.get("hard")
    errs += _resource_list(hard_raw, "spec.hard")
    hard = sorted(hard_raw) if isinstance(hard_raw, dict) else []
    _scopes(spec, hard, errs)
    _scope_selector(spec, hard, errs)
    return errs


def validate_status(obj: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    status = as_dict(obj.get("status"), "status", errs)
    errs += _resource_list(status.get("hard"), "status.hard")
    errs += _resource_list(status.get("used"), "status.used")
    return errs


def validate_resource_quota(obj: Obj) -> list[FieldError]:
    return validate_spec(obj) + validate_status(obj)


def validate_resource_quota_update(new: Obj, old: Obj) -> list[FieldError]:
    errs = validate_spec(new)
    new_scopes = (new.get("spec") or {}).get("scopes")
    old_scopes = (old.get("spec") or {}).get("scopes")
    if set(map(str, new_scopes or [])) != set(map(str, old_scopes or [])):
        errs.append(invalid("spec.scopes", _go_json(new_scopes), FIELD_IMMUTABLE))
    return errs


def create_warnings(obj: Obj) -> list[str]:
    """A request limited above its limit: allowed, but it can never be used in full."""
    hard = (obj.get("spec") or {}).get("hard") or {}
    warnings: list[str] = []
    for resource, bare_is_request in _WARNED:
        request_name = f"requests.{resource}"
        if request_name not in hard and bare_is_request and resource in hard:
            request_name = resource
        limit_name = f"limits.{resource}"
        request, limit = parse_quantity_or_none(hard.get(request_name)), parse_quantity_or_none(hard.get(limit_name))
        if request is not None and limit is not None and request > limit:
            warnings.append(f"ResourceQuota {request_name} ({request.canonical()}) should be less than {limit_name} ({limit.canonical()})")
    return warnings
