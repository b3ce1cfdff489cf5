"""What ValidatingAdmissionPolicy and its binding share: match resources (rules, selectors, match
policy) with their defaults and validation, the reserved static names, and how upstream prints
the requester in the authorization refusals of paramKind and paramRef."""

from __future__ import annotations

from typing import Any

from app.registry.accessors import Errs, dict_entries, get_list
from app.registry.base import Obj
from app.registry.common import validate_label_selector
from app.registry.objectmeta import path_segment_problems
from kube.errors import duplicate, invalid, not_supported, required
from kube.features import Gate

GROUP = "admissionregistration.k8s.io"
POLICIES = "validatingadmissionpolicies"
BINDINGS = "validatingadmissionpolicybindings"
CATEGORIES = ("api-extensions",)

EXACT, EQUIVALENT = "Exact", "Equivalent"
ALL_SCOPES = "*"
OPERATION_ALL = "*"
SUPPORTED_OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
SUPPORTED_SCOPES = ("*", "Cluster", "Namespaced")
SUPPORTED_MATCH_POLICIES = ("Equivalent", "Exact")

# Names ending so are reserved for manifest-based configuration (ManifestBasedAdmissionControlConfig).
STATIC_SUFFIX = ".static.k8s.io"
STATIC_SUFFIX_GATE = Gate.ManifestBasedAdmissionControlConfig
STATIC_SUFFIX_PROBLEM = f'names ending with "{STATIC_SUFFIX}" are reserved for static manifest-based configurations and cannot be managed via the API'


# --- defaults (pkg/apis/admissionregistration/v1/defaults.go) ---------------------------------------


def default_match_resources(match: Any) -> None:
    """matchPolicy Equivalent, empty (match-all) selectors, and every rule's scope "*"."""
    if not isinstance(match, dict):
        return
    if match.get("matchPolicy") is None:
        match["matchPolicy"] = EQUIVALENT
    for key in ("namespaceSelector", "objectSelector"):
        if match.get(key) is None:
            match[key] = {}
    for key in ("resourceRules", "excludeResourceRules"):
        for rule in match.get(key) or []:
            if isinstance(rule, dict) and rule.get("scope") is None:
                rule["scope"] = ALL_SCOPES


# --- validation (pkg/apis/admissionregistration/validation) ----------------------------------------


def validate_static_name(name: str, gates: Any) -> Errs:
    """A name reserved for static configuration is refused on create while its gate is on."""
    if gates.enabled(STATIC_SUFFIX_GATE) and name.endswith(STATIC_SUFFIX):
        return [invalid("metadata.name", name, STATIC_SUFFIX_PROBLEM)]
    return []


def static_name_warnings(name: str) -> list[str]:
    return [f"metadata.name: {STATIC_SUFFIX_PROBLEM}"] if name.endswith(STATIC_SUFFIX) else []


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def validate_match_resources(match: Any, path: str) -> Errs:
    errs: Errs = []
    if not isinstance(match, dict):
        return errs
    policy = match.get("matchPolicy")
    if policy is None:
        errs.append(required(f"{path}.matchPolicy"))
    elif policy not in SUPPORTED_MATCH_POLICIES:
        errs.append(not_supported(f"{path}.matchPolicy", policy, SUPPORTED_MATCH_POLICIES))
    for key in ("namespaceSelector", "objectSelector"):
        if match.get(key) is None:
            errs.append(required(f"{path}.{key}"))
        else:
            errs += validate_label_selector(match[key], f"{path}.{key}")
    for key in ("resourceRules", "excludeResourceRules"):
        rules = get_list(match, key, path, errs) or []
        for _, rule, rpath in dict_entries(rules, f"{path}.{key}", errs):
            errs += _validate_named_rule(rule, rpath)
    return errs


def _validate_named_rule(rule: Obj, path: str) -> Errs:
    errs: Errs = []
    seen: set[str] = set()
    for index, name in enumerate(_strings(rule.get("resourceNames"))):
        errs += [invalid(f"{path}.resourceNames[{index}]", name, problem) for problem in path_segment_problems(name)]
        if name in seen:
            errs.append(duplicate(f"{path}.resourceNames[{index}]", name))
        seen.add(name)
    operations = _strings(rule.get("operations"))
    if not operations:
        errs.append(required(f"{path}.operations"))
    if len(operations) > 1 and OPERATION_ALL in operations:
        errs.append(invalid(f"{path}.operations", operations, "if '*' is present, must not specify other operations"))
    for index, operation in enumerate(operations):
        if operation not in SUPPORTED_OPERATIONS:
            errs.append(not_supported(f"{path}.operations[{index}]", operation, SUPPORTED_OPERATIONS))
    return errs + _validate_rule(rule, path)


