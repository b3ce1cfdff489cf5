"""ResourceSlice: validation of the spec (pool, node selection, devices, attributes, capacity,
counters), defaults and gate drop rules.

``devices[].nodeAllocatableResources`` is the project's KEP-5517 proposal, behind the alpha gate
``DRANodeAllocatableResources``.
"""

from __future__ import annotations

import re
from typing import Any

from app.registry.accessors import (
    Errs,
    dict_entries,
    get_bool,
    get_dict,
    get_int,
    get_list,
    get_str,
    over_limit,
    read_quantity,
    report_duplicates,
    sub_dict,
    truncate_key,
    type_error,
)
from app.registry.base import Obj
from app.registry.common import validate_node_selector
from app.registry.objectmeta import validate_dns1123_label, validate_dns1123_subdomain
from app.registry.resource.common import (
    ATTRIBUTE_KEY_TRUNCATE,
    default_taint,
    validate_binding_conditions,
    validate_driver_name,
    validate_fully_qualified_name,
    validate_pool_name,
    validate_qualified_name,
    validate_skip_node_operations,
    validate_taint,
)
from kube.errors import NOT_FOUND, FieldError, forbidden, invalid, required, too_long
from kube.features import Gate
from kube.quantity import Quantity

# --- limits (k8s.io/api/resource/v1/types.go) -------------------------------------------------

SLICE_MAX_DEVICES = 128
SLICE_MAX_DEVICES_ADVANCED = 64
MAX_COUNTER_SETS = 8
MAX_COUNTERS = 32
MAX_CONSUMPTIONS_PER_DEVICE = 2
MAX_COMPATIBILITY_GROUPS = 2
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_ATTRIBUTE_VALUES = 48
ATTRIBUTE_VALUE_MAX_LEN = 64
TAINTS_MAX = 16
VALID_VALUES_MAX = 10

_NUM = r"(0|[1-9]\d*)"
_PRE = r"(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD = r"[0-9a-zA-Z-]+"
SEMVER_RE = re.compile(rf"^{_NUM}\.{_NUM}\.{_NUM}(-{_PRE}(\.{_PRE})*)?(\+{_BUILD}(\.{_BUILD})*)?$")
_NODE_ALLOCATABLE = ("cpu", "memory", "ephemeral-storage")


# --- validation -------------------------------------------------------------------------------


def _attribute(attr: Any, path: str) -> Errs:
    errs: Errs = []
    if not isinstance(attr, dict):
        return [type_error(path, attr, "object")]
    count = 0
    for key in ("bool", "int", "string", "version"):
        if attr.get(key) is not None:
            count += 1
    if attr.get("bool") is not None:
        get_bool(attr, "bool", path, errs)
    if attr.get("int") is not None:
        get_int(attr, "int", path, errs)
    s = get_str(attr, "string", path, errs)
    if s is not None and len(s.encode()) > ATTRIBUTE_VALUE_MAX_LEN:
        errs.append(too_long(f"{path}.string", ATTRIBUTE_VALUE_MAX_LEN))
    v = get_str(attr, "version", path, errs)
    if v is not None:
        errs.extend(_version(v, f"{path}.version"))
    for key in ("bools", "ints", "strings", "versions"):
        values = get_list(attr, key, path, errs)
        if values is None:
            continue
        count += 1
        lpath = f"{path}.{key}"
        if not values:
            errs.append(invalid(lpath, values, "must not be empty if specified"))
        for i, item in enumerate(values):
            ipath = f"{lpath}[{i}]"
            if key == "bools" and not isinstance(item, bool):
                errs.append(type_error(ipath, item, "boolean"))
            elif key == "ints" and (isinstance(item, bool) or not isinstance(item, int)):
                errs.append(type_error(ipath, item, "integer"))
            elif key in ("strings", "versions") and not isinstance(item, str):
                errs.append(type_error(ipath, item, "string"))
            elif key == "strings" and len(item.encode()) > ATTRIBUTE_VALUE_MAX_LEN:
                errs.append(too_long(ipath, ATTRIBUTE_VALUE_MAX_LEN))
            elif key == "versions":
                errs.extend(_version(item, ipath))
    if count == 0:
        errs.append(invalid(path, "", "exactly one value must be specified"))
    elif count > 1:
        errs.append(invalid(path, attr, "exactly one value must be specified"))
    return errs


