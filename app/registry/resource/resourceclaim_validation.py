"""ResourceClaim: status validation (allocation, reservations, device status), the adminAccess rule
for a new allocation, pruning of deallocated devices' status and the status gate drop rules.

``status.allocation.reservedForAnyPod`` is the project's KEP-5194 proposal, behind the alpha gate
``DRAReservedForWorkloads``.
"""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any

from app.protobuf import same_in_go
from app.registry.accessors import (
    Errs,
    dict_entries,
    get_bool,
    get_dict,
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
from app.registry.common import validate_conditions, validate_node_selector
from app.registry.resource.claimspec import (
    ADMIN_ACCESS_DETAIL,
    ADMIN_NAMESPACE_LABEL,
    RequestNames,
    validate_consumer_ref,
    validate_request_ref,
    validate_request_refs,
)
from app.registry.resource.common import (
    ALLOCATION_MESSAGE,
    ATTRIBUTE_KEY_TRUNCATE,
    CONFIG_MAX,
    validate_binding_conditions,
    validate_device_name,
    validate_driver_name,
    validate_opaque_config,
    validate_pool_name,
    validate_qualified_name,
    validate_raw_extension,
    validate_skip_node_operations,
    validate_tolerations,
)
from kube.errors import duplicate, forbidden, invalid, not_supported, required, too_long, too_many
from kube.features import Gate

# --- limits (k8s.io/api/resource/v1/types.go) -------------------------------------------------

ALLOCATION_RESULTS_MAX = 32
RESERVED_FOR_MAX = 256
DEVICE_STATUS_DATA_MAX = 10 * 1024
DEVICE_STATUS_MAX_CONDITIONS = 8
NETWORK_INTERFACE_NAME_MAX = 256
NETWORK_HARDWARE_ADDRESS_MAX = 128
NETWORK_MAX_IPS = 16
CONFIG_SOURCES = ("FromClaim", "FromClass")

_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")

# --- status validation ------------------------------------------------------------------------


def validate_uid(value: str, path: str) -> Errs:
    if not _UUID_RE.match(value):
        return [invalid(path, value, f"error validating uid: invalid UUID format (length {len(value)})")]
    if value != value.lower():
        return [
            invalid(
                path,
                value,
                "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase "
                "hexadecimal characters",
            )
        ]
    return []


def admin_access_status_errors(new: Obj, old: Obj, namespace_labels: dict[str, str]) -> Errs:
    """adminAccess newly granted in an allocation result needs the namespace label too."""
    if namespace_labels.get(ADMIN_NAMESPACE_LABEL) == "true":
        return []
    new_alloc = (new.get("status") or {}).get("allocation")
    old_alloc = (old.get("status") or {}).get("allocation")
    if not isinstance(new_alloc, dict) or old_alloc:
        return []
    devices = new_alloc.get("devices")
    results = devices.get("results") if isinstance(devices, dict) else None
    for i, res in enumerate(results if isinstance(results, list) else []):
        if isinstance(res, dict) and res.get("adminAccess") is True:
            return [forbidden(f"status.allocation.devices.results[{i}].adminAccess", ADMIN_ACCESS_DETAIL)]
    return []


def device_id(obj: Obj) -> tuple[Any, Any, Any, Any]:
    return (obj.get("driver"), obj.get("pool"), obj.get("device"), obj.get("shareID"))


def _render_device_id(key: tuple[Any, Any, Any, Any]) -> str:
    text = f"{key[0]}/{key[1]}/{key[2]}"
    return f"{text}/{key[3]}" if key[3] else text


def validate_allocation(alloc: Obj, path: str, names: RequestNames) -> Errs:
    """A newly set allocation result (stored ones are only checked for immutability)."""
    errs: Errs = []
    devices = get_dict(alloc, "devices", path, errs) or {}
    dpath = f"{path}.devices"
    results = get_list(devices, "results", dpath, errs)
    rpath = f"{dpath}.results"
    if results is not None and not over_limit(results, ALLOCATION_RESULTS_MAX, rpath, errs):
        for _, res, p in dict_entries(results, rpath, errs):
            req = get_str(res, "request", p, errs) or ""
            errs.extend(validate_request_ref(req, f"{p}.request", names) if req else [required(f"{p}.request")])
            errs.extend(validate_driver_name(get_str(res, "driver", p, errs), f"{p}.driver"))
            errs.extend(validate_pool_name(get_str(res, "pool", p, errs), f"{p}.pool"))
            errs.extend(validate_device_name(get_str(res, "device", p, errs), f"{p}.device"))
            validate_binding_conditions(res, p, errs)
            validate_tolerations(res, p, errs)
            share = get_str(res, "shareID", p, errs)
            if share is not None:
                errs.extend(validate_uid(share, f"{p}.shareID"))
            consumed = get_dict(res, "consumedCapacity", p, errs) or {}
            for key, value in consumed.items():
                errs.extend(validate_qualified_name(key, f"{p}.consumedCapacity"))
                read_quantity(value, f"{p}.consumedCapacity[{truncate_key(key, ATTRIBUTE_KEY_TRUNCATE)}]", errs)
            validate_skip_node_operations(res, p, errs)
            get_bool(res, "adminAccess", p, errs)
    configs = get_list(devices, "config", dpath, errs)
    cpath = f"{dpath}.config"
    if configs is not None and not over_limit(configs, 2 * CONFIG_MAX, cpath, errs):
        for _, cfg, p in dict_entries(configs, cpath, errs):
            source = get_str(cfg, "source", p, errs) or ""
            if not source:
                errs.append(required(f"{p}.source"))
            elif source not in CONFIG_SOURCES:
                errs.append(not_supported(f"{p}.source", source, CONFIG_SOURCES))
            validate_request_refs(cfg, p, names, errs)
            validate_opaque_config(cfg, p, False, errs)
    selector = get_dict(alloc, "nodeSelector", path, errs)
    if selector is not None:
        errs.extend(validate_node_selector(selector, f"{path}.nodeSelector"))
    get_bool(alloc, "reservedForAnyPod", path, errs)
    return errs


def _validate_device_status(dev: Obj, path: str, allocated: set[tuple[Any, Any, Any, Any]]) -> Errs:
    errs: Errs = []
    errs.extend(validate_driver_name(get_str(dev, "driver", path, errs), f"{path}.driver"))
    errs.extend(validate_pool_name(get_str(dev, "pool", path, errs), f"{path}.pool"))
    errs.extend(validate_device_name(get_str(dev, "device", path, errs), f"{path}.device"))
    share = get_str(dev, "shareID", path, errs)
    if share is not None:
        errs.extend(validate_uid(share, f"{path}.shareID"))
    key = device_id(dev)
    if key not in allocated:
        errs.append(invalid(path, _render_device_id(key), "must be an allocated device in the claim"))
    conds = get_list(dev, "conditions", path, errs)
    if conds is not None:
        if len(conds) > DEVICE_STATUS_MAX_CONDITIONS:
            errs.append(too_many(f"{path}.conditions", len(conds), DEVICE_STATUS_MAX_CONDITIONS))
        errs.extend(validate_conditions(conds, f"{path}.conditions"))
    if dev.get("data") is not None:
        errs.extend(validate_raw_extension(dev.get("data"), f"{path}.data", False, DEVICE_STATUS_DATA_MAX))
    net = get_dict(dev, "networkData", path, errs)
    if net is not None:
        npath = f"{path}.networkData"
        iface = get_str(net, "interfaceName", npath, errs) or ""
        if len(iface.encode()) > NETWORK_INTERFACE_NAME_MAX:
            errs.append(too_long(f"{npath}.interfaceName", NETWORK_INTERFACE_NAME_MAX))
        hw = get_str(net, "hardwareAddress", npath, errs) or ""
        if len(hw.encode()) > NETWORK_HARDWARE_ADDRESS_MAX:
            errs.append(too_long(f"{npath}.hardwareAddress", NETWORK_HARDWARE_ADDRESS_MAX))
        ips = get_list(net, "ips", npath, errs)
        ipath = f"{npath}.ips"
        if ips is not None and not over_limit(ips, NETWORK_MAX_IPS, ipath, errs):
            keys: list[tuple[int, Any]] = []
            for i, ip in enumerate(ips):
                if not isinstance(ip, str):
                    errs.append(type_error(f"{ipath}[{i}]", ip, "string"))
                    continue
                keys.append((i, ip))
                try:
                    ipaddress.ip_interface(ip)
                    if "/" not in ip:
                        raise ValueError(ip)
                except ValueError:
                    errs.append(
                        invalid(f"{ipath}[{i}]", ip, "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)")
                    )
            report_duplicates(keys, ipath, errs)
    return errs


def validate_claim_status(new: Obj, old: Obj) -> Errs:
    """ResourceClaim /status update rules."""
    errs: Errs = []
    status = get_dict(new, "status", "", errs) or {}
    old_status = sub_dict(old, "status")
    names = RequestNames((new.get("spec") or {}).get("devices") if isinstance(new.get("spec"), dict) else None)

    reserved = get_list(status, "reservedFor", "status", errs)
    rpath = "status.reservedFor"
    if reserved is not None and not over_limit(reserved, RESERVED_FOR_MAX, rpath, errs):
        keys: list[tuple[int, Any]] = []
        for i, ref, p in dict_entries(reserved, rpath, errs):
            errs.extend(validate_consumer_ref(ref, p))
            keys.append((i, ref.get("uid")))
        report_duplicates(keys, rpath, errs)

    alloc = get_dict(status, "allocation", "status", errs)
    allocated: set[tuple[Any, Any, Any, Any]] = set()
    if alloc is not None:
        results = (alloc.get("devices") or {}).get("results") if isinstance(alloc.get("devices"), dict) else None
        for res in results if isinstance(results, list) else []:
            if isinstance(res, dict):
                allocated.add(device_id(res))
    devs = get_list(status, "devices", "status", errs)
    if devs is not None:
        keys = []
        for i, dev, p in dict_entries(devs, "status.devices", errs):
            errs.extend(_validate_device_status(dev, p, allocated))
            keys.append((i, device_id(dev)))
        seen: set[Any] = set()
        for i, key in keys:
            if key in seen:
                errs.append(duplicate(f"status.devices[{i}]", _render_device_id(key)))
            seen.add(key)

    if reserved:
        if alloc is None:
            errs.append(forbidden(rpath, "may not be specified when `allocated` is not set"))
        elif (new.get("metadata") or {}).get("deletionTimestamp"):
            old_uids = {json.dumps(r, sort_keys=True) for r in old_status.get("reservedFor") or []}
            if any(json.dumps(r, sort_keys=True) not in old_uids for r in reserved):
                errs.append(
                    forbidden(rpath, "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set")
                )

    old_alloc = old_status.get("allocation")
    if old_alloc is not None and alloc is not None:
        if not same_in_go(alloc, old_alloc, ALLOCATION_MESSAGE):
            errs.append(invalid("status.allocation", alloc, "field is immutable"))
    elif alloc is not None:
        errs.extend(validate_allocation(alloc, "status.allocation", names))
    return errs


def prune_stale_device_status(new: Obj, old: Obj, gates: Any) -> None:
    """Drop status.devices entries of devices that were deallocated by this update."""
    old_status = sub_dict(old, "status")
    if not (gates.enabled(Gate.DRAResourceClaimDeviceStatus) or old_status.get("devices")):
        return
    status = new.get("status")
    if not isinstance(status, dict) or not isinstance(status.get("devices"), list):
        return
    old_alloc = old_status.get("allocation")
    if not isinstance(old_alloc, dict):
        return
    old_results = (old_alloc.get("devices") or {}).get("results") or []
    old_ids = {device_id(r) for r in old_results if isinstance(r, dict)}
    new_alloc = status.get("allocation")
    new_results = ((new_alloc or {}).get("devices") or {}).get("results") or [] if isinstance(new_alloc, dict) else []
    new_ids = {device_id(r) for r in new_results if isinstance(r, dict)}
    kept = [
        d for d in status["devices"] if not (isinstance(d, dict) and device_id(d) in old_ids and device_id(d) not in new_ids)
    ]
    if kept:
        status["devices"] = kept
    else:
        status.pop("devices", None)
