"""Validation rules kinds of several API groups share: core/v1 node selectors, metav1 label
selectors and conditions, core/v1 resource names and quantities, and IP addresses and port numbers."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from app.registry.accessors import Errs, dict_entries, get_int, get_list, get_str, parse_quantity_field
from app.registry.base import Obj
from app.registry.objectmeta import (
    IS_NEGATIVE,
    qualified_name_problems,
    validate_label_key,
    validate_label_value,
    validate_labels,
    validate_qualified_name,
)
from kube.errors import FieldError, duplicate, forbidden, go_quote, invalid, not_supported, required, too_long, too_many

_CONDITION_REASON_RE = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


# --- node selectors (core validation) ---------------------------------------------------------


def validate_node_selector(selector: Obj, path: str, *, check_values: bool = False) -> Errs:
    """A core/v1 NodeSelector: at least one term, each term valid. ``check_values`` also holds the
    values of label requirements to label-value syntax (a pod's required node affinity does)."""
    errs: Errs = []
    terms = get_list(selector, "nodeSelectorTerms", path, errs)
    if not terms:
        if terms is not None or "nodeSelectorTerms" not in selector or not errs:
            errs.append(required(f"{path}.nodeSelectorTerms", "must have at least one node selector term"))
        return errs
    for _, term, tpath in dict_entries(terms, f"{path}.nodeSelectorTerms", errs):
        errs.extend(validate_node_selector_term(term, tpath, check_values=check_values))
    return errs


def validate_node_selector_term(term: Obj, path: str, *, check_values: bool = False) -> Errs:
    """One NodeSelectorTerm: its label requirements (matchExpressions) and field requirements (matchFields)."""
    errs: Errs = []
    exprs = get_list(term, "matchExpressions", path, errs) or []
    for _, req, rpath in dict_entries(exprs, f"{path}.matchExpressions", errs):
        errs.extend(_node_selector_requirement(req, rpath, check_values))
    fields = get_list(term, "matchFields", path, errs) or []
    for _, req, rpath in dict_entries(fields, f"{path}.matchFields", errs):
        errs.extend(_node_field_requirement(req, rpath))
    return errs


def _node_selector_requirement(req: Obj, path: str, check_values: bool) -> Errs:
    errs: Errs = []
    op = get_str(req, "operator", path, errs) or ""
    values = get_list(req, "values", path, errs) or []
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
    key = get_str(req, "key", path, errs) or ""
    errs.extend(validate_label_key(key, f"{path}.key"))
    if check_values:
        for index, value in enumerate(values):
            errs.extend(validate_label_value(str(value), f"{path}.values[{index}]"))
    return errs


def _node_field_requirement(req: Obj, path: str) -> Errs:
    errs: Errs = []
    op = get_str(req, "operator", path, errs) or ""
    values = get_list(req, "values", path, errs) or []
    if op in ("In", "NotIn"):
        if len(values) != 1:
            errs.append(
                required(f"{path}.values", "must be only one value when `operator` is 'In' or 'NotIn' for node field selector")
            )
    else:
        errs.append(invalid(f"{path}.operator", op, "not a valid selector operator"))
    key = get_str(req, "key", path, errs) or ""
    if key != "metadata.name":
        errs.append(not_supported(f"{path}.key", key, ["metadata.name"]))
    return errs


# --- conditions (metav1) ----------------------------------------------------------------------


def validate_status_conditions(status: Obj, limit: int, errs: Errs) -> None:
    """``status.conditions``: each a valid metav1 Condition, at most ``limit`` of them."""
    conditions = get_list(status, "conditions", "status", errs)
    if conditions is not None:
        errs.extend(validate_conditions(conditions, "status.conditions"))
        if len(conditions) > limit:
            errs.append(too_many("status.conditions", len(conditions), limit))


def validate_conditions(conditions: list[Any], path: str) -> Errs:
    errs: Errs = []
    seen: set[str] = set()
    for _, cond, cpath in dict_entries(conditions, path, errs):
        ctype = get_str(cond, "type", cpath, errs) or ""
        if ctype in seen:
            errs.append(duplicate(f"{cpath}.type", ctype))
        seen.add(ctype)
        if not ctype:
            errs.append(required(f"{cpath}.type", "must be set"))
        else:
            errs.extend(validate_label_key(ctype, f"{cpath}.type"))
        status = get_str(cond, "status", cpath, errs) or ""
        if status not in ("True", "False", "Unknown"):
            errs.append(not_supported(f"{cpath}.status", status, ["False", "True", "Unknown"]))
        if not cond.get("lastTransitionTime"):
            errs.append(required(f"{cpath}.lastTransitionTime", "must be set"))
        reason = get_str(cond, "reason", cpath, errs) or ""
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
        message = get_str(cond, "message", cpath, errs) or ""
        if len(message.encode()) > 32768:
            errs.append(too_long(f"{cpath}.message", 32768))
        gen = get_int(cond, "observedGeneration", cpath, errs)
        if gen is not None and gen < 0:
            errs.append(invalid(f"{cpath}.observedGeneration", gen, "must be greater than or equal to zero"))
    return errs


# --- metav1 label selectors (apimachinery's ValidateLabelSelector) -------------------------------


def validate_label_selector(selector: Any, path: str) -> Errs:
    """A metav1.LabelSelector: valid label keys and values, operators with the values they take
    (upstream's strict form, which newer types use: unknown operators and bad values refused)."""
    errs: Errs = []
    if not isinstance(selector, dict):
        return errs
    labels = selector.get("matchLabels")
    if isinstance(labels, dict):
        labels = dict(sorted(labels.items()))  # Go reports in map order; sorted reads stable
    errs += validate_labels(labels, f"{path}.matchLabels")
    expressions = get_list(selector, "matchExpressions", path, errs) or []
    for _, requirement, rpath in dict_entries(expressions, f"{path}.matchExpressions", errs):
        operator = requirement.get("operator")
        values = requirement.get("values") or []
        if operator in ("In", "NotIn"):
            if not values:
                errs.append(required(f"{rpath}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errs.append(forbidden(f"{rpath}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            errs.append(invalid(f"{rpath}.operator", operator if operator is not None else "", "not a valid selector operator"))
        errs += validate_qualified_name(str(requirement.get("key") or ""), f"{rpath}.key")
        for index, value in enumerate(values if isinstance(values, list) else []):
            errs += validate_label_value(str(value), f"{rpath}.values[{index}]")
    return errs


def label_selector_is_empty(selector: Any) -> bool:
    """Whether a (non-null) selector has neither matchLabels nor matchExpressions: it selects everything."""
    return isinstance(selector, dict) and not selector.get("matchLabels") and not selector.get("matchExpressions")


# --- resource names and quantities (core/v1) --------------------------------------------------

# helper.IsStandardResourceName: container resources plus quota and storage names (and hugepages).
_STANDARD_RESOURCES = frozenset(
    {
        "cpu", "memory", "ephemeral-storage", "pods", "services", "replicationcontrollers", "resourcequotas",
        "secrets", "configmaps", "persistentvolumeclaims", "storage", "requests.cpu", "requests.memory",
        "requests.storage", "requests.ephemeral-storage", "limits.cpu", "limits.memory",
        "limits.ephemeral-storage", "services.nodeports", "services.loadbalancers",
    }
)
HUGEPAGES_PREFIXES = ("hugepages-", "requests.hugepages-")
NOT_STANDARD_RESOURCE = "must be a standard resource type or fully qualified"

# helper.IsIntegerResourceName's standard part (extended resources are integers too).
_INTEGER_RESOURCES = frozenset(
    {
        "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
        "persistentvolumeclaims", "services.nodeports", "services.loadbalancers",
    }
)


def is_native_resource(name: str) -> bool:
    """No domain, or a kubernetes.io domain."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """helper.IsExtendedResourceName: a fully qualified, non-native name not starting requests."""
    if is_native_resource(name) or name.startswith("requests."):
        return False
    return not qualified_name_problems("requests." + name)


def is_standard_resource(name: str) -> bool:
    return name in _STANDARD_RESOURCES or name.startswith(HUGEPAGES_PREFIXES)


def validate_resource_name(name: str, path: str) -> list[FieldError]:
    """validateResourceName: a qualified name, and a standard one unless it has a domain."""
    errs = validate_qualified_name(name, path)
    if not errs and "/" not in name and not is_standard_resource(name):
        errs.append(invalid(path, name, NOT_STANDARD_RESOURCE))
    return errs


def is_integer_resource(name: str) -> bool:
    return name in _INTEGER_RESOURCES or is_extended_resource(name)


def validate_resource_quantity(name: str, value: object, path: str) -> list[FieldError]:
    """ValidateResourceQuantityValue: parsable, not negative, whole for integer resources."""
    errs: list[FieldError] = []
    quantity = parse_quantity_field(value, path, errs)
    if quantity is None:
        return errs
    if quantity.sign < 0:
        errs.append(invalid(path, quantity.canonical(), IS_NEGATIVE))
    if is_integer_resource(name) and quantity.milli_value() % 1000 != 0:
        errs.append(invalid(path, quantity.canonical(), "must be an integer"))
    return errs


# --- IP addresses and ports (apimachinery's util/validation, core's ValidateEndpointIP) -----------

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
INVALID_IP = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
INVALID_PORT = "must be between 1 and 65535, inclusive"


def parse_ip_sloppy(value: object) -> IPAddress | None:
    """An address as Go's sloppy parser reads it: IPv4 octets may have leading zeros (decimal);
    no zone, no prefix. None when it is not an address."""
    if not isinstance(value, str) or not value.isascii() or "%" in value:
        return None
    if ":" not in value:
        octets = value.split(".")
        if len(octets) != 4 or not all(o.isdigit() and int(o) <= 255 for o in octets):
            return None
        return ipaddress.IPv4Address(".".join(str(int(o)) for o in octets))
    try:
        return ipaddress.IPv6Address(value)
    except ValueError:
        return None


def _leading_zeros(value: str) -> bool:
    return any(len(o) > 1 and o.startswith("0") for o in value.rsplit(":", 1)[-1].split(".")) if "." in value else False


def _strict_ip_errors(value: str, ip: IPAddress, path: str) -> list[FieldError]:
    """What StrictIPCIDRValidation (beta, on in v1.37) refuses of an address Go's sloppy parser takes."""
    errs: list[FieldError] = []
    if _leading_zeros(value):
        errs.append(invalid(path, value, "must not have leading 0s"))
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        errs.append(invalid(path, value, "must not be an IPv4-mapped IPv6 address"))
    return errs


def validate_ip_for_legacy_field(value: object, path: str) -> list[FieldError]:
    """IsValidIPForLegacyField with strict validation: an address, without leading zeros or an
    IPv4-mapped IPv6 form."""
    ip = parse_ip_sloppy(value)
    if ip is None or not isinstance(value, str):
        return [invalid(path, value, INVALID_IP)]
    return _strict_ip_errors(value, ip, path)


def validate_ip(value: object, path: str) -> list[FieldError]:
    """IsValidIP (for new fields): strict, and in canonical form."""
    errs = validate_ip_for_legacy_field(value, path)
    ip = parse_ip_sloppy(value)
    if errs or ip is None:
        return errs
    if value != str(ip):
        errs.append(invalid(path, value, f"must be in canonical form ({go_quote(str(ip))})"))
    return errs


def _as_ipv4(ip: IPAddress) -> IPAddress:
    """Go treats an IPv4-mapped IPv6 address as the IPv4 address it maps."""
    return ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None else ip


def validate_endpoint_ip(value: object, path: str) -> list[FieldError]:
    """ValidateEndpointIP: an address a client can be sent to (not unspecified, loopback or link-local)."""
    parsed = parse_ip_sloppy(value)
    if parsed is None:
        return [invalid(path, value, "must be a valid IP address")]
    ip = _as_ipv4(parsed)
    errs: list[FieldError] = []
    if ip.is_unspecified:
        errs.append(invalid(path, value, f"may not be unspecified ({value})"))
    if ip.is_loopback:
        errs.append(invalid(path, value, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
    if ip in _LINK_LOCAL[ip.version]:
        errs.append(invalid(path, value, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
    if ip in _LINK_LOCAL_MULTICAST_V4 if ip.version == 4 else (ip.packed[0] == 0xFF and ip.packed[1] & 0x0F == 0x02):
        errs.append(invalid(path, value, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
    return errs


_LINK_LOCAL = {4: ipaddress.ip_network("169.254.0.0/16"), 6: ipaddress.ip_network("fe80::/10")}
_LINK_LOCAL_MULTICAST_V4 = ipaddress.ip_network("224.0.0.0/24")


def ip_warnings(value: object, path: str) -> list[str]:
    """GetWarningsForIP: an address written in a form other than the standard one."""
    ip = parse_ip_sloppy(value)
    if ip is None or not isinstance(value, str):
        return []
    standard = str(_as_ipv4(ip))
    if _leading_zeros(value) or (isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None):
        return [f"{path}: non-standard IP address {go_quote(value)} is invalid: use {go_quote(standard)}"]
    if ip.version == 6 and value != standard:
        return [f"{path}: IPv6 address {go_quote(value)} should be in RFC 5952 canonical format ({go_quote(standard)})"]
    return []


def validate_port_number(value: object, path: str) -> list[FieldError]:
    """IsValidPortNum."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535:
        return [invalid(path, value, INVALID_PORT)]
    return []