def _version(value: str, path: str) -> Errs:
    errs: Errs = []
    if not SEMVER_RE.match(value):
        errs.append(invalid(path, value, "must be a string compatible with semver.org spec 2.0.0"))
    if len(value.encode()) > ATTRIBUTE_VALUE_MAX_LEN:
        errs.append(too_long(path, ATTRIBUTE_VALUE_MAX_LEN))
    return errs


def _request_policy(value: Quantity | None, policy: Obj, path: str, gates: Any, errs: Errs) -> None:
    valid_values = get_list(policy, "validValues", path, errs)
    valid_range = get_dict(policy, "validRange", path, errs)
    default = read_quantity(policy.get("default"), f"{path}.default", errs)
    if valid_values and valid_range is not None:
        errs.append(forbidden(path, 'exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time'))
        return
    if value is None:
        return
    if valid_values:
        if default is None:
            if policy.get("default") is None:
                errs.append(required(f"{path}.default", "required when validValues is defined"))
            return
        vpath = f"{path}.validValues"
        options = [read_quantity(v, f"{vpath}[{i}]", errs) for i, v in enumerate(valid_values)]
        for i in range(len(options) - 1):
            a, b = options[i], options[i + 1]
            if a is not None and b is not None and a > b:
                errs.append(invalid(f"{vpath}[{i + 1}]", str(b), "values must be sorted in ascending order"))
        if over_limit(valid_values, VALID_VALUES_MAX, vpath, errs):
            return
        fractional = gates.enabled(Gate.DRAFractionalCapacityRange)
        found = False
        keys: list[tuple[int, Any]] = []
        for i, opt in enumerate(options):
            if opt is None:
                continue
            if opt > value:
                errs.append(invalid(f"{vpath}[{i}]", str(opt), f"option is larger than capacity value: {value}"))
            if opt == default:
                found = True
            keys.append((i, str(opt.as_fraction()) if fractional else str(opt.value())))
        report_duplicates(keys, vpath, errs)
        if not found:
            errs.append(invalid(vpath, str(default), "default value is not valid according to the requestPolicy"))
    elif valid_range is not None:
        if default is None:
            if policy.get("default") is None:
                errs.append(required(f"{path}.default", "required when validRange is defined"))
            return
        _valid_range(value, default, valid_range, f"{path}.validRange", gates, errs)


def _valid_range(cap: Quantity, default: Quantity, rng: Obj, path: str, gates: Any, errs: Errs) -> None:
    lo = read_quantity(rng.get("min"), f"{path}.min", errs)
    if lo is None:
        if rng.get("min") is None:
            errs.append(required(f"{path}.min", "required when validRange is defined"))
        return
    hi = read_quantity(rng.get("max"), f"{path}.max", errs)
    step = read_quantity(rng.get("step"), f"{path}.step", errs)
    if lo > cap:
        errs.append(invalid(f"{path}.min", str(lo), f"min is larger than capacity value: {cap}"))
    if default < lo:
        errs.append(invalid(f"{path}.default", str(default), f"default is less than min: {lo}"))
    if hi is not None:
        if lo > hi:
            errs.append(invalid(f"{path}.max", str(lo), f"min is larger than max: {hi}"))
        if hi > cap:
            errs.append(invalid(f"{path}.max", str(hi), f"max is larger than capacity value: {cap}"))
        if default > hi:
            errs.append(invalid(f"{path}.default", str(default), f"default is more than max: {hi}"))
    if step is None:
        return
    if step.sign <= 0:
        errs.append(invalid(f"{path}.step", str(step), "must be greater than zero"))
        return
    if lo + step > cap:
        errs.append(invalid(f"{path}.step", str(step), f"one step {lo + step} is larger than capacity value: {cap}"))
    # Without DRAFractionalCapacityRange upstream compares integer values (Value() rounds up).
    fractional = gates.enabled(Gate.DRAFractionalCapacityRange)

    def num(q: Quantity) -> Any:
        return q.as_fraction() if fractional else q.value()

    for value in (default, hi):
        if value is None:
            continue
        s = num(step)
        if s and (num(value) - num(lo)) % s != 0:
            errs.append(invalid(f"{path}.step", str(value), f"value is not a multiple of a given step ({step}) from ({lo})"))


