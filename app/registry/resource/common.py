"""Rules the resource.k8s.io kinds share: the older versions they are served in, names and limits of drivers, pools, devices and attributes,
CEL device selectors, opaque configuration, device tolerations and taints, binding conditions,
skipped node operations, and the helpers of the gate drop rules.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import orjson

from app.registry.accessors import Errs, dict_entries, get_dict, get_int, get_list, get_str, over_limit, report_duplicates, type_error
from app.registry.base import Deprecation, Obj, OlderVersion
from app.registry.objectmeta import (
    dns1123_subdomain_problems,
    validate_dns1123_label,
    validate_dns1123_subdomain,
    validate_label_key,
    validate_label_value,
)
from kube.cel import validate_selector_expression
from kube.errors import duplicate, invalid, not_supported, required, too_long

# --- older versions --------------------------------------------------------------------------
# In v1.37 resource.k8s.io/v1beta2 and v1alpha3 have exactly v1's fields for the kinds they share
# (tests/app/registry/resource/test_versions.py compares the official schemas), so an object
# converts by its apiVersion alone and nothing is lost either way.

V1BETA2 = OlderVersion("v1beta2", deprecation=Deprecation((1, 36), (1, 39)))
# The Go types of what is immutable (app.protobuf.same_in_go compares values through them).
CLAIM_SPEC_MESSAGE = "k8s.io/api/resource/v1.ResourceClaimSpec"
TEMPLATE_SPEC_MESSAGE = "k8s.io/api/resource/v1.ResourceClaimTemplateSpec"
ALLOCATION_MESSAGE = "k8s.io/api/resource/v1.AllocationResult"

# --- limits (k8s.io/api/resource/v1/types.go) -------------------------------------------------

SELECTORS_MAX = 32
CONFIG_MAX = 32
DEVICE_MAX_DOMAIN_LEN = 63
DEVICE_MAX_ID_LEN = 32
DRIVER_NAME_MAX_LEN = 63
POOL_NAME_MAX_LEN = 253
BINDING_CONDITIONS_MAX = 4
OPAQUE_PARAMETERS_MAX = 10 * 1024
ATTRIBUTE_KEY_TRUNCATE = DEVICE_MAX_DOMAIN_LEN + 1 + DEVICE_MAX_ID_LEN
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")
TOLERATION_OPERATORS = ("Equal", "Exists")
SKIP_NODE_OPERATIONS = ("*", "NodePrepareResources", "NodeUnprepareResources")

_C_IDENTIFIER_FMT = "[A-Za-z_][A-Za-z0-9_]*"
_C_IDENTIFIER_RE = re.compile(f"^{_C_IDENTIFIER_FMT}$")


# --- names ------------------------------------------------------------------------------------


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
        errs.extend(validate_dns1123_subdomain(part, path))
    return errs


def validate_device_name(value: str | None, path: str) -> Errs:
    return validate_dns1123_label(value or "", path)


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


# --- opaque data, device selectors, tolerations and configuration -----------------------------


def validate_raw_extension(value: Any, path: str, stored: bool, limit: int) -> Errs:
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


class ClaimOptions:
    """Knobs of claim-spec validation: whether CEL is grandfathered and which gates shape rules."""

    def __init__(self, gates: Any, stored: bool = False) -> None:
        self.gates = gates
        self.stored = stored
        self.constraint_attributes: dict[str, set[str]] = {}

    def enabled(self, name: str) -> bool:
        return bool(self.gates.enabled(name)) if self.gates is not None else False


# Expressions validate_selector_expression found nothing wrong with, by result type: its answer
# depends on the text and the result type alone, and checking the same selectors again (every
# create of a claim from a template or a client) cost a call into Python and a cache lookup there.
_VALID_EXPRESSIONS: dict[str, set[str]] = {"bool": set(), "any": set()}
_VALID_EXPRESSIONS_MAX = 4096


def known_valid_expression(expression: str, result_type: str) -> bool:
    """Whether ``expression`` passed ``validate_selector_expression`` for ``result_type`` before."""
    return expression in _VALID_EXPRESSIONS[result_type]


def expression_errors(expression: str, path: str, result_type: str) -> Errs:
    """``validate_selector_expression``, remembering an expression it finds nothing wrong with."""
    if known_valid_expression(expression, result_type):
        return []
    found = validate_selector_expression(expression, path, result_type)
    if not found:
        valid = _VALID_EXPRESSIONS[result_type]
        if len(valid) >= _VALID_EXPRESSIONS_MAX:
            valid.clear()
        valid.add(expression)
    return found


def validate_selectors(obj: Obj, path: str, opts: ClaimOptions, errs: Errs) -> None:
    selectors = get_list(obj, "selectors", path, errs)
    spath = f"{path}.selectors"
    if selectors is None or over_limit(selectors, SELECTORS_MAX, spath, errs):
        return
    for _, sel, p in dict_entries(selectors, spath, errs):
        cel = get_dict(sel, "cel", p, errs)
        if cel is None:
            if "cel" not in sel or sel.get("cel") is None:
                errs.append(required(f"{p}.cel"))
            continue
        expr = get_str(cel, "expression", f"{p}.cel", errs)
        if expr is None:
            if cel.get("expression") is None:
                errs.append(required(f"{p}.cel.expression"))
            continue
        if not opts.stored:
            errs.extend(expression_errors(expr, f"{p}.cel.expression", "bool"))


def _validate_toleration(tol: Obj, path: str) -> Errs:
    errs: Errs = []
    key = get_str(tol, "key", path, errs) or ""
    if key:
        errs.extend(validate_label_key(key, f"{path}.key"))
    op = get_str(tol, "operator", path, errs) or ""
    value = get_str(tol, "value", path, errs) or ""
    if op == "Exists":
        if value:
            errs.append(invalid(f"{path}.value", value, "must be empty for operator `Exists`"))
    elif op == "Equal":
        errs.extend(validate_label_value(value, f"{path}.value"))
    elif op == "":
        errs.append(required(f"{path}.operator"))
    else:
        errs.append(not_supported(f"{path}.operator", op, TOLERATION_OPERATORS))
    effect = get_str(tol, "effect", path, errs) or ""
    if effect and effect not in TAINT_EFFECTS:
        errs.append(not_supported(f"{path}.effect", effect, TAINT_EFFECTS))
    get_int(tol, "tolerationSeconds", path, errs)
    return errs


def validate_tolerations(obj: Obj, path: str, errs: Errs) -> None:
    tols = get_list(obj, "tolerations", path, errs)
    for _, tol, p in dict_entries(tols or [], f"{path}.tolerations", errs):
        errs.extend(_validate_toleration(tol, p))


def validate_opaque_config(cfg: Obj, path: str, stored: bool, errs: Errs) -> None:
    opaque = get_dict(cfg, "opaque", path, errs)
    if opaque is None:
        if not isinstance(cfg.get("opaque"), list | str | int | float | bool):
            errs.append(required(f"{path}.opaque"))
        return
    op = f"{path}.opaque"
    driver = get_str(opaque, "driver", op, errs)
    errs.extend(validate_driver_name(driver, f"{op}.driver"))
    errs.extend(validate_raw_extension(opaque.get("parameters"), f"{op}.parameters", stored, OPAQUE_PARAMETERS_MAX))


# --- binding conditions, skipped node operations, taints --------------------------------------


def validate_binding_conditions(obj: Obj, path: str, errs: Errs) -> None:
    conds = get_list(obj, "bindingConditions", path, errs)
    failures = get_list(obj, "bindingFailureConditions", path, errs)
    cpath, fpath = f"{path}.bindingConditions", f"{path}.bindingFailureConditions"
    conds_ok = conds is not None and not over_limit(conds, BINDING_CONDITIONS_MAX, cpath, errs)
    fail_ok = failures is not None and not over_limit(failures, BINDING_CONDITIONS_MAX, fpath, errs)
    conds = conds or []
    failures = failures or []
    for within_limit, values, vpath in ((conds_ok, conds, cpath), (fail_ok, failures, fpath)):
        if not within_limit:
            continue
        for i, c in enumerate(values):
            if isinstance(c, str):
                errs.extend(validate_label_key(c, f"{vpath}[{i}]"))
            else:
                errs.append(type_error(f"{vpath}[{i}]", c, "string"))
    str_conds = [c for c in conds if isinstance(c, str)]
    report_duplicates([(i, c) for i, c in enumerate(conds) if isinstance(c, str)], cpath, errs)
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


def validate_skip_node_operations(obj: Obj, path: str, errs: Errs) -> None:
    ops = get_list(obj, "skipNodeOperations", path, errs)
    if ops is None:
        return
    spath = f"{path}.skipNodeOperations"
    keys: list[tuple[int, Any]] = []
    for i, op in enumerate(ops):
        if not isinstance(op, str) or op not in SKIP_NODE_OPERATIONS:
            errs.append(not_supported(f"{spath}[{i}]", op, SKIP_NODE_OPERATIONS))
        else:
            keys.append((i, op))
    report_duplicates(keys, spath, errs)
    present = set(ops) if all(isinstance(o, str) for o in ops) else set()
    if "NodePrepareResources" in present and not present & {"NodeUnprepareResources", "*"}:
        errs.append(invalid(spath, ops, "NodePrepareResources cannot be skipped unless NodeUnprepareResources is also skipped"))


def validate_taint(taint: Obj, old: Obj | None, path: str) -> Errs:
    errs: Errs = []
    key = get_str(taint, "key", path, errs) or ""
    errs.extend(validate_label_key(key, f"{path}.key"))
    value = get_str(taint, "value", path, errs) or ""
    if value:
        errs.extend(validate_label_value(value, f"{path}.value"))
    effect = get_str(taint, "effect", path, errs) or ""
    if old is None or old.get("effect") != taint.get("effect"):
        if not effect:
            errs.append(required(f"{path}.effect"))
        elif effect not in TAINT_EFFECTS:
            errs.append(not_supported(f"{path}.effect", effect, TAINT_EFFECTS))
    get_str(taint, "timeAdded", path, errs)
    return errs


# --- defaults and drop-rule helpers -----------------------------------------------------------


def now_rfc3339() -> str:
    """Current time truncated to seconds, as upstream serializes metav1.Time."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def default_taint(taint: Any) -> None:
    if isinstance(taint, dict) and not taint.get("timeAdded"):
        taint["timeAdded"] = now_rfc3339()


def pop_all(items: Iterable[Obj], *keys: str) -> None:
    for item in items:
        for key in keys:
            item.pop(key, None)
