"""DeviceTaintRule: validation of the spec and of the status.

Behaviour follows upstream v1.37 (pkg/apis/resource/validation, the registry strategies and the
declarative rules in k8s.io/api/resource/v1): same field paths, limits and messages.
"""

from __future__ import annotations

from typing import Any

from app.registry.accessors import Errs, Obj, _dict, _list, _str, _type_error
from app.registry.common import validate_conditions
from app.registry.resource.common import _validate_taint, validate_device_name, validate_driver_name, validate_pool_name
from kube.errors import (
    required,
    too_many,
)

TAINT_RULE_MAX_CONDITIONS = 8


# --- DeviceTaintRule --------------------------------------------------------------------------


def validate_taint_rule_spec(spec: Any, old_spec: Obj | None) -> Errs:
    errs: Errs = []
    if not isinstance(spec, dict):
        return [required("spec")] if spec is None else [_type_error("spec", spec, "object")]
    sel = _dict(spec, "deviceSelector", "spec", errs)
    if sel is not None:
        sp = "spec.deviceSelector"
        driver = _str(sel, "driver", sp, errs)
        if driver is not None:
            errs.extend(validate_driver_name(driver, f"{sp}.driver"))
        pool = _str(sel, "pool", sp, errs)
        if pool is not None:
            errs.extend(validate_pool_name(pool, f"{sp}.pool"))
        device = _str(sel, "device", sp, errs)
        if device is not None:
            errs.extend(validate_device_name(device, f"{sp}.device"))
    taint = _dict(spec, "taint", "spec", errs)
    if taint is None:
        if spec.get("taint") is None:
            errs.append(required("spec.taint"))
    else:
        old_taint = (old_spec or {}).get("taint") if old_spec is not None else None
        errs.extend(_validate_taint(taint, old_taint if isinstance(old_taint, dict) else None, "spec.taint"))
    return errs


def validate_taint_rule_status(status: Any) -> Errs:
    errs: Errs = []
    if not isinstance(status, dict):
        return [] if status is None else [_type_error("status", status, "object")]
    conds = _list(status, "conditions", "status", errs)
    if conds is not None:
        errs.extend(validate_conditions(conds, "status.conditions"))
        if len(conds) > TAINT_RULE_MAX_CONDITIONS:
            errs.append(too_many("status.conditions", len(conds), TAINT_RULE_MAX_CONDITIONS))
    return errs