def _counter_map(counters: Any, path: str, errs: Errs) -> None:
    if not isinstance(counters, dict):
        errs.append(type_error(path, counters, "object"))
        return
    if over_limit(list(counters), MAX_COUNTERS, path, errs):
        return
    for key, counter in counters.items():
        errs.extend(validate_dns1123_label(key, path))
        kpath = f"{path}[{truncate_key(key, 63)}]"
        if not isinstance(counter, dict):
            errs.append(type_error(kpath, counter, "object"))
            continue
        if counter.get("value") is None:
            errs.append(required(f"{kpath}.value"))
        else:
            read_quantity(counter.get("value"), f"{kpath}.value", errs)



def _named_counters(entry: Obj, name_key: str, path: str, errs: Errs) -> str:
    """A counter set, or a device's consumption of one: its DNS-label name (under ``name_key``)
    and its required counters. Returns the name, for the duplicate check."""
    name = get_str(entry, name_key, path, errs) or ""
    errs.extend(validate_dns1123_label(name, f"{path}.{name_key}") if name else [required(f"{path}.{name_key}")])
    counters = entry.get("counters")
    if not counters:
        errs.append(required(f"{path}.counters"))
    else:
        _counter_map(counters, f"{path}.counters", errs)
    return name

def _is_node_allocatable(name: str) -> bool:
    return name in _NODE_ALLOCATABLE or name.startswith("hugepages-")


def _node_allocatable_resources(dev: Obj, path: str, errs: Errs) -> None:
    resources = get_dict(dev, "nodeAllocatableResources", path, errs)
    if resources is None:
        return
    capacity = sub_dict(dev, "capacity")
    for name, entry in resources.items():
        kpath = f"{path}.nodeAllocatableResources[{name}]"
        if not _is_node_allocatable(name):
            errs.append(invalid(kpath, name, "must be a node allocatable resource name"))
        if not isinstance(entry, dict):
            errs.append(type_error(kpath, entry, "object"))
            continue
        mapping = get_dict(entry, "mapping", kpath, errs)
        overhead = get_dict(entry, "overhead", kpath, errs)
        if mapping is None and overhead is None:
            errs.append(required(kpath, "at least one of mapping or overhead must be set"))
        if mapping is not None:
            mpath = f"{kpath}.mapping"
            key = get_str(mapping, "capacityKey", mpath, errs)
            cap_mult = read_quantity(mapping.get("capacityMultiplier"), f"{mpath}.capacityMultiplier", errs)
            dev_mult = read_quantity(mapping.get("deviceMultiplier"), f"{mpath}.deviceMultiplier", errs)
            if key is not None:
                if key == "":
                    errs.append(invalid(f"{mpath}.capacityKey", "", "capacityKey must not be an empty string"))
                elif key not in capacity:
                    errs.append(FieldError(NOT_FOUND, f"{mpath}.capacityKey", "", key, True))
                if mapping.get("capacityMultiplier") is None:
                    errs.append(required(f"{mpath}.capacityMultiplier", "capacityMultiplier is required when capacityKey is set"))
                elif cap_mult is not None and cap_mult.sign <= 0:
                    errs.append(invalid(f"{mpath}.capacityMultiplier", str(cap_mult), "must be positive"))
            if dev_mult is not None and dev_mult.sign <= 0:
                errs.append(invalid(f"{mpath}.deviceMultiplier", str(dev_mult), "must be positive"))
            if mapping.get("capacityMultiplier") is not None and key is None:
                errs.append(required(f"{mpath}.capacityKey", "capacityKey is required when capacityMultiplier is set"))
            if key is not None and mapping.get("deviceMultiplier") is not None:
                errs.append(invalid(mpath, "{`capacityKey`, `deviceMultiplier`}", "exactly one of `capacityKey` or `deviceMultiplier` may be set"))
        if overhead is not None:
            opath = f"{kpath}.overhead"
            per_pod = read_quantity(overhead.get("perPod"), f"{opath}.perPod", errs)
            per_container = read_quantity(overhead.get("perContainer"), f"{opath}.perContainer", errs)
            if overhead.get("perPod") is None and overhead.get("perContainer") is None:
                errs.append(invalid(opath, "", "at least one of perPod or perContainer must be set"))
            if per_pod is not None and per_pod.sign < 0:
                errs.append(invalid(f"{opath}.perPod", str(per_pod), "must be non-negative"))
            if per_container is not None and per_container.sign < 0:
                errs.append(invalid(f"{opath}.perContainer", str(per_container), "must be non-negative"))


