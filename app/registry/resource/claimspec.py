"""ResourceClaimSpec, a ResourceClaim's spec and a ResourceClaimTemplate's spec.spec: validation of
device requests, constraints and configuration, the adminAccess namespace rule, defaults and gate
drop rules.

``spec.reservedFor`` is the project's KEP-5194 proposal, behind the alpha gate ``DRAReservedForWorkloads``.
"""

from __future__ import annotations

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
    truncate_key,
    type_error,
)
from app.registry.base import Obj
from app.registry.objectmeta import validate_dns1123_label, validate_dns1123_subdomain
from app.registry.resource.common import (
    ATTRIBUTE_KEY_TRUNCATE,
    CONFIG_MAX,
    ClaimOptions,
    expression_errors,
    validate_fully_qualified_name,
    validate_opaque_config,
    validate_qualified_name,
    validate_selectors,
    validate_tolerations,
)
from kube.errors import forbidden, invalid, not_supported, required
from kube.features import Gate
from kube.gatedfields import CLAIM_SPEC, drop_disabled

# --- limits (k8s.io/api/resource/v1/types.go) -------------------------------------------------

DEVICE_REQUESTS_MAX = 32
FIRST_AVAILABLE_MAX = 8
CONSTRAINTS_MAX = 32
DERIVED_ATTRIBUTES_MAX = 32

ADMIN_NAMESPACE_LABEL = "resource.kubernetes.io/admin-access"
ADMIN_ACCESS_DETAIL = (
    f"admin access to devices requires the `{ADMIN_NAMESPACE_LABEL}: true` label on the containing namespace"
)
ALLOCATION_MODES = ("All", "ExactCount")

# --- validation -------------------------------------------------------------------------------


class RequestNames:
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


def validate_request_ref(name: str, path: str, names: RequestNames) -> Errs:
    parts = name.split("/")
    if len(parts) > 2:
        return [invalid(path, name, _REF_DETAIL)]
    errs: Errs = []
    for part in parts:
        errs.extend(validate_dns1123_label(part, path))
    if not names.has(name):
        errs.append(invalid(path, name, _REF_DETAIL))
    return errs


def validate_request_refs(obj: Obj, path: str, names: RequestNames, errs: Errs) -> None:
    refs = get_list(obj, "requests", path, errs)
    if refs is None or over_limit(refs, DEVICE_REQUESTS_MAX, f"{path}.requests", errs):
        return
    keys: list[tuple[int, Any]] = []
    for i, ref in enumerate(refs):
        rpath = f"{path}.requests[{i}]"
        if not isinstance(ref, str):
            errs.append(type_error(rpath, ref, "string"))
            continue
        errs.extend(validate_request_ref(ref, rpath, names))
        keys.append((i, ref))
    report_duplicates(keys, f"{path}.requests", errs)


def _validate_allocation_mode(req: Obj, path: str, errs: Errs) -> None:
    mode = get_str(req, "allocationMode", path, errs) or ""
    count = get_int(req, "count", path, errs) or 0
    if mode == "All":
        if count != 0:
            errs.append(invalid(f"{path}.count", count, "must not be specified when allocationMode is 'All'"))
    elif mode == "ExactCount":
        if count <= 0:
            errs.append(invalid(f"{path}.count", count, "must be greater than zero"))
    else:
        errs.append(not_supported(f"{path}.allocationMode", mode, ALLOCATION_MODES))


def _validate_capacity_requests(req: Obj, path: str, errs: Errs) -> None:
    cap = get_dict(req, "capacity", path, errs)
    if cap is None:
        return
    requests = get_dict(cap, "requests", f"{path}.capacity", errs) or {}
    for key, value in requests.items():
        kpath = f"{path}.capacity.requests[{truncate_key(key, ATTRIBUTE_KEY_TRUNCATE)}]"
        errs.extend(validate_qualified_name(key, f"{path}.capacity.requests"))
        read_quantity(value, kpath, errs)


def _validate_derived_attributes(req: Obj, path: str, opts: ClaimOptions, request_name: str, errs: Errs) -> None:
    attrs = get_list(req, "derivedAttributes", path, errs)
    dpath = f"{path}.derivedAttributes"
    if attrs is None or over_limit(attrs, DERIVED_ATTRIBUTES_MAX, dpath, errs):
        return
    keys: list[tuple[int, Any]] = []
    for i, attr, p in dict_entries(attrs, dpath, errs):
        name = get_str(attr, "name", p, errs) or ""
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
        expr = get_str(attr, "expression", p, errs) or ""
        if not expr:
            errs.append(required(f"{p}.expression"))
        elif not opts.stored:
            errs.extend(expression_errors(expr, f"{p}.expression", "any"))
    report_duplicates(keys, dpath, errs)


def _attribute_used_by_constraint(name: str, request: str, attrs: dict[str, set[str]]) -> bool:
    if name in attrs.get("", set()) or name in attrs.get(request, set()):
        return True
    parent, sep, _ = request.partition("/")
    return bool(sep) and name in attrs.get(parent, set())


def _validate_exact(req: Obj, path: str, opts: ClaimOptions, request_name: str, errs: Errs, sub: bool) -> None:
    cls = get_str(req, "deviceClassName", path, errs) or ""
    if not cls:
        errs.append(required(f"{path}.deviceClassName"))
    else:
        errs.extend(validate_dns1123_subdomain(cls, f"{path}.deviceClassName"))
    validate_selectors(req, path, opts, errs)
    _validate_derived_attributes(req, path, opts, request_name, errs)
    _validate_allocation_mode(req, path, errs)
    validate_tolerations(req, path, errs)
    _validate_capacity_requests(req, path, errs)
    if not sub:
        get_bool(req, "adminAccess", path, errs)


