"""EndpointSlice validation, defaults and warnings (upstream's pkg/apis/discovery/validation and
the endpointslice strategy)."""

from __future__ import annotations

from typing import Any

from app.registry.accessors import Errs, as_dict_entries, as_list
from app.registry.base import Obj
from app.registry.common import ip_warnings, parse_ip_sloppy, validate_endpoint_ip, validate_ip, validate_ip_for_legacy_field
from app.registry.core.endpoints_validation import validate_node_name, validate_protocol
from app.registry.objectmeta import (
    dns1123_label_problems,
    dns1123_subdomain_problems,
    validate_dns1123_label,
    validate_immutable,
    validate_label_value,
    validate_labels,
    validate_qualified_name,
)
from kube.errors import duplicate, invalid, not_supported, required, too_many

ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")
MAX_TOPOLOGY_LABELS = 16
MAX_ADDRESSES = 100
MAX_PORTS = 20000
MAX_ENDPOINTS = 1000
MAX_ZONE_HINTS = 8
MAX_NODE_HINTS = 8
HOSTNAME_LABEL = "kubernetes.io/hostname"
# Slices of these managers are not warned about (their addresses come from validated Pods/Endpoints).
QUIET_MANAGERS = ("endpointslice-controller.k8s.io", "endpointslicemirroring-controller.k8s.io")


def default_endpoint_slice(obj: Obj) -> None:
    """Ports name "" and TCP unless set; every endpoint has its conditions (a struct, always written)."""
    for port in obj.get("ports") or []:
        if isinstance(port, dict):
            if port.get("name") is None:
                port["name"] = ""
            if port.get("protocol") is None:
                port["protocol"] = "TCP"
    for endpoint in obj.get("endpoints") or []:
        if isinstance(endpoint, dict) and endpoint.get("conditions") is None:
            endpoint["conditions"] = {}


def _topology_hostnames(obj: Obj | None) -> set[str]:
    if obj is None:
        return set()
    found = set()
    for endpoint in obj.get("endpoints") or []:
        name = ((endpoint or {}).get("deprecatedTopology") or {}).get(HOSTNAME_LABEL) if isinstance(endpoint, dict) else None
        if isinstance(name, str) and name:
            found.add(name)
    return found


def drop_deprecated_topology(new: Obj, old: Obj | None) -> None:
    """A v1 write drops deprecatedTopology (unless the endpoints are as they were); an endpoint
    without a nodeName takes the topology's hostname when the old slice named that node too."""
    if old is not None and old.get("endpoints") == new.get("endpoints"):
        return
    known = _topology_hostnames(old)
    for endpoint in new.get("endpoints") or []:
        if not isinstance(endpoint, dict):
            continue
        topology = endpoint.pop("deprecatedTopology", None)
        hostname = topology.get(HOSTNAME_LABEL) if isinstance(topology, dict) else None
        if endpoint.get("nodeName") is None and isinstance(hostname, str) and hostname in known and not dns1123_subdomain_problems(hostname):
            endpoint["nodeName"] = hostname


def _fqdn_errors(value: Any, path: str) -> Errs:
    """IsFullyQualifiedDomainName (an error names the trimmed name, or the label at fault)."""
    name = str(value)
    if not name:
        return [required(path)]
    name = name.removesuffix(".")
    problems = dns1123_subdomain_problems(name)
    if problems:
        return [invalid(path, name, ",".join(problems))]
    if len(name.split(".")) < 2:
        return [invalid(path, name, "should be a domain with at least two segments separated by dots")]
    for label in name.split("."):
        problems = dns1123_label_problems(label)
        if problems:
            return [invalid(path, label, ",".join(problems))]
    return []


def _address_errors(address: Any, address_type: Any, path: str) -> Errs:
    if address_type == "IPv4":
        errs = validate_ip_for_legacy_field(address, path)
        if errs:
            return errs
        ip = parse_ip_sloppy(address)
        if ip is None or ip.version != 4:
            errs.append(invalid(path.rsplit("[", 1)[0], address, "must be an IPv4 address"))
        return errs + validate_endpoint_ip(address, path)
    if address_type == "IPv6":
        errs = validate_ip(address, path)
        if errs:
            return errs
        ip = parse_ip_sloppy(address)
        if ip is None or ip.version != 6:
            errs.append(invalid(path.rsplit("[", 1)[0], address, "must be an IPv6 address"))
        return errs + validate_endpoint_ip(address, path)
    if address_type == "FQDN":
        return _fqdn_errors(address, path)
    return []


