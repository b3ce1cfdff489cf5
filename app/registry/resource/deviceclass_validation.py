"""DeviceClass: validation of the spec and its gate drop rules."""

from __future__ import annotations

from typing import Any

from app.registry.accessors import Errs, dict_entries, get_list, get_str, over_limit, type_error
from app.registry.base import Obj
from app.registry.common import is_extended_resource
from app.registry.resource.common import CONFIG_MAX, ClaimOptions, validate_opaque_config, validate_selectors
from kube.errors import invalid


def validate_device_class_spec(spec: Any, old_spec: Obj | None, gates: Any) -> Errs:
    errs: Errs = []
    if spec is None:
        return errs
    if not isinstance(spec, dict):
        return [type_error("spec", spec, "object")]
    old = old_spec or {}
    stored = old_spec is not None and spec.get("selectors") == old.get("selectors")
    selectors = get_list(spec, "selectors", "spec", errs)
    if selectors is not None:
        validate_selectors(spec, "spec", ClaimOptions(gates, stored=stored), errs)
    stored = old_spec is not None and spec.get("config") == old.get("config")
    configs = get_list(spec, "config", "spec", errs)
    if configs is not None and not over_limit(configs, CONFIG_MAX, "spec.config", errs):
        for _, cfg, p in dict_entries(configs, "spec.config", errs):
            validate_opaque_config(cfg, p, stored, errs)
    ern = get_str(spec, "extendedResourceName", "spec", errs)
    if ern is not None and not is_extended_resource(ern):
        errs.append(invalid("spec.extendedResourceName", ern, "must be a valid extended resource name"))
    return errs
