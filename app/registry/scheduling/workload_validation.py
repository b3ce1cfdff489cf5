"""Workload (scheduling.k8s.io/v1beta1): validation and the DRAWorkloadResourceClaims drop rule."""

from __future__ import annotations

from typing import Any

from app.registry.accessors import Errs, dict_entries, get_dict, get_list, get_str, type_error
from app.registry.base import Obj
from app.registry.objectmeta import path_segment_problems, validate_immutable
from app.registry.scheduling.podgroupspec import (
    disabled_by_gate,
    validate_group_fields,
    validate_group_fields_update,
    validate_long_name,
    validate_required_name,
)
from kube.errors import duplicate, forbidden, invalid, required, too_many

MAX_POD_GROUP_TEMPLATES = 8


def _templates(spec: Any) -> list[Obj]:
    value = spec.get("podGroupTemplates") if isinstance(spec, dict) else None
    return [t for t in value if isinstance(t, dict)] if isinstance(value, list) else []


def _validate_controller_ref(ref: Obj, path: str, errs: Errs) -> None:
    group = get_str(ref, "apiGroup", path, errs)
    if group:
        errs.extend(validate_long_name(group, f"{path}.apiGroup"))
    for key in ("kind", "name"):
        value = get_str(ref, key, path, errs)
        if not value:
            errs.append(required(f"{path}.{key}"))
        else:
            errs.extend(invalid(f"{path}.{key}", value, p) for p in path_segment_problems(value))


def validate_workload_spec(spec: Any) -> Errs:
    if spec is None:
        return [required("spec")]
    if not isinstance(spec, dict):
        return [type_error("spec", spec, "object")]
    errs: Errs = []
    ref = get_dict(spec, "controllerRef", "spec", errs)
    if ref is not None:
        _validate_controller_ref(ref, "spec.controllerRef", errs)
    if spec.get("compositePodGroupTemplates") is not None:
        errs.append(disabled_by_gate("spec.compositePodGroupTemplates", "CompositePodGroup"))
    templates = get_list(spec, "podGroupTemplates", "spec", errs)
    if not templates:
        if spec.get("compositePodGroupTemplates") is None and not any(e.field == "spec.podGroupTemplates" for e in errs):
            errs.append(invalid("spec", "", "must specify one of: `podGroupTemplates`, `compositePodGroupTemplates`"))
        return errs
    if len(templates) > MAX_POD_GROUP_TEMPLATES:
        errs.append(too_many("spec.podGroupTemplates", len(templates), MAX_POD_GROUP_TEMPLATES))
    seen: set[str] = set()
    priorities: set[tuple[str, Any]] = set()
    for index, template, tpath in dict_entries(templates, "spec.podGroupTemplates", errs):
        name = validate_required_name(template, "name", tpath, True, errs)
        if name is not None:
            if name in seen:
                errs.append(duplicate(f"spec.podGroupTemplates[{index}]", template))
            seen.add(name)
        validate_group_fields(template, tpath, errs)
        priorities.add((str(template.get("priorityClassName") or ""), template.get("priority")))
    if len(priorities) > 1:
        errs.append(invalid("spec", None, "detected multiple priority configurations"))
    return errs


def validate_workload_update(new: Any, old: Any) -> Errs:
    errs = validate_workload_spec(new)
    new_spec = new if isinstance(new, dict) else {}
    old_spec = old if isinstance(old, dict) else {}
    if old_spec.get("controllerRef") is not None:
        errs.extend(validate_immutable(new_spec.get("controllerRef"), old_spec.get("controllerRef"), "spec.controllerRef"))
    old_by_name = {t.get("name"): t for t in _templates(old_spec)}
    new_names = [t.get("name") for t in _templates(new_spec)]
    for index, template in enumerate(_templates(new_spec)):
        previous = old_by_name.get(template.get("name"))
        tpath = f"spec.podGroupTemplates[{index}]"
        if previous is None:
            errs.append(forbidden(tpath, "adding items is not allowed"))
        else:
            errs.extend(validate_group_fields_update(template, previous, tpath))
    for name in old_by_name:
        if name not in new_names:
            errs.append(forbidden("spec.podGroupTemplates", f"removing items is not allowed (missing {name!r})"))
    return errs