def _hints(hints: Obj, path: str) -> Errs:
    errs: Errs = []
    zones = as_list(hints.get("forZones"), f"{path}.forZones", errs)
    if len(zones) > MAX_ZONE_HINTS:
        return [too_many(f"{path}.forZones", len(zones), MAX_ZONE_HINTS)]
    seen: list[Any] = []
    for _i, zone, zone_path in as_dict_entries(zones, f"{path}.forZones", errs):
        name = zone.get("name", "")
        if name in seen:
            errs.append(duplicate(f"{zone_path}.name", name))
        else:
            seen.append(name)
        errs += validate_label_value(str(name), f"{zone_path}.name")
    nodes = as_list(hints.get("forNodes"), f"{path}.forNodes", errs)
    if len(nodes) > MAX_NODE_HINTS:
        return [*errs, too_many(f"{path}.forNodes", len(nodes), MAX_NODE_HINTS)]
    seen = []
    for _i, node, node_path in as_dict_entries(nodes, f"{path}.forNodes", errs):
        name = node.get("name", "")
        if name in seen:
            errs.append(duplicate(f"{node_path}.name", name))
        else:
            seen.append(name)
        errs += validate_node_name(name, f"{node_path}.name")
    return errs


def validate_endpoints(obj: Obj) -> Errs:
    errs: Errs = []
    endpoints = as_list(obj.get("endpoints"), "endpoints", errs)
    if len(endpoints) > MAX_ENDPOINTS:
        return [too_many("endpoints", len(endpoints), MAX_ENDPOINTS)]
    address_type = obj.get("addressType")
    for _i, endpoint, path in as_dict_entries(endpoints, "endpoints", errs):
        addresses = as_list(endpoint.get("addresses"), f"{path}.addresses", errs)
        if not addresses:
            errs.append(required(f"{path}.addresses", "must contain at least 1 address"))
        elif len(addresses) > MAX_ADDRESSES:
            errs.append(too_many(f"{path}.addresses", len(addresses), MAX_ADDRESSES))
        for j, address in enumerate(addresses):
            errs += _address_errors(address, address_type, f"{path}.addresses[{j}]")
        if endpoint.get("nodeName") is not None:
            errs += validate_node_name(endpoint["nodeName"], f"{path}.nodeName")
        topology = endpoint.get("deprecatedTopology")
        if isinstance(topology, dict) and len(topology) > MAX_TOPOLOGY_LABELS:
            errs.append(too_many(f"{path}.deprecatedTopology", len(topology), MAX_TOPOLOGY_LABELS))
        errs += validate_labels(topology, f"{path}.deprecatedTopology")
        if endpoint.get("hostname") is not None:
            errs += validate_dns1123_label(str(endpoint["hostname"]), f"{path}.hostname")
        if isinstance(endpoint.get("hints"), dict):
            errs += _hints(endpoint["hints"], f"{path}.hints")
    return errs


def validate_ports(obj: Obj) -> Errs:
    errs: Errs = []
    ports = as_list(obj.get("ports"), "ports", errs)
    if len(ports) > MAX_PORTS:
        return [too_many("ports", len(ports), MAX_PORTS)]
    names: list[Any] = []
    for _i, port, path in as_dict_entries(ports, "ports", errs):
        name = port.get("name") or ""
        if name:
            errs += validate_dns1123_label(str(name), f"{path}.name")
        if name in names:
            errs.append(duplicate(f"{path}.name", name))
        else:
            names.append(name)
        if port.get("protocol") is None:
            errs.append(required(f"{path}.protocol"))
        else:
            errs += validate_protocol(port["protocol"], f"{path}.protocol")
        if port.get("appProtocol") is not None:
            errs += validate_qualified_name(str(port["appProtocol"]), f"{path}.appProtocol")
    return errs


def validate_address_type(obj: Obj) -> Errs:
    address_type = obj.get("addressType")
    if not address_type:
        return [required("addressType")]
    if address_type not in ADDRESS_TYPES:
        return [not_supported("addressType", address_type, ADDRESS_TYPES)]
    return []


def validate_endpoint_slice(new: Obj, old: Obj | None) -> Errs:
    """ValidateEndpointSlice (and its update rules when ``old`` is given): an update that leaves
    the endpoints as they were is not refused for them."""
    errs = validate_address_type(new) + validate_ports(new)
    endpoint_errs = validate_endpoints(new)
    if endpoint_errs and old is not None and old.get("endpoints") == new.get("endpoints"):
        endpoint_errs = []
    errs += endpoint_errs
    if old is not None:
        errs += validate_immutable(new.get("addressType"), old.get("addressType"), "addressType")
    return errs


def endpoint_slice_warnings(obj: Obj, creating: bool) -> list[str]:
    warnings = ["spec.addressType: FQDN endpoints are deprecated"] if creating and obj.get("addressType") == "FQDN" else []
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get("endpointslice.kubernetes.io/managed-by") in QUIET_MANAGERS:
        return warnings
    for i, endpoint in enumerate(obj.get("endpoints") or []):
        for j, address in enumerate((endpoint or {}).get("addresses") or [] if isinstance(endpoint, dict) else []):
            warnings += ip_warnings(address, f"endpoints[{i}].addresses[{j}]")
    return warnings
