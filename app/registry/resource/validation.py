"""Validation, defaulting and feature-gate drop rules shared by the resource.k8s.io kinds.

Behaviour follows upstream v1.37 (pkg/apis/resource/validation, the registry strategies and
the declarative rules in k8s.io/api/resource/v1): same field paths, limits and messages. Objects
are plain JSON dicts; every accessor tolerates wrong JSON types and reports them as field errors
instead of raising, because a malformed request must answer 422, never 500.

Two project proposals are implemented here as well, each behind its own alpha gate:
``DRAReservedForWorkloads`` (KEP-5194: ``spec.reservedFor``, ``status.allocation.reservedForAnyPod``)
and ``DRANodeAllocatableResources`` (KEP-5517: ``devices[].nodeAllocatableResources``).
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import orjson

from app.registry.objectmeta import dns1123_label_problems, dns1123_subdomain_problems
from kube.cel import validate_selector_expression
from kube.errors import (
    NOT_FOUND,
    FieldError,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
    too_long,
    too_many,
)
from kube.labels import label_key_errors, label_value_errors
from kube.quantity import Quantity, QuantityError

Obj = dict[str, Any]
Errs = list[FieldError]

# --- limits (k8s.io/api/resource/v1/types.go) -------------------------------------------------

DEVICE_REQUESTS_MAX = 32
FIRST_AVAILABLE_MAX = 8
SELECTORS_MAX = 32
CONSTRAINTS_MAX = 32
CONFIG_MAX = 32
DERIVED_ATTRIBUTES_MAX = 32
ALLOCATION_RESULTS_MAX = 32
RESERVED_FOR_MAX = 256
SLICE_MAX_DEVICES = 128
SLICE_MAX_DEVICES_ADVANCED = 64
MAX_COUNTER_SETS = 8
MAX_COUNTERS = 32
MAX_CONSUMPTIONS_PER_DEVICE = 2
MAX_COMPATIBILITY_GROUPS = 2
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_ATTRIBUTE_VALUES = 48
ATTRIBUTE_VALUE_MAX_LEN = 64
DEVICE_MAX_DOMAIN_LEN = 63
DEVICE_MAX_ID_LEN = 32
DRIVER_NAME_MAX_LEN = 63
POOL_NAME_MAX_LEN = 253
TAINTS_MAX = 16
BINDING_CONDITIONS_MAX = 4
VALID_VALUES_MAX = 10
OPAQUE_PARAMETERS_MAX = 10 * 1024
DEVICE_STATUS_DATA_MAX = 10 * 1024
DEVICE_STATUS_MAX_CONDITIONS = 8
TAINT_RULE_MAX_CONDITIONS = 8
NETWORK_INTERFACE_NAME_MAX = 256
NETWORK_HARDWARE_ADDRESS_MAX = 128
NETWORK_MAX_IPS = 16
ATTRIBUTE_KEY_TRUNCATE = DEVICE_MAX_DOMAIN_LEN + 1 + DEVICE_MAX_ID_LEN

ADMIN_NAMESPACE_LABEL = "resource.kubernetes.io/admin-access"
ADMIN_ACCESS_DETAIL = (
    f"admin access to devices requires the `{ADMIN_NAMESPACE_LABEL}: true` label on the containing namespace"
)
ALLOCATION_MODES = ("All", "ExactCount")
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")
TOLERATION_OPERATORS = ("Equal", "Exists")
CONFIG_SOURCES = ("FromClaim", "FromClass")
SKIP_NODE_OPERATIONS = ("*", "NodePrepareResources", "NodeUnprepareResources")

_C_IDENTIFIER_FMT = "[A-Za-z_][A-Za-z0-9_]*"
_C_IDENTIFIER_RE = re.compile(f"^{_C_IDENTIFIER_FMT}$")
_NUM = r"(0|[1-9]\d*)"
_PRE = r"(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD = r"[0-9a-zA-Z-]+"
SEMVER_RE = re.compile(rf"^{_NUM}\.{_NUM}\.{_NUM}(-{_PRE}(\.{_PRE})*)?(\+{_BUILD}(\.{_BUILD})*)?$")
_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_CONDITION_REASON_RE = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_NODE_ALLOCATABLE = ("cpu", "memory", "ephemeral-storage")

# --- schemas of the proposal fields (strict field validation and pruning must know them) ------

CLAIM_SPEC_SCHEMA_PROPERTIES: dict[str, dict[str, Obj]] = {
    "io.k8s.api.resource.v1.ResourceClaimSpec": {
        "reservedFor": {
            "description": "KEP-5194 (gate DRAReservedForWorkloads): the consumer the claim is reserved for "
            "once allocated, instead of the pods that use it.",
            "allOf": [{"$ref": "#/$defs/io.k8s.api.resource.v1.ResourceClaimConsumerReference"}],
        },
    },
}
ALLOCATION_SCHEMA_PROPERTIES: dict[str, dict[str, Obj]] = {
    "io.k8s.api.resource.v1.AllocationResult": {
        "reservedForAnyPod": {
            "description": "KEP-5194 (gate DRAReservedForWorkloads): any pod may use the allocated devices.",
            "type": ["boolean", "null"],
        },
    },
}


# --- small helpers ----------------------------------------------------------------------------


def _sub(obj: Any, key: str) -> Obj:
    """``obj[key]`` when both are objects, else an empty dict (for lenient look-ups)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _type_error(path: str, value: Any, wanted: str) -> FieldError:
    return invalid(path, value, f"must be of type {wanted}, not {_json_type(value)}")


def _dict(obj: Any, key: str, path: str, errs: Errs) -> Obj | None:
    """``obj[key]`` when it is an object; None when absent; a type error otherwise."""
    if not isinstance(obj, dict):
        return None
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        errs.append(_type_error(f"{path}.{key}" if path else key, value, "object"))
        return None
    return value


def _list(obj: Any, key: str, path: str, errs: Errs) -> list[Any] | None:
    if not isinstance(obj, dict):
        return None
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        errs.append(_type_error(f"{path}.{key}" if path else key, value, "array"))
        return None
    return value


def _str(obj: Any, key: str, path: str, errs: Errs) -> str | None:
    if not isinstance(obj, dict):
        return None
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        errs.append(_type_error(f"{path}.{key}" if path else key, value, "string"))
        return None
    return value


def _int(obj: Any, key: str, path: str, errs: Errs) -> int | None:
    if not isinstance(obj, dict):
        return None
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        errs.append(_type_error(f"{path}.{key}" if path else key, value, "integer"))
        return None
    return value


def _bool(obj: Any, key: str, path: str, errs: Errs) -> bool | None:
    if not isinstance(obj, dict):
        return None
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        errs.append(_type_error(f"{path}.{key}" if path else key, value, "boolean"))
        return None
    return value


def _quantity(value: Any, path: str, errs: Errs) -> Quantity | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        errs.append(_type_error(path, value, "string"))
        return None
    try:
        return Quantity.parse(value)
    except (QuantityError, ValueError) as exc:
        errs.append(invalid(path, value, str(exc)))
        return None


def _items(value: list[Any], path: str, errs: Errs) -> Iterable[tuple[int, Obj, str]]:
    """(index, item, item path) for every object item; non-objects become type errors."""
    for i, item in enumerate(value):
        p = f"{path}[{i}]"
        if not isinstance(item, dict):
            errs.append(_type_error(p, item, "object"))
            continue
        yield i, item, p


