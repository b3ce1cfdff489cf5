"""Endpoints validation and defaults (upstream's ValidateEndpoints, SetDefaults_Endpoints)."""

from __future__ import annotations

from typing import Any

from app.registry.accessors import Errs, as_dict_entries, as_list
from app.registry.base import Obj
from app.registry.common import ip_warnings, validate_endpoint_ip, validate_ip_for_legacy_field, validate_port_number
from app.registry.objectmeta import dns1123_subdomain_problems, validate_dns1123_label, validate_qualified_name
from kube.errors import invalid, not_supported, required

PROTOCOLS = ("SCTP", "TCP", "UDP")
ADDRESS_KINDS = ("addresses", "notReadyAddresses")


def default_endpoints(obj: Obj) -> None:
    """A port without a protocol is TCP."""
    for subset in obj.get("subsets") or []:
        if isinstance(subset, dict):
            for port in subset.get("ports") or []:
                if isinstance(port, dict) and not port.get("protocol"):
                    port["protocol"] = "TCP"


def validate_node_name(value: Any, path: str) -> Errs:
    """ValidateNodeName: a DNS subdomain."""
    return [invalid(path, value, problem) for problem in dns1123_subdomain_problems(str(value))]


def validate_protocol(value: Any, path: str) -> Errs:
    if not value:
        return [required(path)]
    if value not in PROTOCOLS:
        return [not_supported(path, value, PROTOCOLS)]
    return []


def _address(address: Obj, path: str) -> Errs:
    ip = address.get("ip", "")
    errs = validate_ip_for_legacy_field(ip, f"{path}.ip")
    if address.get("hostname"):
        errs += validate_dns1123_label(str(address["hostname"]), f"{path}.hostname")
    if address.get("nodeName") is not None:
        errs += validate_node_name(address["nodeName"], f"{path}.nodeName")
    return errs + validate_endpoint_ip(ip, f"{path}.ip")


def _port(port: Obj, require_name: bool, path: str) -> Errs:
    errs: Errs = []
    name = port.get("name") or ""
    if require_name and not name:
        errs.append(required(f"{path}.name"))
    elif name:
        errs += validate_dns1123_label(str(name), f"{path}.name")
    errs += validate_port_number(port.get("port", 0), f"{path}.port")
    errs += validate_protocol(port.get("protocol"), f"{path}.protocol")
    if port.get("appProtocol") is not None:
        errs += validate_qualified_name(str(port["appProtocol"]), f"{path}.appProtocol")
    return errs


def validate_subsets(obj: Obj) -> Errs:
    errs: Errs = []
    for _i, subset, path in as_dict_entries(obj.get("subsets"), "subsets", errs):
        if not subset.get("addresses") and not subset.get("notReadyAddresses"):
            errs.append(required(path, "must specify `addresses` or `notReadyAddresses`"))
        for kind in ADDRESS_KINDS:
            for _j, address, address_path in as_dict_entries(subset.get(kind), f"{path}.{kind}", errs):
                errs += _address(address, address_path)
        ports = as_list(subset.get("ports"), f"{path}.ports", errs)
        for _j, port, port_path in as_dict_entries(ports, f"{path}.ports", errs):
            errs += _port(port, len(ports) > 1, port_path)
    return errs


def validate_endpoints(new: Obj, old: Obj | None) -> Errs:
    """The subsets' rules; on an update that leaves the subsets as they were, none (data older
    servers took stays)."""
    errs = validate_subsets(new)
    if errs and old is not None and old.get("subsets") == new.get("subsets"):
        return []
    return errs


def endpoints_warnings(obj: Obj) -> list[str]:
    """Addresses written in a non-standard form, unless the endpoints controller manages the object."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get("endpoints.kubernetes.io/managed-by") == "endpoint-controller":
        return []
    warnings: list[str] = []
    for i, subset in enumerate(obj.get("subsets") or []):
        for kind in ADDRESS_KINDS:
            for j, address in enumerate((subset or {}).get(kind) or []):
                warnings += ip_warnings((address or {}).get("ip"), f"subsets[{i}].{kind}[{j}].ip")
    return warnings
