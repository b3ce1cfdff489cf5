"""ResourcePoolStatusRequest (v1alpha3): defaults and validation of the spec and of the status,
after the declarative rules of upstream's v1.37 types (required, formats, minimum, maximum,
list sizes, immutability)."""

from __future__ import annotations

from typing import Any

import orjson

from app.registry.accessors import Errs, dict_entries, get_dict, get_int, get_list, get_str, type_error
from app.registry.base import Obj
from app.registry.common import validate_status_conditions
from app.registry.objectmeta import dns1123_subdomain_problems, validate_dns1123_subdomain
from app.registry.resource.common import validate_fully_qualified_name, validate_pool_name
from kube.errors import GoSyntax, duplicate, invalid, required, too_long, too_many

LIMIT_DEFAULT = 100
LIMIT_MAX = 1000
POOLS_MAX = 1000
CONDITIONS_MAX = 10
# partitionSummary and shareableSummary.capacity
SUMMARY_MAX = 32
# PartitionTypeStatus's fields in the order Go prints the struct (a duplicate's value).
PARTITION_TYPE_STATUS_FIELDS = ("attribute", "type", "total", "allocatable")
VALIDATION_ERROR_MAX_BYTES = 256


def default_request_spec(spec: Any) -> None:
    if isinstance(spec, dict) and spec.get("limit") is None:
        spec["limit"] = LIMIT_DEFAULT


def _caseless_long_name(value: str, path: str) -> Errs:
    """Upstream's ``k8s-long-name-caseless`` format: a DNS subdomain once lower-cased."""
    return [invalid(path, value, problem) for problem in dns1123_subdomain_problems(value.lower())]


def _at_least(obj: Obj, key: str, path: str, minimum: int, errs: Errs) -> None:
    value = get_int(obj, key, path, errs)
    if value is not None and value < minimum:
        errs.append(invalid(f"{path}.{key}", value, f"must be greater than or equal to {minimum}"))


def validate_request_spec(spec: Any) -> Errs:
    errs: Errs = []
    if not isinstance(spec, dict):
        return [required("spec")] if spec is None else [type_error("spec", spec, "object")]
    driver = get_str(spec, "driver", "spec", errs)
    if not driver:
        errs.append(required("spec.driver"))
    else:
        errs.extend(_caseless_long_name(driver, "spec.driver"))
    pool = get_str(spec, "poolName", "spec", errs)
    if pool is not None:
        errs.extend(validate_pool_name(pool, "spec.poolName"))
    limit = get_int(spec, "limit", "spec", errs)
    if limit is not None and limit < 1:
        errs.append(invalid("spec.limit", limit, "must be greater than or equal to 1"))
    elif limit is not None and limit > LIMIT_MAX:
        errs.append(invalid("spec.limit", limit, f"must be less than or equal to {LIMIT_MAX}"))
    # Without DRAPartitionableDevicesType the field is gone before this (kube.gatedfields).
    attribute = get_str(spec, "defaultPartitionTypeAttribute", "spec", errs)
    if attribute is not None:
        errs.extend(validate_fully_qualified_name(attribute, "spec.defaultPartitionTypeAttribute"))
    return errs


def validate_request_spec_update(new: Any, old: Any) -> Errs:
    return [invalid("spec", new, "field is immutable")] if new != old else []


# What Go's encoding/json escapes in strings beyond what JSON requires.
_GO_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _go_json(entry: Obj, fields: tuple[str, ...]) -> str:
    """A status struct as Go's json.Marshal writes it: its fields in declaration order, unset ones left out."""
    text = orjson.dumps({key: entry[key] for key in fields if entry.get(key) not in (None, "")}).decode()
    for raw, escaped in _GO_JSON_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


def _required_count(obj: Obj, key: str, path: str, errs: Errs) -> None:
    """A count that must be there (upstream: a required pointer, then a minimum of 0)."""
    if obj.get(key) is None:
        errs.append(required(f"{path}.{key}"))
    else:
        _at_least(obj, key, path, 0, errs)