def _validate_device(dev: Obj, old: Obj | None, path: str, per_device: bool, gates: Any, errs: Errs) -> None:
    name = get_str(dev, "name", path, errs)
    if name:
        errs.extend(validate_dns1123_label(name, f"{path}.name"))
    elif dev.get("name") is None or name == "":
        errs.append(required(f"{path}.name"))
    attrs = get_dict(dev, "attributes", path, errs) or {}
    capacity = get_dict(dev, "capacity", path, errs) or {}
    total = len(attrs) + len(capacity)
    if total > MAX_ATTRIBUTES_AND_CAPACITIES:
        errs.append(invalid(path, total, f"the total number of attributes and capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}"))
    values = 0
    for attr in attrs.values():
        lists = [attr.get(k) for k in ("bools", "ints", "strings", "versions")] if isinstance(attr, dict) else []
        n = sum(len(v) for v in lists if isinstance(v, list))
        values += n if n else 1
    if values > MAX_ATTRIBUTE_VALUES:
        errs.append(invalid(path, values, f"the total number of attribute values must not exceed {MAX_ATTRIBUTE_VALUES}"))
    for key, attr in attrs.items():
        errs.extend(validate_qualified_name(key, f"{path}.attributes"))
        errs.extend(_attribute(attr, f"{path}.attributes[{truncate_key(key, ATTRIBUTE_KEY_TRUNCATE)}]"))
    multi = dev.get("allowMultipleAllocations") is True
    get_bool(dev, "allowMultipleAllocations", path, errs)
    if old is None or old.get("capacity") != dev.get("capacity"):
        for key, cap in capacity.items():
            errs.extend(validate_qualified_name(key, f"{path}.capacity"))
            kpath = f"{path}.capacity[{truncate_key(key, ATTRIBUTE_KEY_TRUNCATE)}]"
            if not isinstance(cap, dict):
                errs.append(type_error(kpath, cap, "object"))
                continue
            if cap.get("value") is None:
                errs.append(required(f"{kpath}.value"))
            value = read_quantity(cap.get("value"), f"{kpath}.value", errs)
            policy = get_dict(cap, "requestPolicy", kpath, errs)
            if policy is not None:
                if not multi:
                    errs.append(forbidden(f"{kpath}.requestPolicy", "allowMultipleAllocations must be true"))
                else:
                    _request_policy(value, policy, f"{kpath}.requestPolicy", gates, errs)
    taints = get_list(dev, "taints", path, errs)
    if taints is not None and (old is None or old.get("taints") != taints):
        tpath = f"{path}.taints"
        if not over_limit(taints, TAINTS_MAX, tpath, errs):
            for _, taint, p in dict_entries(taints, tpath, errs):
                errs.extend(validate_taint(taint, None, p))
    consumes = get_list(dev, "consumesCounters", path, errs)
    cpath = f"{path}.consumesCounters"
    if consumes is not None and not over_limit(consumes, MAX_CONSUMPTIONS_PER_DEVICE, cpath, errs):
        keys: list[tuple[int, Any]] = []
        for i, con, p in dict_entries(consumes, cpath, errs):
            keys.append((i, _named_counters(con, "counterSet", p, errs)))
            groups = get_list(con, "compatibilityGroups", p, errs)
            gpath = f"{p}.compatibilityGroups"
            if groups is not None and not over_limit(groups, MAX_COMPATIBILITY_GROUPS, gpath, errs):
                gkeys: list[tuple[int, Any]] = []
                for j, g in enumerate(groups):
                    if not isinstance(g, str):
                        errs.append(type_error(f"{gpath}[{j}]", g, "string"))
                        continue
                    errs.extend(validate_dns1123_label(g, f"{gpath}[{j}]"))
                    gkeys.append((j, g))
                report_duplicates(gkeys, gpath, errs)
        report_duplicates(keys, cpath, errs)
    node_name = get_str(dev, "nodeName", path, errs)
    node_selector = get_dict(dev, "nodeSelector", path, errs)
    all_nodes = get_bool(dev, "allNodes", path, errs)
    if per_device:
        chosen: list[str] = []
        if node_name is not None:
            if node_name:
                chosen.append("`nodeName`")
                errs.extend(validate_dns1123_subdomain(node_name, f"{path}.nodeName"))
            else:
                errs.append(invalid(f"{path}.nodeName", node_name, "must not be empty"))
        if node_selector is not None:
            chosen.append("`nodeSelector`")
            errs.extend(validate_node_selector(node_selector, f"{path}.nodeSelector"))
        if all_nodes is not None:
            if all_nodes:
                chosen.append("`allNodes`")
            else:
                errs.append(invalid(f"{path}.allNodes", False, "must be either unset or set to true"))
        detail = (
            "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set "
            "to true in the ResourceSlice spec"
        )
        if not chosen:
            errs.append(required(path, detail))
        elif len(chosen) > 1:
            errs.append(invalid(path, "{" + ", ".join(chosen) + "}", detail))
    elif node_name is not None or node_selector is not None or all_nodes is not None:
        errs.append(
            invalid(
                path,
                None,
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in "
                "the ResourceSlice spec",
            )
        )
    get_bool(dev, "bindsToNode", path, errs)
    validate_binding_conditions(dev, path, errs)
    _node_allocatable_resources(dev, path, errs)


