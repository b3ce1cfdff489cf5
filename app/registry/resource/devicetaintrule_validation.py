"""DeviceTaintRule: validation of the spec and of the status."""

from __future__ import annotations

from typing import Any

from app.registry.accessors import Errs, get_dict, get_str, type_error
from app.registry.base import Obj
from app.registry.common import validate_status_conditions
from app.registry.resource.common import validate_device_name, validate_driver_name, validate_pool_name, validate_taint
from kube.errors import required

TAINT_RULE_MAX_CONDITIONS = 8


def validate_taint_rule_spec(spec: Any, old_spec: Obj | None) -> Errs:
    errs: Errs = []
    if not isinstance(spec, dict):
        return [required("spec")] if spec is None else [type_error("spec", spec, "object")]
    sel = get_dict(spec, "deviceSelector", "spec", errs)
    if sel is not None:
        sp = "spec.deviceSelector"
        driver = get_str(sel, "driver", sp, errs)
        if driver is not None:
            errs.extend(validate_driver_name(driver, f"{sp}.driver"))
        pool = get_str(sel, "pool", sp, errs)
        if pool is not None:
            errs.extend(validate_pool_name(pool, f"{sp}.pool"))
        device = get_str(sel, "device", sp, errs)
        if device is not None:
            errs.extend(validate_device_name(device, f"{sp}.device"))
    taint = get_dict(spec, "taint", "spec", errs)
    if taint is None:
        if spec.get("taint") is None:
            errs.append(required("spec.taint"))
    else:
        old_taint = (old_spec or {}).get("taint") if old_spec is not None else None
        errs.extend(validate_taint(taint, old_taint if isinstance(old_taint, dict) else None, "spec.taint"))
    return errs


def validate_taint_rule_status(status: Any) -> Errs:
    errs: Errs = []
    if not isinstance(status, dict):
        return [] if status is None else [type_error("status", status, "object")]
    validate_status_conditions(status, TAINT_RULE_MAX_CONDITIONS, errs)
    return errs