def _validate_partition_summary(entries: list[Any], path: str, errs: Errs) -> None:
    if len(entries) > SUMMARY_MAX:
        errs.append(too_many(path, len(entries), SUMMARY_MAX))
        return
    # A list map keyed by (attribute, type): each later repeat of a key is a duplicate.
    seen: set[tuple[Any, Any]] = set()
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue
        map_key = (entry.get("attribute") or "", entry.get("type") or "")
        if map_key in seen:
            errs.append(duplicate(f"{path}[{index}]", GoSyntax(_go_json(entry, PARTITION_TYPE_STATUS_FIELDS))))
        seen.add(map_key)
    for _, entry, epath in dict_entries(entries, path, errs):
        for key in ("attribute", "type"):
            if not get_str(entry, key, epath, errs):
                errs.append(required(f"{epath}.{key}"))
        for key in ("total", "allocatable"):
            _required_count(entry, key, epath, errs)


def _validate_shareable_summary(summary: Obj, path: str, errs: Errs) -> None:
    for key in ("fullyAvailableDevices", "partiallyAvailableDevices"):
        _required_count(summary, key, path, errs)
    capacity = get_list(summary, "capacity", path, errs)
    if capacity is None:
        return
    if len(capacity) > SUMMARY_MAX:
        errs.append(too_many(f"{path}.capacity", len(capacity), SUMMARY_MAX))
        return
    for _, entry, epath in dict_entries(capacity, f"{path}.capacity", errs):
        if not get_str(entry, "name", epath, errs):
            errs.append(required(f"{epath}.name"))
        for key in ("total", "consumed", "available"):
            if entry.get(key) is None:
                errs.append(required(f"{epath}.{key}"))


def _validate_pool(pool: Obj, path: str) -> Errs:
    errs: Errs = []
    driver = get_str(pool, "driver", path, errs)
    if not driver:
        errs.append(required(f"{path}.driver"))
    else:
        errs.extend(_caseless_long_name(driver, f"{path}.driver"))
    name = get_str(pool, "poolName", path, errs)
    if not name:
        errs.append(required(f"{path}.poolName"))
    else:
        errs.extend(validate_pool_name(name, f"{path}.poolName"))
    # Upstream's generation is a required plain int64: 0 counts as unset.
    if not pool.get("generation"):
        errs.append(required(f"{path}.generation"))
    else:
        _at_least(pool, "generation", path, 0, errs)
    _at_least(pool, "resourceSliceCount", path, 1, errs)
    for key in ("totalDevices", "allocatedDevices", "availableDevices", "unavailableDevices"):
        _at_least(pool, key, path, 0, errs)
    node = get_str(pool, "nodeName", path, errs)
    if node is not None:
        errs.extend(validate_dns1123_subdomain(node, f"{path}.nodeName"))
    message = get_str(pool, "validationError", path, errs)
    if message is not None and len(message.encode()) > VALIDATION_ERROR_MAX_BYTES:
        errs.append(too_long(f"{path}.validationError", VALIDATION_ERROR_MAX_BYTES))
    partitions = get_list(pool, "partitionSummary", path, errs)
    if partitions is not None:
        _validate_partition_summary(partitions, f"{path}.partitionSummary", errs)
    shareable = get_dict(pool, "shareableSummary", path, errs)
    if shareable is not None:
        _validate_shareable_summary(shareable, f"{path}.shareableSummary", errs)
    return errs


def validate_request_status(new: Any, old: Any) -> Errs:
    """A status write: once a status is there the request is complete and its status immutable."""
    if old is not None:
        return [invalid("status", new, "field is immutable")] if new != old else []
    errs: Errs = []
    if new is None:
        return errs
    if not isinstance(new, dict):
        return [type_error("status", new, "object")]
    if new.get("poolCount") is None:
        errs.append(required("status.poolCount"))
    _at_least(new, "poolCount", "status", 0, errs)
    pools = get_list(new, "pools", "status", errs)
    if pools is not None:
        if len(pools) > POOLS_MAX:
            errs.append(too_many("status.pools", len(pools), POOLS_MAX))
        else:
            for _, pool, ppath in dict_entries(pools, "status.pools", errs):
                errs.extend(_validate_pool(pool, ppath))
    validate_status_conditions(new, CONDITIONS_MAX, errs)
    return errs