def _has_list_attributes(devices: list[Any]) -> bool:
    for dev in devices:
        attrs = dev.get("attributes") if isinstance(dev, dict) else None
        for attr in (attrs or {}).values() if isinstance(attrs, dict) else []:
            if isinstance(attr, dict) and any(attr.get(k) is not None for k in ("bools", "ints", "strings", "versions")):
                return True
    return False


def _devices_use(devices: list[Any], key: str) -> bool:
    return any(isinstance(d, dict) and d.get(key) for d in devices)


def validate_slice_spec(spec: Any, old_spec: Obj | None, gates: Any) -> Errs:
    """ResourceSlice spec on create (old_spec None) and update."""
    errs: Errs = []
    path = "spec"
    if not isinstance(spec, dict):
        return [required(path)] if spec is None else [type_error(path, spec, "object")]
    driver = get_str(spec, "driver", path, errs)
    errs.extend(validate_driver_name(driver, "spec.driver"))
    pool = get_dict(spec, "pool", path, errs)
    if pool is None:
        if spec.get("pool") is None:
            errs.append(required("spec.pool"))
    else:
        errs.extend(validate_pool_name(get_str(pool, "name", "spec.pool", errs), "spec.pool.name"))
        count = get_int(pool, "resourceSliceCount", "spec.pool", errs) or 0
        if count <= 0:
            errs.append(invalid("spec.pool.resourceSliceCount", count, "must be greater than zero"))
        gen = get_int(pool, "generation", "spec.pool", errs) or 0
        if gen < 0:
            errs.append(invalid("spec.pool.generation", gen, "must be greater than or equal to zero"))
    if old_spec is not None:
        old_pool = sub_dict(old_spec, "pool")
        new_pool_name = (pool or {}).get("name")
        if new_pool_name != old_pool.get("name"):
            errs.append(invalid("spec.pool.name", new_pool_name, "field is immutable"))
        if spec.get("driver") != old_spec.get("driver"):
            errs.append(invalid("spec.driver", spec.get("driver"), "field is immutable"))
        if spec.get("nodeName") != old_spec.get("nodeName"):
            errs.append(invalid("spec.nodeName", spec.get("nodeName"), "field is immutable"))

    chosen: list[str] = []
    node_name = get_str(spec, "nodeName", path, errs)
    if node_name is not None:
        if node_name:
            chosen.append("`nodeName`")
            errs.extend(validate_dns1123_subdomain(node_name, "spec.nodeName"))
        else:
            errs.append(invalid("spec.nodeName", "", "must be either unset or set to a non-empty string"))
    selector = get_dict(spec, "nodeSelector", path, errs)
    if selector is not None:
        chosen.append("`nodeSelector`")
        errs.extend(validate_node_selector(selector, "spec.nodeSelector"))
        terms = selector.get("nodeSelectorTerms")
        if isinstance(terms, list) and len(terms) != 1:
            errs.append(invalid("spec.nodeSelector.nodeSelectorTerms", terms, "must have exactly one node selector term"))
    for key in ("allNodes", "perDeviceNodeSelection"):
        flag = get_bool(spec, key, path, errs)
        if flag is None:
            continue
        if flag:
            chosen.append(f"`{key}`")
        else:
            errs.append(invalid(f"spec.{key}", False, "must be either unset or set to true"))
    detail = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    if not chosen:
        errs.append(required(path, detail))
    elif len(chosen) > 1:
        errs.append(invalid(path, "{" + ", ".join(chosen) + "}", detail + ", but multiple fields are set"))

    devices = get_list(spec, "devices", path, errs)
    counter_sets = get_list(spec, "sharedCounters", path, errs)
    if spec.get("devices") is not None and spec.get("sharedCounters") is not None:
        errs.append(invalid(path, "", "only one of `sharedCounters` or `devices` is allowed"))
    if devices is not None:
        limit = SLICE_MAX_DEVICES
        if _devices_use(devices, "taints") or _devices_use(devices, "consumesCounters") or _has_list_attributes(devices):
            limit = SLICE_MAX_DEVICES_ADVANCED
        dpath = "spec.devices"
        if not over_limit(devices, limit, dpath, errs):
            old_devices = {
                d.get("name"): d
                for d in ((old_spec or {}).get("devices") or [])
                if isinstance(d, dict) and isinstance((old_spec or {}).get("devices"), list)
            }
            per_device = spec.get("perDeviceNodeSelection") is True
            keys: list[tuple[int, Any]] = []
            for i, dev, p in dict_entries(devices, dpath, errs):
                _validate_device(dev, old_devices.get(dev.get("name")), p, per_device, gates, errs)
                keys.append((i, dev.get("name")))
            report_duplicates(keys, dpath, errs)
    if counter_sets is not None and not over_limit(counter_sets, MAX_COUNTER_SETS, "spec.sharedCounters", errs):
        keys = []
        for i, cs, p in dict_entries(counter_sets, "spec.sharedCounters", errs):
            keys.append((i, _named_counters(cs, "name", p, errs)))
        report_duplicates(keys, "spec.sharedCounters", errs)
    pta = get_str(spec, "partitionTypeAttribute", path, errs)
    if pta is not None:
        errs.extend(_partition_type_attribute(spec, pta, devices or []))
    validate_skip_node_operations(spec, path, errs)
    return errs