def _validate_rule(rule: Obj, path: str) -> Errs:
    errs: Errs = []
    groups = _strings(rule.get("apiGroups"))
    if not groups:
        errs.append(required(f"{path}.apiGroups"))
    if len(groups) > 1 and "*" in groups:
        errs.append(invalid(f"{path}.apiGroups", groups, "if '*' is present, must not specify other API groups"))
    versions = _strings(rule.get("apiVersions"))
    if not versions:
        errs.append(required(f"{path}.apiVersions"))
    if len(versions) > 1 and "*" in versions:
        errs.append(invalid(f"{path}.apiVersions", versions, "if '*' is present, must not specify other API versions"))
    for index, version in enumerate(versions):
        if not version:
            errs.append(required(f"{path}.apiVersions[{index}]"))
    errs += _validate_resources(_strings(rule.get("resources")), f"{path}.resources")
    scope = rule.get("scope")
    if scope is not None and scope not in SUPPORTED_SCOPES:
        errs.append(not_supported(f"{path}.scope", scope, SUPPORTED_SCOPES))
    return errs


def _validate_resources(resources: list[str], path: str) -> Errs:
    """Resources and subresources ("pods", "pods/status", "*/scale", "*/*"), without overlaps."""
    errs: Errs = []
    if not resources:
        errs.append(required(path))
    wildcard_subresources: set[str] = set()  # x/*
    wildcard_resources: set[str] = set()  # */x
    double_wildcard = single_wildcard = plain_resource = False
    for index, entry in enumerate(resources):
        if not entry:
            errs.append(required(f"{path}[{index}]"))
            continue
        double_wildcard = double_wildcard or entry == "*/*"
        single_wildcard = single_wildcard or entry == "*"
        resource, slash, subresource = entry.partition("/")
        if not slash:
            plain_resource = entry != "*"
            continue
        if resource in wildcard_subresources:
            errs.append(invalid(f"{path}[{index}]", entry, f"if '{resource}/*' is present, must not specify {entry}"))
        if subresource in wildcard_resources:
            errs.append(invalid(f"{path}[{index}]", entry, f"if '*/{subresource}' is present, must not specify {entry}"))
        if subresource == "*":
            wildcard_subresources.add(resource)
        if resource == "*":
            wildcard_resources.add(subresource)
    if len(resources) > 1 and double_wildcard:
        errs.append(invalid(path, resources, "if '*/*' is present, must not specify other resources"))
    if single_wildcard and plain_resource:
        errs.append(invalid(path, resources, "if '*' is present, must not specify other resources without subresources"))
    return errs


# --- how upstream prints things in its messages ----------------------------------------------------


def go_user(user: Any) -> str:
    """A requester as Go's ``%v`` prints upstream's *user.DefaultInfo: ``&{name uid [groups] map[extra]}``."""
    extra = " ".join(f"{key}:[{' '.join(values)}]" for key, values in sorted((user.extra or {}).items()))
    return f"&{{{user.name} {user.uid} [{' '.join(user.groups)}] map[{extra}]}}"


def go_param_kind(param_kind: Any) -> str:
    """A paramKind as its generated String() prints it."""
    kind = param_kind if isinstance(param_kind, dict) else {}
    return f"&ParamKind{{APIVersion:{kind.get('apiVersion') or ''},Kind:{kind.get('kind') or ''},}}"


def go_label_selector(selector: Any) -> str:
    """A metav1.LabelSelector as its generated String() prints it (kubectl's ParamRef column)."""
    selector = selector if isinstance(selector, dict) else {}
    labels = selector.get("matchLabels") or {}
    expressions = "".join(
        f"LabelSelectorRequirement{{Key:{e.get('key') or ''},Operator:{e.get('operator') or ''},Values:[{' '.join(e.get('values') or [])}],}},"
        for e in selector.get("matchExpressions") or []
        if isinstance(e, dict)
    )
    matched = "".join(f"{k}: {v}," for k, v in sorted(labels.items()))
    return f"&LabelSelector{{MatchLabels:map[string]string{{{matched}}},MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"


def split_api_version(api_version: str) -> tuple[str, str] | None:
    """(group, version) of "group/version" or "version"; None for more than one slash."""
    if api_version in ("", "/"):
        return "", ""
    if api_version.count("/") > 1:
        return None
    group, slash, version = api_version.partition("/")
    return (group, version) if slash else ("", group)