def _truncate_key(key: str, limit: int) -> str:
    """Upstream shortens long map keys in field paths, keeping both ends."""
    limit = max(limit, 16)
    if len(key) <= limit:
        return key
    remaining = limit - 3
    return key[: (remaining + 1) // 2] + "..." + key[len(key) - remaining // 2 :]


def _too_many(value: list[Any] | dict[str, Any] | None, limit: int, path: str, errs: Errs) -> bool:
    """Upstream stops validating a list/map that exceeds its limit (DOS protection)."""
    if value is not None and len(value) > limit:
        errs.append(too_many(path, len(value), limit))
        return True
    return False


def _duplicates(keys: list[tuple[int, Any]], path: str, errs: Errs) -> None:
    seen: set[Any] = set()
    for i, key in keys:
        if key in seen:
            errs.append(duplicate(f"{path}[{i}]", key))
        else:
            seen.add(key)


def _dns_label(value: str, path: str) -> Errs:
    return [invalid(path, value, p) for p in dns1123_label_problems(value)]


def _dns_subdomain(value: str, path: str) -> Errs:
    return [invalid(path, value, p) for p in dns1123_subdomain_problems(value)]


def validate_driver_name(value: str | None, path: str) -> Errs:
    """CSI driver name rules: required, at most 63 bytes, a DNS subdomain ignoring case."""
    value = value or ""
    errs: Errs = []
    if not value:
        errs.append(required(path))
    if len(value.encode()) > DRIVER_NAME_MAX_LEN:
        errs.append(too_long(path, DRIVER_NAME_MAX_LEN))
    errs.extend(invalid(path, value, p) for p in dns1123_subdomain_problems(value.lower()))
    return errs


def validate_pool_name(value: str | None, path: str) -> Errs:
    value = value or ""
    if not value:
        return [required(path)]
    errs: Errs = []
    if len(value.encode()) > POOL_NAME_MAX_LEN:
        errs.append(too_long(path, POOL_NAME_MAX_LEN))
    for part in value.split("/"):
        errs.extend(_dns_subdomain(part, path))
    return errs


def validate_device_name(value: str | None, path: str) -> Errs:
    return _dns_label(value or "", path)


def _c_identifier(value: str, path: str) -> Errs:
    errs: Errs = []
    if len(value.encode()) > DEVICE_MAX_ID_LEN:
        errs.append(too_long(path, DEVICE_MAX_ID_LEN))
    if not _C_IDENTIFIER_RE.match(value):
        errs.append(
            invalid(
                path,
                value,
                "a valid C identifier must start with alphabetic character or '_', followed by a string of "
                "alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for "
                f"validation is '{_C_IDENTIFIER_FMT}')",
            )
        )
    return errs


def validate_qualified_name(name: str, path: str) -> Errs:
    """Attribute / capacity names: ``identifier`` or ``domain/identifier``."""
    parts = name.split("/")
    if len(parts) == 1:
        return _c_identifier(parts[0], path)
    if len(parts) == 2:
        errs: Errs = []
        if not parts[0]:
            errs.append(invalid(path, "", "the domain must not be empty"))
        else:
            errs.extend(validate_driver_name(parts[0], path))
        if not parts[1]:
            errs.append(invalid(path, "", "the name must not be empty"))
        else:
            errs.extend(_c_identifier(parts[1], path))
        return errs
    return [invalid(path, name, "must not contain more than one slash")]


def validate_fully_qualified_name(name: str, path: str) -> Errs:
    errs = validate_qualified_name(name, path)
    if "/" not in name:
        errs.append(invalid(path, name, "a fully qualified name must be a domain and a name separated by a slash"))
    return errs


def _label_name(value: str, path: str) -> Errs:
    return [invalid(path, value, msg) for msg in label_key_errors(value)]


def _label_value(value: str, path: str) -> Errs:
    return [invalid(path, value, msg) for msg in label_value_errors(value)]


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


def _raw_extension(value: Any, path: str, stored: bool, limit: int) -> Errs:
    """Opaque parameters / device data: a JSON object of bounded size."""
    if value is None:
        return [required(path)]
    if isinstance(value, str):
        # A RawExtension may reach us already serialized (e.g. from YAML tooling).
        size = len(value.encode())
        try:
            parsed = json.loads(value)
        except ValueError as exc:
            if not stored and size > limit:
                return [too_long(path, limit)]
            return [invalid(path, "<value omitted>", f"error parsing data as JSON: {exc}")]
    else:
        parsed = value
        try:
            size = len(orjson.dumps(value))  # compact UTF-8 JSON, as a client sends it
        except TypeError:  # integers beyond 64 bits
            size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
    if not stored and size > limit:
        return [too_long(path, limit)]
    if parsed is None:
        return [required(path)]
    if not isinstance(parsed, dict):
        return [invalid(path, "<value omitted>", "must be a valid JSON object")]
    return []


# --- node selectors (core validation) ---------------------------------------------------------


def validate_node_selector(selector: Obj, path: str) -> Errs:
    errs: Errs = []
    terms = _list(selector, "nodeSelectorTerms", path, errs)
    if not terms:
        if terms is not None or "nodeSelectorTerms" not in selector or not errs:
            errs.append(required(f"{path}.nodeSelectorTerms", "must have at least one node selector term"))
        return errs
    for _, term, tpath in _items(terms, f"{path}.nodeSelectorTerms", errs):
        exprs = _list(term, "matchExpressions", tpath, errs) or []
        for _, req, rpath in _items(exprs, f"{tpath}.matchExpressions", errs):
            errs.extend(_node_selector_requirement(req, rpath))
        fields = _list(term, "matchFields", tpath, errs) or []
        for _, req, rpath in _items(fields, f"{tpath}.matchFields", errs):
            errs.extend(_node_field_requirement(req, rpath))
    return errs


def _node_selector_requirement(req: Obj, path: str) -> Errs:
    errs: Errs = []
    op = _str(req, "operator", path, errs) or ""
    values = _list(req, "values", path, errs) or []
    if op in ("In", "NotIn"):
        if not values:
            errs.append(required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
    elif op in ("Exists", "DoesNotExist"):
        if values:
            errs.append(forbidden(f"{path}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    elif op in ("Gt", "Lt"):
        if len(values) != 1:
            errs.append(required(f"{path}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"))
    else:
        errs.append(invalid(f"{path}.operator", op, "not a valid selector operator"))
    key = _str(req, "key", path, errs) or ""
    errs.extend(_label_name(key, f"{path}.key"))
    return errs


def _node_field_requirement(req: Obj, path: str) -> Errs:
    errs: Errs = []
    op = _str(req, "operator", path, errs) or ""
    values = _list(req, "values", path, errs) or []
    if op in ("In", "NotIn"):
        if len(values) != 1:
            errs.append(
                required(f"{path}.values", "must be only one value when `operator` is 'In' or 'NotIn' for node field selector")
            )
    else:
        errs.append(invalid(f"{path}.operator", op, "not a valid selector operator"))
    key = _str(req, "key", path, errs) or ""
    if key != "metadata.name":
        errs.append(not_supported(f"{path}.key", key, ["metadata.name"]))
    return errs


def _validate_node_name(value: str, path: str) -> Errs:
    return _dns_subdomain(value, path)


# --- conditions (metav1) ----------------------------------------------------------------------


def validate_conditions(conditions: list[Any], path: str) -> Errs:
    errs: Errs = []
    seen: set[str] = set()
    for _, cond, cpath in _items(conditions, path, errs):
        ctype = _str(cond, "type", cpath, errs) or ""
        if ctype in seen:
            errs.append(duplicate(f"{cpath}.type", ctype))
        seen.add(ctype)
        if not ctype:
            errs.append(required(f"{cpath}.type", "must be set"))
        else:
            errs.extend(_label_name(ctype, f"{cpath}.type"))
        status = _str(cond, "status", cpath, errs) or ""
        if status not in ("True", "False", "Unknown"):
            errs.append(not_supported(f"{cpath}.status", status, ["False", "True", "Unknown"]))
        if not cond.get("lastTransitionTime"):
            errs.append(required(f"{cpath}.lastTransitionTime", "must be set"))
        reason = _str(cond, "reason", cpath, errs) or ""
        if not reason:
            errs.append(required(f"{cpath}.reason", "must be set"))
        else:
            if len(reason) > 1024:
                errs.append(too_long(f"{cpath}.reason", 1024))
            if not _CONDITION_REASON_RE.match(reason):
                errs.append(
                    invalid(
                        f"{cpath}.reason",
                        reason,
                        "a condition reason must start with alphabetic character, optionally followed by a string of "
                        "alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. "
                        "'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex "
                        "used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')",
                    )
                )
        message = _str(cond, "message", cpath, errs) or ""
        if len(message.encode()) > 32768:
            errs.append(too_long(f"{cpath}.message", 32768))
        gen = _int(cond, "observedGeneration", cpath, errs)
        if gen is not None and gen < 0:
            errs.append(invalid(f"{cpath}.observedGeneration", gen, "must be greater than or equal to zero"))
    return errs


# --- ResourceClaim spec -----------------------------------------------------------------------


class _RequestNames:
    """Request names of a claim and, for firstAvailable requests, their subrequest names."""

    def __init__(self, devices: Obj | None) -> None:
        self.names: dict[str, set[str] | None] = {}
        for req in (devices or {}).get("requests") or [] if isinstance(devices, dict) else []:
            if not isinstance(req, dict) or not isinstance(req.get("name"), str):
                continue
            subs = req.get("firstAvailable")
            if isinstance(subs, list) and subs:
                self.names[req["name"]] = {s["name"] for s in subs if isinstance(s, dict) and isinstance(s.get("name"), str)}
            else:
                self.names[req["name"]] = None

    def has(self, ref: str) -> bool:
        parts = ref.split("/")
        if len(parts) > 2 or parts[0] not in self.names:
            return False
        if len(parts) == 1:
            return True
        subs = self.names[parts[0]]
        return subs is not None and parts[1] in subs


_REF_DETAIL = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"


def _request_ref(name: str, path: str, names: _RequestNames) -> Errs:
    parts = name.split("/")
    if len(parts) > 2:
        return [invalid(path, name, _REF_DETAIL)]
    errs: Errs = []
    for part in parts:
        errs.extend(_dns_label(part, path))
    if not names.has(name):
        errs.append(invalid(path, name, _REF_DETAIL))
    return errs


def _request_refs(obj: Obj, path: str, names: _RequestNames, errs: Errs) -> None:
    refs = _list(obj, "requests", path, errs)
    if refs is None or _too_many(refs, DEVICE_REQUESTS_MAX, f"{path}.requests", errs):
        return
    keys: list[tuple[int, Any]] = []
    for i, ref in enumerate(refs):
        rpath = f"{path}.requests[{i}]"
        if not isinstance(ref, str):
            errs.append(_type_error(rpath, ref, "string"))
            continue
        errs.extend(_request_ref(ref, rpath, names))
        keys.append((i, ref))
    _duplicates(keys, f"{path}.requests", errs)


class ClaimOptions:
    """Knobs of claim-spec validation: whether CEL is grandfathered and which gates shape rules."""

    def __init__(self, gates: Any, stored: bool = False) -> None:
        self.gates = gates
        self.stored = stored
        self.constraint_attributes: dict[str, set[str]] = {}

    def enabled(self, name: str) -> bool:
        return bool(self.gates.enabled(name)) if self.gates is not None else False


def validate_selectors(obj: Obj, path: str, opts: ClaimOptions, errs: Errs) -> None:
    selectors = _list(obj, "selectors", path, errs)
    spath = f"{path}.selectors"
    if selectors is None or _too_many(selectors, SELECTORS_MAX, spath, errs):
        return
    for _, sel, p in _items(selectors, spath, errs):
        cel = _dict(sel, "cel", p, errs)
        if cel is None:
            if "cel" not in sel or sel.get("cel") is None:
                errs.append(required(f"{p}.cel"))
            continue
        expr = _str(cel, "expression", f"{p}.cel", errs)
        if expr is None:
            if cel.get("expression") is None:
                errs.append(required(f"{p}.cel.expression"))
            continue
        if not opts.stored:
            errs.extend(validate_selector_expression(expr, f"{p}.cel.expression"))


def _validate_toleration(tol: Obj, path: str) -> Errs:
    errs: Errs = []
    key = _str(tol, "key", path, errs) or ""
    if key:
        errs.extend(_label_name(key, f"{path}.key"))
    op = _str(tol, "operator", path, errs) or ""
    value = _str(tol, "value", path, errs) or ""
    if op == "Exists":
        if value:
            errs.append(invalid(f"{path}.value", value, "must be empty for operator `Exists`"))
    elif op == "Equal":
        errs.extend(_label_value(value, f"{path}.value"))
    elif op == "":
        errs.append(required(f"{path}.operator"))
    else:
        errs.append(not_supported(f"{path}.operator", op, TOLERATION_OPERATORS))
    effect = _str(tol, "effect", path, errs) or ""
    if effect and effect not in TAINT_EFFECTS:
        errs.append(not_supported(f"{path}.effect", effect, TAINT_EFFECTS))
    _int(tol, "tolerationSeconds", path, errs)
    return errs


def _validate_tolerations(obj: Obj, path: str, errs: Errs) -> None:
    tols = _list(obj, "tolerations", path, errs)
    for _, tol, p in _items(tols or [], f"{path}.tolerations", errs):
        errs.extend(_validate_toleration(tol, p))


def _validate_allocation_mode(req: Obj, path: str, errs: Errs) -> None:
    mode = _str(req, "allocationMode", path, errs) or ""
    count = _int(req, "count", path, errs) or 0
    if mode == "All":
        if count != 0:
            errs.append(invalid(f"{path}.count", count, "must not be specified when allocationMode is 'All'"))
    elif mode == "ExactCount":
        if count <= 0:
            errs.append(invalid(f"{path}.count", count, "must be greater than zero"))
    else:
        errs.append(not_supported(f"{path}.allocationMode", mode, ALLOCATION_MODES))


def _validate_capacity_requests(req: Obj, path: str, errs: Errs) -> None:
    cap = _dict(req, "capacity", path, errs)
    if cap is None:
        return
    requests = _dict(cap, "requests", f"{path}.capacity", errs) or {}
    for key, value in requests.items():
        kpath = f"{path}.capacity.requests[{_truncate_key(key, ATTRIBUTE_KEY_TRUNCATE)}]"
        errs.extend(validate_qualified_name(key, f"{path}.capacity.requests"))
        _quantity(value, kpath, errs)


def _validate_derived_attributes(req: Obj, path: str, opts: ClaimOptions, request_name: str, errs: Errs) -> None:
    attrs = _list(req, "derivedAttributes", path, errs)
    dpath = f"{path}.derivedAttributes"
    if attrs is None or _too_many(attrs, DERIVED_ATTRIBUTES_MAX, dpath, errs):
        return
    keys: list[tuple[int, Any]] = []
    for i, attr, p in _items(attrs, dpath, errs):
        name = _str(attr, "name", p, errs) or ""
        keys.append((i, name))
        if not name:
            errs.append(required(f"{p}.name"))
        else:
            errs.extend(validate_fully_qualified_name(name, f"{p}.name"))
            if not _attribute_used_by_constraint(name, request_name, opts.constraint_attributes):
                errs.append(
                    invalid(
                        f"{p}.name",
                        name,
                        "must be referenced by at least one matchAttribute or distinctAttribute constraint targeting "
                        "this request",
                    )
                )
        expr = _str(attr, "expression", p, errs) or ""
        if not expr:
            errs.append(required(f"{p}.expression"))
        elif not opts.stored:
            errs.extend(validate_selector_expression(expr, f"{p}.expression", result_type="any"))
    _duplicates(keys, dpath, errs)


def _attribute_used_by_constraint(name: str, request: str, attrs: dict[str, set[str]]) -> bool:
    if name in attrs.get("", set()) or name in attrs.get(request, set()):
        return True
    parent, sep, _ = request.partition("/")
    return bool(sep) and name in attrs.get(parent, set())


def _validate_exact(req: Obj, path: str, opts: ClaimOptions, request_name: str, errs: Errs, sub: bool) -> None:
    cls = _str(req, "deviceClassName", path, errs) or ""
    if not cls:
        errs.append(required(f"{path}.deviceClassName"))
    else:
        errs.extend(_dns_subdomain(cls, f"{path}.deviceClassName"))
    validate_selectors(req, path, opts, errs)
    _validate_derived_attributes(req, path, opts, request_name, errs)
    _validate_allocation_mode(req, path, errs)
    _validate_tolerations(req, path, errs)
    _validate_capacity_requests(req, path, errs)
    if not sub:
        _bool(req, "adminAccess", path, errs)


def _validate_request(req: Obj, path: str, opts: ClaimOptions, errs: Errs) -> None:
    name = _str(req, "name", path, errs) or ""
    if not name:
        errs.append(required(f"{path}.name"))
    else:
        errs.extend(_dns_label(name, f"{path}.name"))
    first = _list(req, "firstAvailable", path, errs)
    exactly = _dict(req, "exactly", path, errs)
    has_first = bool(first)
    has_exactly = exactly is not None
    if has_first and has_exactly:
        errs.append(invalid(path, None, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
    elif has_first and first is not None:
        fpath = f"{path}.firstAvailable"
        if _too_many(first, FIRST_AVAILABLE_MAX, fpath, errs):
            return
        keys: list[tuple[int, Any]] = []
        for i, sub, p in _items(first, fpath, errs):
            sub_name = _str(sub, "name", p, errs) or ""
            keys.append((i, sub_name))
            if not sub_name:
                errs.append(required(f"{p}.name"))
            else:
                errs.extend(_dns_label(sub_name, f"{p}.name"))
            _validate_exact(sub, p, opts, f"{name}/{sub_name}", errs, sub=True)
        _duplicates(keys, fpath, errs)
    elif exactly is not None:
        _validate_exact(exactly, f"{path}.exactly", opts, name, errs, sub=False)
    elif not (isinstance(req.get("exactly"), list | str | int) or isinstance(req.get("firstAvailable"), dict | str)):
        errs.append(required(path, "exactly one of `exactly` or `firstAvailable` is required"))


def _validate_constraint(con: Obj, path: str, names: _RequestNames, opts: ClaimOptions, errs: Errs) -> None:
    _request_refs(con, path, names, errs)
    match = _str(con, "matchAttribute", path, errs)
    distinct = _str(con, "distinctAttribute", path, errs)
    if match is not None:
        errs.extend(validate_fully_qualified_name(match, f"{path}.matchAttribute"))
    elif distinct is not None:
        errs.extend(validate_fully_qualified_name(distinct, f"{path}.distinctAttribute"))
    elif opts.enabled("DRAConsumableCapacity"):
        # Upstream's message really says "but multiple fields are set" for the missing case.
        errs.append(
            required(path, 'exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set')
        )
    else:
        errs.append(required(f"{path}.matchAttribute"))


def _validate_opaque_config(cfg: Obj, path: str, stored: bool, errs: Errs) -> None:
    opaque = _dict(cfg, "opaque", path, errs)
    if opaque is None:
        if not isinstance(cfg.get("opaque"), list | str | int | float | bool):
            errs.append(required(f"{path}.opaque"))
        return
    op = f"{path}.opaque"
    driver = _str(opaque, "driver", op, errs)
    errs.extend(validate_driver_name(driver, f"{op}.driver"))
    errs.extend(_raw_extension(opaque.get("parameters"), f"{op}.parameters", stored, OPAQUE_PARAMETERS_MAX))


def _gather_constraint_attributes(constraints: list[Any]) -> dict[str, set[str]]:
    attrs: dict[str, set[str]] = {}
    for con in constraints:
        if not isinstance(con, dict):
            continue
        name = con.get("matchAttribute") or con.get("distinctAttribute")
        if not isinstance(name, str):
            continue
        raw_refs = con.get("requests")
        refs = raw_refs if isinstance(raw_refs, list) else []
        targets = [r for r in refs if isinstance(r, str)] or [""]
        for target in targets:
            attrs.setdefault(target, set()).add(name)
    return attrs


def validate_claim_spec(spec: Any, path: str, opts: ClaimOptions) -> Errs:
    """A ResourceClaimSpec (also ``spec.spec`` of a template)."""
    errs: Errs = []
    if spec is None:
        return errs
    if not isinstance(spec, dict):
        return [_type_error(path, spec, "object")]
    devices = _dict(spec, "devices", path, errs)
    if devices is not None:
        dpath = f"{path}.devices"
        names = _RequestNames(devices)
        constraints = _list(devices, "constraints", dpath, errs)
        opts.constraint_attributes = _gather_constraint_attributes(constraints or [])
        requests = _list(devices, "requests", dpath, errs)
        rpath = f"{dpath}.requests"
        if requests is not None and not _too_many(requests, DEVICE_REQUESTS_MAX, rpath, errs):
            keys: list[tuple[int, Any]] = []
            for i, req, p in _items(requests, rpath, errs):
                _validate_request(req, p, opts, errs)
                keys.append((i, req.get("name")))
            _duplicates(keys, rpath, errs)
        cpath = f"{dpath}.constraints"
        if constraints is not None and not _too_many(constraints, CONSTRAINTS_MAX, cpath, errs):
            for _, con, p in _items(constraints, cpath, errs):
                _validate_constraint(con, p, names, opts, errs)
        configs = _list(devices, "config", dpath, errs)
        gpath = f"{dpath}.config"
        if configs is not None and not _too_many(configs, CONFIG_MAX, gpath, errs):
            for _, cfg, p in _items(configs, gpath, errs):
                _request_refs(cfg, p, names, errs)
                _validate_opaque_config(cfg, p, opts.stored, errs)
    reserved = _dict(spec, "reservedFor", path, errs)
    if reserved is not None:
        errs.extend(_validate_consumer_ref(reserved, f"{path}.reservedFor"))
    return errs


def _validate_consumer_ref(ref: Obj, path: str) -> Errs:
    errs: Errs = []
    for key in ("resource", "name", "uid"):
        if not _str(ref, key, path, errs):
            errs.append(required(f"{path}.{key}"))
    _str(ref, "apiGroup", path, errs)
    return errs


def admin_access_errors(spec: Any, path: str, namespace_labels: dict[str, str]) -> Errs:
    """The namespace-label rule for adminAccess in a claim (template) spec, upstream's first hit only."""
    if namespace_labels.get(ADMIN_NAMESPACE_LABEL) == "true" or not isinstance(spec, dict):
        return []
    devices = spec.get("devices")
    requests = devices.get("requests") if isinstance(devices, dict) else None
    for i, req in enumerate(requests if isinstance(requests, list) else []):
        exactly = req.get("exactly") if isinstance(req, dict) else None
        if isinstance(exactly, dict) and exactly.get("adminAccess") is True:
            return [forbidden(f"{path}.devices.requests[{i}].adminAccess", ADMIN_ACCESS_DETAIL)]
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


# --- ResourceClaim status ---------------------------------------------------------------------


def _binding_conditions(obj: Obj, path: str, errs: Errs) -> None:
    conds = _list(obj, "bindingConditions", path, errs)
    failures = _list(obj, "bindingFailureConditions", path, errs)
    cpath, fpath = f"{path}.bindingConditions", f"{path}.bindingFailureConditions"
    conds_ok = conds is not None and not _too_many(conds, BINDING_CONDITIONS_MAX, cpath, errs)
    fail_ok = failures is not None and not _too_many(failures, BINDING_CONDITIONS_MAX, fpath, errs)
    conds = conds or []
    failures = failures or []
    if conds_ok:
        for i, c in enumerate(conds):
            if isinstance(c, str):
                errs.extend(_label_name(c, f"{cpath}[{i}]"))
            else:
                errs.append(_type_error(f"{cpath}[{i}]", c, "string"))
    if fail_ok:
        for i, c in enumerate(failures):
            if isinstance(c, str):
                errs.extend(_label_name(c, f"{fpath}[{i}]"))
            else:
                errs.append(_type_error(f"{fpath}[{i}]", c, "string"))
    str_conds = [c for c in conds if isinstance(c, str)]
    _duplicates([(i, c) for i, c in enumerate(conds) if isinstance(c, str)], cpath, errs)
    seen: set[str] = set()
    for i, c in enumerate(failures):
        if not isinstance(c, str):
            continue
        if c in seen:
            errs.append(duplicate(f"{fpath}[{i}]", c))
        seen.add(c)
        if c in str_conds:
            errs.append(invalid(f"{fpath}[{i}]", c, "bindingFailureConditions must not overlap with bindingConditions"))
    if not conds and failures:
        errs.append(invalid(cpath, conds, "bindingConditions are required to use bindingFailureConditions"))
    if not failures and conds:
        errs.append(invalid(fpath, failures, "bindingFailureConditions are required to use bindingConditions"))


def _skip_node_operations(obj: Obj, path: str, errs: Errs) -> None:
    ops = _list(obj, "skipNodeOperations", path, errs)
    if ops is None:
        return
    spath = f"{path}.skipNodeOperations"
    keys: list[tuple[int, Any]] = []
    for i, op in enumerate(ops):
        if not isinstance(op, str) or op not in SKIP_NODE_OPERATIONS:
            errs.append(not_supported(f"{spath}[{i}]", op, SKIP_NODE_OPERATIONS))
        else:
            keys.append((i, op))
    _duplicates(keys, spath, errs)
    present = set(ops) if all(isinstance(o, str) for o in ops) else set()
    if "NodePrepareResources" in present and not present & {"NodeUnprepareResources", "*"}:
        errs.append(invalid(spath, ops, "NodePrepareResources cannot be skipped unless NodeUnprepareResources is also skipped"))


def _device_id(obj: Obj) -> tuple[Any, Any, Any, Any]:
    return (obj.get("driver"), obj.get("pool"), obj.get("device"), obj.get("shareID"))


def _render_device_id(key: tuple[Any, Any, Any, Any]) -> str:
    text = f"{key[0]}/{key[1]}/{key[2]}"
    return f"{text}/{key[3]}" if key[3] else text


def validate_allocation(alloc: Obj, path: str, names: _RequestNames) -> Errs:
    """A newly set allocation result (stored ones are only checked for immutability)."""
    errs: Errs = []
    devices = _dict(alloc, "devices", path, errs) or {}
    dpath = f"{path}.devices"
    results = _list(devices, "results", dpath, errs)
    rpath = f"{dpath}.results"
    if results is not None and not _too_many(results, ALLOCATION_RESULTS_MAX, rpath, errs):
        for _, res, p in _items(results, rpath, errs):
            req = _str(res, "request", p, errs) or ""
            errs.extend(_request_ref(req, f"{p}.request", names) if req else [required(f"{p}.request")])
            errs.extend(validate_driver_name(_str(res, "driver", p, errs), f"{p}.driver"))
            errs.extend(validate_pool_name(_str(res, "pool", p, errs), f"{p}.pool"))
            errs.extend(validate_device_name(_str(res, "device", p, errs), f"{p}.device"))
            _binding_conditions(res, p, errs)
            _validate_tolerations(res, p, errs)
            share = _str(res, "shareID", p, errs)
            if share is not None:
                errs.extend(validate_uid(share, f"{p}.shareID"))
            consumed = _dict(res, "consumedCapacity", p, errs) or {}
            for key, value in consumed.items():
                errs.extend(validate_qualified_name(key, f"{p}.consumedCapacity"))
                _quantity(value, f"{p}.consumedCapacity[{_truncate_key(key, ATTRIBUTE_KEY_TRUNCATE)}]", errs)
            _skip_node_operations(res, p, errs)
            _bool(res, "adminAccess", p, errs)
    configs = _list(devices, "config", dpath, errs)
    cpath = f"{dpath}.config"
    if configs is not None and not _too_many(configs, 2 * CONFIG_MAX, cpath, errs):
        for _, cfg, p in _items(configs, cpath, errs):
            source = _str(cfg, "source", p, errs) or ""
            if not source:
                errs.append(required(f"{p}.source"))
            elif source not in CONFIG_SOURCES:
                errs.append(not_supported(f"{p}.source", source, CONFIG_SOURCES))
            _request_refs(cfg, p, names, errs)
            _validate_opaque_config(cfg, p, False, errs)
    selector = _dict(alloc, "nodeSelector", path, errs)
    if selector is not None:
        errs.extend(validate_node_selector(selector, f"{path}.nodeSelector"))
    _bool(alloc, "reservedForAnyPod", path, errs)
    return errs


def _validate_device_status(dev: Obj, path: str, allocated: set[tuple[Any, Any, Any, Any]]) -> Errs:
    errs: Errs = []
    errs.extend(validate_driver_name(_str(dev, "driver", path, errs), f"{path}.driver"))
    errs.extend(validate_pool_name(_str(dev, "pool", path, errs), f"{path}.pool"))
    errs.extend(validate_device_name(_str(dev, "device", path, errs), f"{path}.device"))
    share = _str(dev, "shareID", path, errs)
    if share is not None:
        errs.extend(validate_uid(share, f"{path}.shareID"))
    key = _device_id(dev)
    if key not in allocated:
        errs.append(invalid(path, _render_device_id(key), "must be an allocated device in the claim"))
    conds = _list(dev, "conditions", path, errs)
    if conds is not None:
        if len(conds) > DEVICE_STATUS_MAX_CONDITIONS:
            errs.append(too_many(f"{path}.conditions", len(conds), DEVICE_STATUS_MAX_CONDITIONS))
        errs.extend(validate_conditions(conds, f"{path}.conditions"))
    if dev.get("data") is not None:
        errs.extend(_raw_extension(dev.get("data"), f"{path}.data", False, DEVICE_STATUS_DATA_MAX))
    net = _dict(dev, "networkData", path, errs)
    if net is not None:
        npath = f"{path}.networkData"
        iface = _str(net, "interfaceName", npath, errs) or ""
        if len(iface.encode()) > NETWORK_INTERFACE_NAME_MAX:
            errs.append(too_long(f"{npath}.interfaceName", NETWORK_INTERFACE_NAME_MAX))
        hw = _str(net, "hardwareAddress", npath, errs) or ""
        if len(hw.encode()) > NETWORK_HARDWARE_ADDRESS_MAX:
            errs.append(too_long(f"{npath}.hardwareAddress", NETWORK_HARDWARE_ADDRESS_MAX))
        ips = _list(net, "ips", npath, errs)
        ipath = f"{npath}.ips"
        if ips is not None and not _too_many(ips, NETWORK_MAX_IPS, ipath, errs):
            keys: list[tuple[int, Any]] = []
            for i, ip in enumerate(ips):
                if not isinstance(ip, str):
                    errs.append(_type_error(f"{ipath}[{i}]", ip, "string"))
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
            _duplicates(keys, ipath, errs)
    return errs


def validate_claim_status(new: Obj, old: Obj) -> Errs:
    """ResourceClaim /status update rules."""
    errs: Errs = []
    status = _dict(new, "status", "", errs) or {}
    old_status = _sub(old, "status")
    names = _RequestNames((new.get("spec") or {}).get("devices") if isinstance(new.get("spec"), dict) else None)

    reserved = _list(status, "reservedFor", "status", errs)
    rpath = "status.reservedFor"
    if reserved is not None and not _too_many(reserved, RESERVED_FOR_MAX, rpath, errs):
        keys: list[tuple[int, Any]] = []
        for i, ref, p in _items(reserved, rpath, errs):
            errs.extend(_validate_consumer_ref(ref, p))
            keys.append((i, ref.get("uid")))
        _duplicates(keys, rpath, errs)

    alloc = _dict(status, "allocation", "status", errs)
    allocated: set[tuple[Any, Any, Any, Any]] = set()
    if alloc is not None:
        results = (alloc.get("devices") or {}).get("results") if isinstance(alloc.get("devices"), dict) else None
        for res in results if isinstance(results, list) else []:
            if isinstance(res, dict):
                allocated.add(_device_id(res))
    devs = _list(status, "devices", "status", errs)
    if devs is not None:
        keys = []
        for i, dev, p in _items(devs, "status.devices", errs):
            errs.extend(_validate_device_status(dev, p, allocated))
            keys.append((i, _device_id(dev)))
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
        if alloc != old_alloc:
            errs.append(invalid("status.allocation", alloc, "field is immutable"))
    elif alloc is not None:
        errs.extend(validate_allocation(alloc, "status.allocation", names))
    return errs


def prune_stale_device_status(new: Obj, old: Obj, gates: Any) -> None:
    """Drop status.devices entries of devices that were deallocated by this update."""
    old_status = _sub(old, "status")
    if not (gates.enabled("DRAResourceClaimDeviceStatus") or old_status.get("devices")):
        return
    status = new.get("status")
    if not isinstance(status, dict) or not isinstance(status.get("devices"), list):
        return
    old_alloc = old_status.get("allocation")
    if not isinstance(old_alloc, dict):
        return
    old_results = (old_alloc.get("devices") or {}).get("results") or []
    old_ids = {_device_id(r) for r in old_results if isinstance(r, dict)}
    new_alloc = status.get("allocation")
    new_results = ((new_alloc or {}).get("devices") or {}).get("results") or [] if isinstance(new_alloc, dict) else []
    new_ids = {_device_id(r) for r in new_results if isinstance(r, dict)}
    kept = [
        d for d in status["devices"] if not (isinstance(d, dict) and _device_id(d) in old_ids and _device_id(d) not in new_ids)
    ]
    if kept:
        status["devices"] = kept
    else:
        status.pop("devices", None)


# --- ResourceSlice ----------------------------------------------------------------------------


def _attribute(attr: Any, path: str) -> Errs:
    errs: Errs = []
    if not isinstance(attr, dict):
        return [_type_error(path, attr, "object")]
    count = 0
    for key in ("bool", "int", "string", "version"):
        if attr.get(key) is not None:
            count += 1
    if attr.get("bool") is not None:
        _bool(attr, "bool", path, errs)
    if attr.get("int") is not None:
        _int(attr, "int", path, errs)
    s = _str(attr, "string", path, errs)
    if s is not None and len(s.encode()) > ATTRIBUTE_VALUE_MAX_LEN:
        errs.append(too_long(f"{path}.string", ATTRIBUTE_VALUE_MAX_LEN))
    v = _str(attr, "version", path, errs)
    if v is not None:
        errs.extend(_version(v, f"{path}.version"))
    for key in ("bools", "ints", "strings", "versions"):
        values = _list(attr, key, path, errs)
        if values is None:
            continue
        count += 1
        lpath = f"{path}.{key}"
        if not values:
            errs.append(invalid(lpath, values, "must not be empty if specified"))
        for i, item in enumerate(values):
            ipath = f"{lpath}[{i}]"
            if key == "bools" and not isinstance(item, bool):
                errs.append(_type_error(ipath, item, "boolean"))
            elif key == "ints" and (isinstance(item, bool) or not isinstance(item, int)):
                errs.append(_type_error(ipath, item, "integer"))
            elif key in ("strings", "versions") and not isinstance(item, str):
                errs.append(_type_error(ipath, item, "string"))
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
    valid_values = _list(policy, "validValues", path, errs)
    valid_range = _dict(policy, "validRange", path, errs)
    default = _quantity(policy.get("default"), f"{path}.default", errs)
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
        options = [_quantity(v, f"{vpath}[{i}]", errs) for i, v in enumerate(valid_values)]
        for i in range(len(options) - 1):
            a, b = options[i], options[i + 1]
            if a is not None and b is not None and a > b:
                errs.append(invalid(f"{vpath}[{i + 1}]", str(b), "values must be sorted in ascending order"))
        if _too_many(valid_values, VALID_VALUES_MAX, vpath, errs):
            return
        fractional = gates.enabled("DRAFractionalCapacityRange")
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
        _duplicates(keys, vpath, errs)
        if not found:
            errs.append(invalid(vpath, str(default), "default value is not valid according to the requestPolicy"))
    elif valid_range is not None:
        if default is None:
            if policy.get("default") is None:
                errs.append(required(f"{path}.default", "required when validRange is defined"))
            return
        _valid_range(value, default, valid_range, f"{path}.validRange", gates, errs)


def _valid_range(cap: Quantity, default: Quantity, rng: Obj, path: str, gates: Any, errs: Errs) -> None:
    lo = _quantity(rng.get("min"), f"{path}.min", errs)
    if lo is None:
        if rng.get("min") is None:
            errs.append(required(f"{path}.min", "required when validRange is defined"))
        return
    hi = _quantity(rng.get("max"), f"{path}.max", errs)
    step = _quantity(rng.get("step"), f"{path}.step", errs)
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
    fractional = gates.enabled("DRAFractionalCapacityRange")

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
        errs.append(_type_error(path, counters, "object"))
        return
    if _too_many(list(counters), MAX_COUNTERS, path, errs):
        return
    for key, counter in counters.items():
        errs.extend(_dns_label(key, path))
        kpath = f"{path}[{_truncate_key(key, 63)}]"
        if not isinstance(counter, dict):
            errs.append(_type_error(kpath, counter, "object"))
            continue
        if counter.get("value") is None:
            errs.append(required(f"{kpath}.value"))
        else:
            _quantity(counter.get("value"), f"{kpath}.value", errs)


def _validate_taint(taint: Obj, old: Obj | None, path: str) -> Errs:
    errs: Errs = []
    key = _str(taint, "key", path, errs) or ""
    errs.extend(_label_name(key, f"{path}.key"))
    value = _str(taint, "value", path, errs) or ""
    if value:
        errs.extend(_label_value(value, f"{path}.value"))
    effect = _str(taint, "effect", path, errs) or ""
    if old is None or old.get("effect") != taint.get("effect"):
        if not effect:
            errs.append(required(f"{path}.effect"))
        elif effect not in TAINT_EFFECTS:
            errs.append(not_supported(f"{path}.effect", effect, TAINT_EFFECTS))
    _str(taint, "timeAdded", path, errs)
    return errs


def _is_node_allocatable(name: str) -> bool:
    return name in _NODE_ALLOCATABLE or name.startswith("hugepages-")


def _node_allocatable_resources(dev: Obj, path: str, errs: Errs) -> None:
    resources = _dict(dev, "nodeAllocatableResources", path, errs)
    if resources is None:
        return
    capacity = _sub(dev, "capacity")
    for name, entry in resources.items():
        kpath = f"{path}.nodeAllocatableResources[{name}]"
        if not _is_node_allocatable(name):
            errs.append(invalid(kpath, name, "must be a node allocatable resource name"))
        if not isinstance(entry, dict):
            errs.append(_type_error(kpath, entry, "object"))
            continue
        mapping = _dict(entry, "mapping", kpath, errs)
        overhead = _dict(entry, "overhead", kpath, errs)
        if mapping is None and overhead is None:
            errs.append(required(kpath, "at least one of mapping or overhead must be set"))
        if mapping is not None:
            mpath = f"{kpath}.mapping"
            key = _str(mapping, "capacityKey", mpath, errs)
            cap_mult = _quantity(mapping.get("capacityMultiplier"), f"{mpath}.capacityMultiplier", errs)
            dev_mult = _quantity(mapping.get("deviceMultiplier"), f"{mpath}.deviceMultiplier", errs)
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
            per_pod = _quantity(overhead.get("perPod"), f"{opath}.perPod", errs)
            per_container = _quantity(overhead.get("perContainer"), f"{opath}.perContainer", errs)
            if overhead.get("perPod") is None and overhead.get("perContainer") is None:
                errs.append(invalid(opath, "", "at least one of perPod or perContainer must be set"))
            if per_pod is not None and per_pod.sign < 0:
                errs.append(invalid(f"{opath}.perPod", str(per_pod), "must be non-negative"))
            if per_container is not None and per_container.sign < 0:
                errs.append(invalid(f"{opath}.perContainer", str(per_container), "must be non-negative"))


def _validate_device(dev: Obj, old: Obj | None, path: str, per_device: bool, gates: Any, errs: Errs) -> None:
    name = _str(dev, "name", path, errs)
    if name:
        errs.extend(_dns_label(name, f"{path}.name"))
    elif dev.get("name") is None or name == "":
        errs.append(required(f"{path}.name"))
    attrs = _dict(dev, "attributes", path, errs) or {}
    capacity = _dict(dev, "capacity", path, errs) or {}
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
        errs.extend(_attribute(attr, f"{path}.attributes[{_truncate_key(key, ATTRIBUTE_KEY_TRUNCATE)}]"))
    multi = dev.get("allowMultipleAllocations") is True
    _bool(dev, "allowMultipleAllocations", path, errs)
    if old is None or old.get("capacity") != dev.get("capacity"):
        for key, cap in capacity.items():
            errs.extend(validate_qualified_name(key, f"{path}.capacity"))
            kpath = f"{path}.capacity[{_truncate_key(key, ATTRIBUTE_KEY_TRUNCATE)}]"
            if not isinstance(cap, dict):
                errs.append(_type_error(kpath, cap, "object"))
                continue
            if cap.get("value") is None:
                errs.append(required(f"{kpath}.value"))
            value = _quantity(cap.get("value"), f"{kpath}.value", errs)
            policy = _dict(cap, "requestPolicy", kpath, errs)
            if policy is not None:
                if not multi:
                    errs.append(forbidden(f"{kpath}.requestPolicy", "allowMultipleAllocations must be true"))
                else:
                    _request_policy(value, policy, f"{kpath}.requestPolicy", gates, errs)
    taints = _list(dev, "taints", path, errs)
    if taints is not None and (old is None or old.get("taints") != taints):
        tpath = f"{path}.taints"
        if not _too_many(taints, TAINTS_MAX, tpath, errs):
            for _, taint, p in _items(taints, tpath, errs):
                errs.extend(_validate_taint(taint, None, p))
    consumes = _list(dev, "consumesCounters", path, errs)
    cpath = f"{path}.consumesCounters"
    if consumes is not None and not _too_many(consumes, MAX_CONSUMPTIONS_PER_DEVICE, cpath, errs):
        keys: list[tuple[int, Any]] = []
        for i, con, p in _items(consumes, cpath, errs):
            cs = _str(con, "counterSet", p, errs) or ""
            keys.append((i, cs))
            errs.extend(_dns_label(cs, f"{p}.counterSet") if cs else [required(f"{p}.counterSet")])
            counters = con.get("counters")
            if not counters:
                errs.append(required(f"{p}.counters"))
            else:
                _counter_map(counters, f"{p}.counters", errs)
            groups = _list(con, "compatibilityGroups", p, errs)
            gpath = f"{p}.compatibilityGroups"
            if groups is not None and not _too_many(groups, MAX_COMPATIBILITY_GROUPS, gpath, errs):
                gkeys: list[tuple[int, Any]] = []
                for j, g in enumerate(groups):
                    if not isinstance(g, str):
                        errs.append(_type_error(f"{gpath}[{j}]", g, "string"))
                        continue
                    errs.extend(_dns_label(g, f"{gpath}[{j}]"))
                    gkeys.append((j, g))
                _duplicates(gkeys, gpath, errs)
        _duplicates(keys, cpath, errs)
    node_name = _str(dev, "nodeName", path, errs)
    node_selector = _dict(dev, "nodeSelector", path, errs)
    all_nodes = _bool(dev, "allNodes", path, errs)
    if per_device:
        chosen: list[str] = []
        if node_name is not None:
            if node_name:
                chosen.append("`nodeName`")
                errs.extend(_validate_node_name(node_name, f"{path}.nodeName"))
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
    _bool(dev, "bindsToNode", path, errs)
    _binding_conditions(dev, path, errs)
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
        return [required(path)] if spec is None else [_type_error(path, spec, "object")]
    driver = _str(spec, "driver", path, errs)
    errs.extend(validate_driver_name(driver, "spec.driver"))
    pool = _dict(spec, "pool", path, errs)
    if pool is None:
        if spec.get("pool") is None:
            errs.append(required("spec.pool"))
    else:
        errs.extend(validate_pool_name(_str(pool, "name", "spec.pool", errs), "spec.pool.name"))
        count = _int(pool, "resourceSliceCount", "spec.pool", errs) or 0
        if count <= 0:
            errs.append(invalid("spec.pool.resourceSliceCount", count, "must be greater than zero"))
        gen = _int(pool, "generation", "spec.pool", errs) or 0
        if gen < 0:
            errs.append(invalid("spec.pool.generation", gen, "must be greater than or equal to zero"))
    if old_spec is not None:
        old_pool = _sub(old_spec, "pool")
        new_pool_name = (pool or {}).get("name")
        if new_pool_name != old_pool.get("name"):
            errs.append(invalid("spec.pool.name", new_pool_name, "field is immutable"))
        if spec.get("driver") != old_spec.get("driver"):
            errs.append(invalid("spec.driver", spec.get("driver"), "field is immutable"))
        if spec.get("nodeName") != old_spec.get("nodeName"):
            errs.append(invalid("spec.nodeName", spec.get("nodeName"), "field is immutable"))

    chosen: list[str] = []
    node_name = _str(spec, "nodeName", path, errs)
    if node_name is not None:
        if node_name:
            chosen.append("`nodeName`")
            errs.extend(_validate_node_name(node_name, "spec.nodeName"))
        else:
            errs.append(invalid("spec.nodeName", "", "must be either unset or set to a non-empty string"))
    selector = _dict(spec, "nodeSelector", path, errs)
    if selector is not None:
        chosen.append("`nodeSelector`")
        errs.extend(validate_node_selector(selector, "spec.nodeSelector"))
        terms = selector.get("nodeSelectorTerms")
        if isinstance(terms, list) and len(terms) != 1:
            errs.append(invalid("spec.nodeSelector.nodeSelectorTerms", terms, "must have exactly one node selector term"))
    for key in ("allNodes", "perDeviceNodeSelection"):
        flag = _bool(spec, key, path, errs)
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

    devices = _list(spec, "devices", path, errs)
    counter_sets = _list(spec, "sharedCounters", path, errs)
    if spec.get("devices") is not None and spec.get("sharedCounters") is not None:
        errs.append(invalid(path, "", "only one of `sharedCounters` or `devices` is allowed"))
    if devices is not None:
        limit = SLICE_MAX_DEVICES
        if _devices_use(devices, "taints") or _devices_use(devices, "consumesCounters") or _has_list_attributes(devices):
            limit = SLICE_MAX_DEVICES_ADVANCED
        dpath = "spec.devices"
        if not _too_many(devices, limit, dpath, errs):
            old_devices = {
                d.get("name"): d
                for d in ((old_spec or {}).get("devices") or [])
                if isinstance(d, dict) and isinstance((old_spec or {}).get("devices"), list)
            }
            per_device = spec.get("perDeviceNodeSelection") is True
            keys: list[tuple[int, Any]] = []
            for i, dev, p in _items(devices, dpath, errs):
                _validate_device(dev, old_devices.get(dev.get("name")), p, per_device, gates, errs)
                keys.append((i, dev.get("name")))
            _duplicates(keys, dpath, errs)
    if counter_sets is not None and not _too_many(counter_sets, MAX_COUNTER_SETS, "spec.sharedCounters", errs):
        keys = []
        for i, cs, p in _items(counter_sets, "spec.sharedCounters", errs):
            name = _str(cs, "name", p, errs) or ""
            keys.append((i, name))
            errs.extend(_dns_label(name, f"{p}.name") if name else [required(f"{p}.name")])
            counters = cs.get("counters")
            if not counters:
                errs.append(required(f"{p}.counters"))
            else:
                _counter_map(counters, f"{p}.counters", errs)
        _duplicates(keys, "spec.sharedCounters", errs)
    pta = _str(spec, "partitionTypeAttribute", path, errs)
    if pta is not None:
        errs.extend(_partition_type_attribute(spec, pta, devices or []))
    _skip_node_operations(spec, path, errs)
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
        attrs = _sub(dev, "attributes")
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


# --- DeviceClass ------------------------------------------------------------------------------


def _is_extended_resource_name(name: str) -> bool:
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return not label_key_errors("requests." + name)


def validate_device_class_spec(spec: Any, old_spec: Obj | None, gates: Any) -> Errs:
    errs: Errs = []
    if spec is None:
        return errs
    if not isinstance(spec, dict):
        return [_type_error("spec", spec, "object")]
    old = old_spec or {}
    stored = old_spec is not None and spec.get("selectors") == old.get("selectors")
    selectors = _list(spec, "selectors", "spec", errs)
    if selectors is not None:
        validate_selectors(spec, "spec", ClaimOptions(gates, stored=stored), errs)
    stored = old_spec is not None and spec.get("config") == old.get("config")
    configs = _list(spec, "config", "spec", errs)
    if configs is not None and not _too_many(configs, CONFIG_MAX, "spec.config", errs):
        for _, cfg, p in _items(configs, "spec.config", errs):
            _validate_opaque_config(cfg, p, stored, errs)
    ern = _str(spec, "extendedResourceName", "spec", errs)
    if ern is not None and not _is_extended_resource_name(ern):
        errs.append(invalid("spec.extendedResourceName", ern, "must be a valid extended resource name"))
    return errs


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


# --- defaults ---------------------------------------------------------------------------------


def now_rfc3339() -> str:
    """Current time truncated to seconds, as upstream serializes metav1.Time."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _default_request(req: Obj) -> None:
    if not req.get("allocationMode"):
        req["allocationMode"] = "ExactCount"
    if req["allocationMode"] == "ExactCount" and not req.get("count"):
        req["count"] = 1
    for tol in req.get("tolerations") or [] if isinstance(req.get("tolerations"), list) else []:
        if isinstance(tol, dict) and not tol.get("operator"):
            tol["operator"] = "Equal"


def default_claim_spec(spec: Any) -> None:
    """allocationMode ExactCount, count 1, toleration operator Equal (§2.6)."""
    if not isinstance(spec, dict) or not isinstance(spec.get("devices"), dict):
        return
    requests = spec["devices"].get("requests")
    for req in requests if isinstance(requests, list) else []:
        if not isinstance(req, dict):
            continue
        if isinstance(req.get("exactly"), dict):
            _default_request(req["exactly"])
        subs = req.get("firstAvailable")
        for sub in subs if isinstance(subs, list) else []:
            if isinstance(sub, dict):
                _default_request(sub)


def default_taint(taint: Any) -> None:
    if isinstance(taint, dict) and not taint.get("timeAdded"):
        taint["timeAdded"] = now_rfc3339()


def default_slice_spec(spec: Any) -> None:
    devices = spec.get("devices") if isinstance(spec, dict) else None
    for dev in devices if isinstance(devices, list) else []:
        taints = dev.get("taints") if isinstance(dev, dict) else None
        for taint in taints if isinstance(taints, list) else []:
            default_taint(taint)


def default_claim_status(status: Any) -> None:
    """Tolerations copied into allocation results get the same operator default."""
    alloc = status.get("allocation") if isinstance(status, dict) else None
    devices = alloc.get("devices") if isinstance(alloc, dict) else None
    results = devices.get("results") if isinstance(devices, dict) else None
    for res in results if isinstance(results, list) else []:
        tols = res.get("tolerations") if isinstance(res, dict) else None
        for tol in tols if isinstance(tols, list) else []:
            if isinstance(tol, dict) and not tol.get("operator"):
                tol["operator"] = "Equal"


# --- feature-gate drop rules ------------------------------------------------------------------


def _requests(spec: Any) -> list[Obj]:
    devices = spec.get("devices") if isinstance(spec, dict) else None
    reqs = devices.get("requests") if isinstance(devices, dict) else None
    return [r for r in reqs if isinstance(r, dict)] if isinstance(reqs, list) else []


def _request_bodies(spec: Any) -> list[Obj]:
    """Every exactly / firstAvailable item (the places request fields live)."""
    out: list[Obj] = []
    for req in _requests(spec):
        if isinstance(req.get("exactly"), dict):
            out.append(req["exactly"])
        subs = req.get("firstAvailable")
        if isinstance(subs, list):
            out.extend(s for s in subs if isinstance(s, dict))
    return out


def _results(status: Any) -> list[Obj]:
    alloc = status.get("allocation") if isinstance(status, dict) else None
    devices = alloc.get("devices") if isinstance(alloc, dict) else None
    res = devices.get("results") if isinstance(devices, dict) else None
    return [r for r in res if isinstance(r, dict)] if isinstance(res, list) else []


def _constraints(spec: Any) -> list[Obj]:
    devices = spec.get("devices") if isinstance(spec, dict) else None
    cons = devices.get("constraints") if isinstance(devices, dict) else None
    return [c for c in cons if isinstance(c, dict)] if isinstance(cons, list) else []


def _pop_all(items: Iterable[Obj], *keys: str) -> None:
    for item in items:
        for key in keys:
            item.pop(key, None)


def drop_claim_spec_fields(spec: Any, old_spec: Any, gates: Any) -> None:
    """Clear claim-spec fields of disabled gates unless the old spec already used them."""
    if not isinstance(spec, dict) or spec == old_spec:
        return  # an unchanged spec uses only what the old one did (status and metadata writes)

    def used(pred: Callable[[Any], bool]) -> bool:
        return old_spec is not None and pred(old_spec)

    if not gates.enabled("DRAAdminAccess") and not used(
        lambda s: any(r.get("exactly", {}).get("adminAccess") is not None for r in _requests(s) if isinstance(r.get("exactly"), dict))
    ):
        _pop_all((r["exactly"] for r in _requests(spec) if isinstance(r.get("exactly"), dict)), "adminAccess")
    if not gates.enabled("DRAPrioritizedList") and not used(lambda s: any(r.get("firstAvailable") for r in _requests(s))):
        _pop_all(_requests(spec), "firstAvailable")
    if not gates.enabled("DRADeviceTaints") and not used(lambda s: any(b.get("tolerations") for b in _request_bodies(s))):
        _pop_all(_request_bodies(spec), "tolerations")
    if not gates.enabled("DRAConsumableCapacity") and not used(
        lambda s: any(c.get("distinctAttribute") is not None for c in _constraints(s))
        or any(b.get("capacity") is not None for b in _request_bodies(s))
    ):
        _pop_all(_constraints(spec), "distinctAttribute")
        _pop_all(_request_bodies(spec), "capacity")
    if not gates.enabled("DRADerivedAttributes") and not used(lambda s: any(b.get("derivedAttributes") for b in _request_bodies(s))):
        _pop_all(_request_bodies(spec), "derivedAttributes")
    if not gates.enabled("DRAReservedForWorkloads") and not used(lambda s: s.get("reservedFor") is not None):
        spec.pop("reservedFor", None)


def drop_claim_status_fields(claim: Obj, old: Obj | None, gates: Any) -> None:
    """Clear status fields of disabled gates unless the old claim already used them."""
    status = claim.get("status")
    if not isinstance(status, dict):
        return
    old_status = _sub(old, "status")
    old_spec = (old or {}).get("spec")
    old_results = _results(old_status)
    results = _results(status)
    if not gates.enabled("DRAAdminAccess"):
        spec_used = any(
            isinstance(r.get("exactly"), dict) and r["exactly"].get("adminAccess") is not None for r in _requests(old_spec)
        )
        if not spec_used and not any(r.get("adminAccess") is not None for r in old_results):
            _pop_all(results, "adminAccess")
    if not gates.enabled("DRAResourceClaimDeviceStatus") and not old_status.get("devices"):
        status.pop("devices", None)
    if not gates.enabled("DRAConsumableCapacity"):
        old_used = any(r.get("shareID") is not None or r.get("consumedCapacity") for r in old_results) or any(
            isinstance(d, dict) and d.get("shareID") is not None for d in old_status.get("devices") or []
        )
        if not old_used:
            _pop_all(results, "shareID", "consumedCapacity")
            devs = status.get("devices")
            _pop_all((d for d in devs if isinstance(d, dict)) if isinstance(devs, list) else [], "shareID")
    if not gates.enabled("DRADeviceBindingConditions") and not any(
        r.get("bindingConditions") or r.get("bindingFailureConditions") for r in old_results
    ):
        _pop_all(results, "bindingConditions", "bindingFailureConditions")
    if not gates.enabled("DRADeviceTaints") and not any(r.get("tolerations") for r in old_results):
        _pop_all(results, "tolerations")
    if not gates.enabled("DRAOptionalNodeOperations") and not any(r.get("skipNodeOperations") for r in old_results):
        _pop_all(results, "skipNodeOperations")
    alloc = status.get("allocation")
    old_alloc = _sub(old_status, "allocation")
    if (
        isinstance(alloc, dict)
        and not gates.enabled("DRAReservedForWorkloads")
        and old_alloc.get("reservedForAnyPod") is None
    ):
        alloc.pop("reservedForAnyPod", None)


def _slice_devices(spec: Any) -> list[Obj]:
    devs = spec.get("devices") if isinstance(spec, dict) else None
    return [d for d in devs if isinstance(d, dict)] if isinstance(devs, list) else []


def drop_slice_fields(spec: Any, old_spec: Any, gates: Any) -> None:
    """ResourceSlice drop rules (§4)."""
    if not isinstance(spec, dict):
        return
    old_devices = _slice_devices(old_spec)
    devices = _slice_devices(spec)
    old = old_spec if isinstance(old_spec, dict) else {}

    if not gates.enabled("DRADeviceTaints") and not any(d.get("taints") for d in old_devices):
        _pop_all(devices, "taints")
    partitionable_used = (
        old.get("sharedCounters") is not None
        or old.get("perDeviceNodeSelection") is not None
        or any(
            d.get("consumesCounters") or d.get("nodeName") is not None or d.get("nodeSelector") is not None or d.get("allNodes") is not None
            for d in old_devices
        )
    )
    if not gates.enabled("DRAPartitionableDevices") and not partitionable_used:
        spec.pop("sharedCounters", None)
        spec.pop("perDeviceNodeSelection", None)
        _pop_all(devices, "consumesCounters", "nodeName", "nodeSelector", "allNodes")
    if not gates.enabled("DRAPartitionableDevicesType") and old.get("partitionTypeAttribute") is None:
        spec.pop("partitionTypeAttribute", None)
    if not gates.enabled("DRADeviceCompatibilityGroups") and not any(
        isinstance(c, dict) and c.get("compatibilityGroups") for d in old_devices for c in d.get("consumesCounters") or []
    ):
        for d in devices:
            cons = d.get("consumesCounters")
            _pop_all((c for c in cons if isinstance(c, dict)) if isinstance(cons, list) else [], "compatibilityGroups")
    if not gates.enabled("DRAConsumableCapacity") and not any(
        d.get("allowMultipleAllocations") is not None
        or any(isinstance(c, dict) and c.get("requestPolicy") is not None for c in (d.get("capacity") or {}).values())
        for d in old_devices
    ):
        _pop_all(devices, "allowMultipleAllocations")
        for d in devices:
            caps = d.get("capacity")
            _pop_all((c for c in caps.values() if isinstance(c, dict)) if isinstance(caps, dict) else [], "requestPolicy")
    binding_on = gates.enabled("DRADeviceBindingConditions") and gates.enabled("DRAResourceClaimDeviceStatus")
    if not binding_on and not any(
        d.get("bindsToNode") is not None or d.get("bindingConditions") or d.get("bindingFailureConditions") for d in old_devices
    ):
        _pop_all(devices, "bindsToNode", "bindingConditions", "bindingFailureConditions")
    if not gates.enabled("DRAListTypeAttributes") and not _has_list_attributes(old_devices):
        for d in devices:
            attrs = d.get("attributes")
            _pop_all(
                (a for a in attrs.values() if isinstance(a, dict)) if isinstance(attrs, dict) else [],
                "bools",
                "ints",
                "strings",
                "versions",
            )
    if not gates.enabled("DRAOptionalNodeOperations") and not old.get("skipNodeOperations"):
        spec.pop("skipNodeOperations", None)
    if not gates.enabled("DRANodeAllocatableResources") and not any(d.get("nodeAllocatableResources") for d in old_devices):
        _pop_all(devices, "nodeAllocatableResources")


def drop_device_class_fields(spec: Any, old_spec: Any, gates: Any) -> None:
    if not isinstance(spec, dict):
        return
    old = old_spec if isinstance(old_spec, dict) else {}
    if not gates.enabled("DRAExtendedResource") and old.get("extendedResourceName") is None:
        spec.pop("extendedResourceName", None)


def deep_copy(obj: Any) -> Any:
    return copy.deepcopy(obj)