def _partition_type_attribute(spec: Obj, name: str, devices: list[Any]) -> Errs:
    errs = validate_fully_qualified_name(name, "spec.partitionTypeAttribute")
    if not _devices_use(devices, "consumesCounters"):
        return [
            *errs,
            invalid("spec.partitionTypeAttribute", name, "may only be set on a slice which declares devices that consume counters"),
        ]
    if errs:
        return errs
    raw_driver = spec.get("driver")
    driver = raw_driver if isinstance(raw_driver, str) else ""
    bare = name[len(driver) + 1 :] if name.startswith(f"{driver}/") else ""
    for i, dev in enumerate(devices):
        if not isinstance(dev, dict) or not dev.get("consumesCounters"):
            continue
        attrs = sub_dict(dev, "attributes")
        attr = attrs.get(name, attrs.get(bare) if bare else None)
        apath = f"spec.devices[{i}].attributes[{name}]"
        if attr is None:
            errs.append(required(apath, "device consumes counters and `partitionTypeAttribute` names this attribute, so it must be set"))
        elif not isinstance(attr, dict) or attr.get("string") is None:
            errs.append(invalid(apath, attr, "must be a string value because `partitionTypeAttribute` names this attribute"))
    return errs


def uppercase_driver_warning(spec: Any) -> str | None:
    driver = spec.get("driver") if isinstance(spec, dict) else None
    if isinstance(driver, str) and driver != driver.lower():
        return f'spec.driver: driver names should be lowercase; "{driver}" contains uppercase characters'
    return None


# --- defaults ---------------------------------------------------------------------------------


def default_slice_spec(spec: Any) -> None:
    devices = spec.get("devices") if isinstance(spec, dict) else None
    for dev in devices if isinstance(devices, list) else []:
        taints = dev.get("taints") if isinstance(dev, dict) else None
        for taint in taints if isinstance(taints, list) else []:
            default_taint(taint)
