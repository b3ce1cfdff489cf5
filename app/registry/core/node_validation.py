"""Node: validation of taints, resource quantities, declared features and the set-once fields."""

from __future__ import annotations

from typing import Any

from app.registry.accessors import as_dict, as_dict_entries, as_list, as_str
from app.registry.base import Obj
from app.registry.common import validate_resource_quantity
from app.registry.objectmeta import validate_label_value, validate_qualified_name
from kube.errors import FieldError, duplicate, forbidden, invalid, not_supported, required

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def validate_node_taints(taints: object, path: str) -> list[FieldError]:
    """validateNodeTaints: key, value, effect and uniqueness by (key, effect)."""
    errs: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for _index, taint, taint_path in as_dict_entries(taints, path, errs):
        key = as_str(taint.get("key"), f"{taint_path}.key", errs)
        value = as_str(taint.get("value"), f"{taint_path}.value", errs)
        effect = as_str(taint.get("effect"), f"{taint_path}.effect", errs)
        errs += validate_qualified_name(key, f"{taint_path}.key")
        problems = validate_label_value(value, f"{taint_path}.value")
        if problems:
            errs.append(invalid(f"{taint_path}.value", value, ";".join(p.detail for p in problems)))
        if not effect:
            errs.append(required(f"{taint_path}.effect"))
        elif effect not in TAINT_EFFECTS:
            errs.append(not_supported(f"{taint_path}.effect", effect, TAINT_EFFECTS))
        if (key, effect) in seen:
            error = duplicate(taint_path, taint)
            error.detail = "taints must be unique by key and effect pair"
            errs.append(error)
            continue
        seen.add((key, effect))
    return errs


def validate_node_resources(node: Obj) -> list[FieldError]:
    """status.capacity / status.allocatable quantities (upstream paths use '.', not '[key]')."""
    errs: list[FieldError] = []
    status = as_dict(node.get("status"), "status", errs)
    for key in ("capacity", "allocatable"):
        for name, value in as_dict(status.get(key), f"status.{key}", errs).items():
            errs += validate_resource_quantity(name, value, f"status.{key}.{name}")
    return errs


def validate_declared_features(features: object, path: str) -> list[FieldError]:
    """status.declaredFeatures: non-empty, unique strings."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for index, feature in enumerate(as_list(features, path, errs)):
        item_path = f"{path}[{index}]"
        if not isinstance(feature, str):
            errs.append(invalid(item_path, feature, "must be a string"))
        elif not feature:
            errs.append(required(item_path))
        elif feature in seen:
            errs.append(duplicate(item_path, feature))
        else:
            seen.add(feature)
    return errs


def validate_node(node: Obj) -> list[FieldError]:
    """ValidateNode minus ObjectMeta: taints, resource quantities, declared features."""
    errs: list[FieldError] = []
    spec = as_dict(node.get("spec"), "spec", errs)
    if spec.get("taints"):
        # Upstream reports spec taints under metadata.taints (its path bug, kept for parity).
        errs += validate_node_taints(spec["taints"], "metadata.taints")
    errs += validate_node_resources(node)
    status = node.get("status") if isinstance(node.get("status"), dict) else {}
    assert isinstance(status, dict)
    errs += validate_declared_features(status.get("declaredFeatures"), "status.declaredFeatures")
    return errs


def validate_node_update(new: Obj, old: Obj) -> list[FieldError]:
    """ValidateNodeUpdate minus ObjectMeta: podCIDRs / providerID set once, unique addresses."""
    errs = validate_node(new)
    new_spec = new.get("spec") if isinstance(new.get("spec"), dict) else {}
    old_spec = old.get("spec") if isinstance(old.get("spec"), dict) else {}
    assert isinstance(new_spec, dict) and isinstance(old_spec, dict)
    old_cidrs = old_spec.get("podCIDRs") or []
    if old_cidrs and old_cidrs != (new_spec.get("podCIDRs") or []):
        errs.append(forbidden("spec.podCIDRs", 'node updates may not change podCIDR except from "" to valid'))
    old_provider = old_spec.get("providerID") or ""
    if old_provider and old_provider != (new_spec.get("providerID") or ""):
        errs.append(forbidden("spec.providerID", 'node updates may not change providerID except from "" to valid'))
    if (new_spec.get("externalID") or "") != (old_spec.get("externalID") or ""):
        errs.append(forbidden("spec.externalID", "may not be updated"))
    status = new.get("status") if isinstance(new.get("status"), dict) else {}
    assert isinstance(status, dict)
    seen: list[Any] = []
    addresses = status.get("addresses") if isinstance(status.get("addresses"), list) else []
    assert isinstance(addresses, list)
    for index, address in enumerate(addresses):
        if address in seen:
            errs.append(duplicate(f"status.addresses[{index}]", address))
        seen.append(address)
    return errs