def _validate_request(req: Obj, path: str, opts: ClaimOptions, errs: Errs) -> None:
    name = get_str(req, "name", path, errs) or ""
    if not name:
        errs.append(required(f"{path}.name"))
    else:
        errs.extend(validate_dns1123_label(name, f"{path}.name"))
    first = get_list(req, "firstAvailable", path, errs)
    exactly = get_dict(req, "exactly", path, errs)
    has_first = bool(first)
    has_exactly = exactly is not None
    if has_first and has_exactly:
        errs.append(invalid(path, None, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
    elif has_first and first is not None:
        fpath = f"{path}.firstAvailable"
        if over_limit(first, FIRST_AVAILABLE_MAX, fpath, errs):
            return
        keys: list[tuple[int, Any]] = []
        for i, sub, p in dict_entries(first, fpath, errs):
            sub_name = get_str(sub, "name", p, errs) or ""
            keys.append((i, sub_name))
            if not sub_name:
                errs.append(required(f"{p}.name"))
            else:
                errs.extend(validate_dns1123_label(sub_name, f"{p}.name"))
            _validate_exact(sub, p, opts, f"{name}/{sub_name}", errs, sub=True)
        report_duplicates(keys, fpath, errs)
    elif exactly is not None:
        _validate_exact(exactly, f"{path}.exactly", opts, name, errs, sub=False)
    elif not (isinstance(req.get("exactly"), list | str | int) or isinstance(req.get("firstAvailable"), dict | str)):
        errs.append(required(path, "exactly one of `exactly` or `firstAvailable` is required"))


def _validate_constraint(con: Obj, path: str, names: RequestNames, opts: ClaimOptions, errs: Errs) -> None:
    validate_request_refs(con, path, names, errs)
    match = get_str(con, "matchAttribute", path, errs)
    distinct = get_str(con, "distinctAttribute", path, errs)
    if match is not None:
        errs.extend(validate_fully_qualified_name(match, f"{path}.matchAttribute"))
    elif distinct is not None:
        errs.extend(validate_fully_qualified_name(distinct, f"{path}.distinctAttribute"))
    elif opts.enabled(Gate.DRAConsumableCapacity):
        # Upstream's message really says "but multiple fields are set" for the missing case.
        errs.append(
            required(path, 'exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set')
        )
    else:
        errs.append(required(f"{path}.matchAttribute"))


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
        return [type_error(path, spec, "object")]
    devices = get_dict(spec, "devices", path, errs)
    if devices is not None:
        dpath = f"{path}.devices"
        names = RequestNames(devices)
        constraints = get_list(devices, "constraints", dpath, errs)
        opts.constraint_attributes = _gather_constraint_attributes(constraints or [])
        requests = get_list(devices, "requests", dpath, errs)
        rpath = f"{dpath}.requests"
        if requests is not None and not over_limit(requests, DEVICE_REQUESTS_MAX, rpath, errs):
            keys: list[tuple[int, Any]] = []
            for i, req, p in dict_entries(requests, rpath, errs):
                _validate_request(req, p, opts, errs)
                keys.append((i, req.get("name")))
            report_duplicates(keys, rpath, errs)
        cpath = f"{dpath}.constraints"
        if constraints is not None and not over_limit(constraints, CONSTRAINTS_MAX, cpath, errs):
            for _, con, p in dict_entries(constraints, cpath, errs):
                _validate_constraint(con, p, names, opts, errs)
        configs = get_list(devices, "config", dpath, errs)
        gpath = f"{dpath}.config"
        if configs is not None and not over_limit(configs, CONFIG_MAX, gpath, errs):
            for _, cfg, p in dict_entries(configs, gpath, errs):
                validate_request_refs(cfg, p, names, errs)
                validate_opaque_config(cfg, p, opts.stored, errs)
    reserved = get_dict(spec, "reservedFor", path, errs)
    if reserved is not None:
        errs.extend(validate_consumer_ref(reserved, f"{path}.reservedFor"))
    return errs


def validate_consumer_ref(ref: Obj, path: str) -> Errs:
    errs: Errs = []
    for key in ("resource", "name", "uid"):
        if not get_str(ref, key, path, errs):
            errs.append(required(f"{path}.{key}"))
    get_str(ref, "apiGroup", path, errs)
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


# --- defaults ---------------------------------------------------------------------------------


def _default_request(req: Obj) -> None:
    if not req.get("allocationMode"):
        req["allocationMode"] = "ExactCount"
    if req["allocationMode"] == "ExactCount" and not req.get("count"):
        req["count"] = 1
    for tol in req.get("tolerations") or [] if isinstance(req.get("tolerations"), list) else []:
        if isinstance(tol, dict) and not tol.get("operator"):
            tol["operator"] = "Equal"


def default_claim_spec(spec: Any) -> None:
    """allocationMode ExactCount, count 1, toleration operator Equal."""
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


# --- feature-gate drop rules ------------------------------------------------------------------


def drop_claim_spec_fields(spec: Any, old_spec: Any, gates: Any) -> None:
    """Clear claim-spec fields of disabled gates (kube.gatedfields) unless the old spec already used them."""
    if spec != old_spec:  # an unchanged spec uses only what the old one did (status and metadata writes)
        drop_disabled(CLAIM_SPEC, spec, old_spec, gates)
