"""What Workload's podGroupTemplates and PodGroup's spec share (scheduling.k8s.io/v1beta1, v1.37).

Most of these rules are declarative upstream (``+k8s:`` tags on the v1beta1 types): unions that need
exactly one member, list maps keyed by name, item limits, name formats and immutability. The
resource claims (``resourceClaims``) are guarded by ``DRAWorkloadResourceClaims``; the other gated
fields (schedulingConstraints, preemptionPolicy, parentCompositePodGroupName,
compositePodGroupTemplates) belong to gates this server does not know, which are off, so they are
forbidden.
"""

from __future__ import annotations

from typing import Any

from app.registry.accessors import Errs, dict_entries, get_dict, get_int, get_list, get_str, type_error
from app.registry.base import Obj
from app.registry.objectmeta import dns1123_label_problems, dns1123_subdomain_problems, validate_immutable
from kube.errors import duplicate, forbidden, invalid, required, too_many

GROUP = "scheduling.k8s.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
MAX_RESOURCE_CLAIMS = 4
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000


def disabled_by_gate(path: str, gate: str) -> Any:
    return forbidden(path, f"disabled by feature gate {gate}")


def validate_long_name(value: str, path: str) -> Errs:
    return [invalid(path, value, p) for p in dns1123_subdomain_problems(value)]


def validate_short_name(value: str, path: str) -> Errs:
    return [invalid(path, value, p) for p in dns1123_label_problems(value)]


def validate_required_name(obj: Obj, key: str, path: str, short: bool, errs: Errs) -> str | None:
    """A required name in DNS label (short) or subdomain (long) form; "" counts as missing."""
    value = get_str(obj, key, path, errs)
    if not value:
        if obj.get(key) in (None, ""):
            errs.append(required(f"{path}.{key}"))
        return None
    errs.extend((validate_short_name if short else validate_long_name)(value, f"{path}.{key}"))
    return value


def validate_union(obj: Obj, path: str, members: tuple[str, ...], errs: Errs) -> str | None:
    """Exactly one member set (a declarative union): the one set, or None with the error."""
    present = [m for m in members if obj.get(m) is not None]
    listed = ", ".join(f"`{m}`" for m in members)
    if not present:
        errs.append(invalid(path, "", f"must specify one of: {listed}"))
        return None
    if len(present) > 1:
        value = "{" + ", ".join(f"`{m}`" for m in present) + "}"
        errs.append(invalid(path, value, f"exactly one of {listed} is required, but multiple fields are set"))
        return None
    return present[0]


def validate_scheduling_policy(policy: Any, path: str, errs: Errs) -> None:
    if policy is None:
        errs.append(required(path))
        return
    if not isinstance(policy, dict):
        errs.append(type_error(path, policy, "object"))
        return
    member = validate_union(policy, path, ("basic", "gang"), errs)
    if member == "basic":
        get_dict(policy, "basic", path, errs)
    elif member == "gang":
        gang = get_dict(policy, "gang", path, errs)
        if gang is not None:
            count = get_int(gang, "minCount", f"{path}.gang", errs)
            if not count:
                if gang.get("minCount") in (None, 0):
                    errs.append(required(f"{path}.gang.minCount"))
            elif count < 1:
                errs.append(invalid(f"{path}.gang.minCount", count, "must be greater than or equal to 1"))


def validate_scheduling_policy_update(new: Any, old: Any, path: str) -> Errs:
    """basic is immutable; gang may be neither set nor unset; gang.minCount may change."""
    new_policy = new if isinstance(new, dict) else {}
    old_policy = old if isinstance(old, dict) else {}
    errs: Errs = []
    if new_policy.get("basic") != old_policy.get("basic"):
        errs.extend(validate_immutable(new_policy.get("basic"), old_policy.get("basic"), f"{path}.basic"))
    if (new_policy.get("gang") is None) != (old_policy.get("gang") is None):
        verb = "set" if old_policy.get("gang") is None else "unset"
        errs.append(forbidden(f"{path}.gang", f"field cannot be {verb} once created"))
    return errs


def validate_resource_claims(claims: list[Any], path: str, errs: Errs) -> None:
    """PodGroupResourceClaim list: a map by name, at most 4, each naming exactly one source."""
    if len(claims) > MAX_RESOURCE_CLAIMS:
        errs.append(too_many(path, len(claims), MAX_RESOURCE_CLAIMS))
    seen: set[str] = set()
    for index, claim, cpath in dict_entries(claims, path, errs):
        name = validate_required_name(claim, "name", cpath, True, errs)
        if name is not None:
            if name in seen:
                errs.append(duplicate(f"{path}[{index}]", claim))
            seen.add(name)
        if validate_union(claim, cpath, ("resourceClaimName", "resourceClaimTemplateName"), errs) is not None:
            for key in ("resourceClaimName", "resourceClaimTemplateName"):
                value = get_str(claim, key, cpath, errs)
                if value is not None:
                    errs.extend(validate_long_name(value, f"{cpath}.{key}"))


def validate_disruption_mode(mode: Any, path: str, errs: Errs) -> None:
    if mode is None:
        return
    if not isinstance(mode, dict):
        errs.append(type_error(path, mode, "object"))
        return
    validate_union(mode, path, ("single", "all"), errs)


def validate_group_fields(obj: Obj, path: str, errs: Errs) -> None:
    """The fields a PodGroupTemplate and a PodGroupSpec both have."""
    validate_scheduling_policy(obj.get("schedulingPolicy"), f"{path}.schedulingPolicy", errs)
    if obj.get("schedulingConstraints") is not None:
        errs.append(disabled_by_gate(f"{path}.schedulingConstraints", "TopologyAwareWorkloadScheduling"))
    if obj.get("preemptionPolicy") is not None:
        errs.append(disabled_by_gate(f"{path}.preemptionPolicy", "PodGroupPreemptionPolicy"))
    claims = get_list(obj, "resourceClaims", path, errs)
    if claims is not None:
        validate_resource_claims(claims, f"{path}.resourceClaims", errs)
    validate_disruption_mode(obj.get("disruptionMode"), f"{path}.disruptionMode", errs)
    class_name = get_str(obj, "priorityClassName", path, errs)
    if class_name:
        errs.extend(validate_long_name(class_name, f"{path}.priorityClassName"))
    priority = get_int(obj, "priority", path, errs)
    if priority is not None and priority > HIGHEST_USER_DEFINABLE_PRIORITY:
        errs.append(invalid(f"{path}.priority", priority, f"must be less than or equal to {HIGHEST_USER_DEFINABLE_PRIORITY}"))


IMMUTABLE_GROUP_FIELDS = ("resourceClaims", "disruptionMode", "priorityClassName", "priority")


def validate_group_fields_update(new: Obj, old: Obj, path: str) -> Errs:
    errs = validate_scheduling_policy_update(new.get("schedulingPolicy"), old.get("schedulingPolicy"), f"{path}.schedulingPolicy")
    for key in IMMUTABLE_GROUP_FIELDS:
        errs.extend(validate_immutable(new.get(key), old.get(key), f"{path}.{key}"))
    return errs
