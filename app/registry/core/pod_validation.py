"""Pod: validation of the spec on create and update and of status writes, and the gate drop rules
(pkg/api/pod/util.go)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

from app.registry.accessors import as_dict, as_dict_entries, as_list, as_str, parse_quantity_field
from app.registry.base import Obj
from app.registry.common import (
    NOT_STANDARD_RESOURCE,
    is_extended_resource,
    is_native_resource,
    is_standard_resource,
    validate_label_selector,
    validate_node_selector,
    validate_node_selector_term,
    validate_resource_quantity,
)
from app.registry.core.node_validation import TAINT_EFFECTS
from app.registry.objectmeta import (
    IS_NEGATIVE,
    dns1123_label_problems,
    dns1123_subdomain_problems,
    is_int,
    validate_dns1123_label,
    validate_dns1123_subdomain,
    validate_immutable,
    validate_label_value,
    validate_labels,
    validate_qualified_name,
)
from kube.errors import NOT_FOUND, FieldError, duplicate, forbidden, invalid, not_supported, required
from kube.quantity import Quantity

INT32_MAX = 2**31 - 1
RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
TOLERATION_OPERATORS = ("Equal", "Exists")
UNSATISFIABLE_CONSTRAINT_ACTIONS = ("DoNotSchedule", "ScheduleAnyway")
NODE_INCLUSION_POLICIES = ("Honor", "Ignore")
# Conditions the kubelet owns; any other pod condition type must be a qualified name.
SYSTEM_POD_CONDITIONS = frozenset({"PodScheduled", "Ready", "Initialized"})
# Upstream's list of pod spec fields an update may touch, joined into its Forbidden message.
UPDATABLE_POD_SPEC_FIELDS = (
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
)

_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
_HUGEPAGES_PREFIX = "hugepages-"
# What a node allocates to pods and containers (KEP-5517 status entries).
_NODE_ALLOCATABLE_RE = re.compile(r"^(cpu|memory|ephemeral-storage|hugepages-.+)$")


# ---------------------------------------------------------------------------------------------
# container resources
# ---------------------------------------------------------------------------------------------


def validate_container_resource_name(name: str, path: str) -> list[FieldError]:
    """validateContainerResourceName: qualified, and standard for containers or extended."""
    errs = validate_qualified_name(name, path)
    if errs:
        return errs
    if "/" not in name:
        if not is_standard_resource(name):
            errs.append(invalid(path, name, NOT_STANDARD_RESOURCE))
        if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith(_HUGEPAGES_PREFIX):
            errs.append(invalid(path, name, "must be a standard resource for containers"))
    elif not is_native_resource(name) and not is_extended_resource(name):
        errs.append(invalid(path, name, "doesn't follow extended resource name standard"))
    return errs


def _overcommit_allowed(name: str) -> bool:
    """Whether a request may differ from the limit (everything but hugepages and extended resources)."""
    return is_native_resource(name) and not name.startswith(_HUGEPAGES_PREFIX)


def validate_resource_requirements(
    resources: object, claim_names: set[str], path: str, pod_level: bool = False
) -> list[FieldError]:
    """A container's (or the pod's) resources: names, quantities, requests <= limits, claims."""
    errs: list[FieldError] = []
    res = as_dict(resources, path, errs)
    limits = as_dict(res.get("limits"), f"{path}.limits", errs)
    requests = as_dict(res.get("requests"), f"{path}.requests", errs)
    parsed_limits: dict[str, Quantity] = {}
    for name, value in limits.items():
        key_path = f"{path}.limits[{name}]"
        if not pod_level:
            errs += validate_container_resource_name(name, key_path)
        value_errs = validate_resource_quantity(name, value, key_path)
        errs += value_errs
        if not value_errs:
            parsed_limits[name] = Quantity.parse(value)
    for name, value in requests.items():
        key_path = f"{path}.requests[{name}]"
        if not pod_level:
            errs += validate_container_resource_name(name, key_path)
        value_errs = validate_resource_quantity(name, value, key_path)
        errs += value_errs
        if value_errs:
            continue
        request = Quantity.parse(value)
        limit = parsed_limits.get(name)
        if limit is not None:
            # Upstream reports both cases at the requests map, with the request as the value.
            if request != limit and not _overcommit_allowed(name):
                errs.append(invalid(f"{path}.requests", request.canonical(), f"must be equal to {name} limit of {limit.canonical()}"))
            elif request > limit:
                errs.append(invalid(f"{path}.requests", request.canonical(), f"must be less than or equal to {name} limit of {limit.canonical()}"))
        elif name not in limits and not _overcommit_allowed(name):
            errs.append(required(f"{path}.limits", "Limit must be set for non overcommitable resources"))
    if pod_level:
        if res.get("claims") is not None:
            errs.append(forbidden(f"{path}.claims", "claims cannot be set for Resources at pod-level"))
    else:
        errs += validate_resource_claim_refs(res.get("claims"), claim_names, f"{path}.claims")
    return errs


def validate_resource_claim_refs(claims: object, pod_claim_names: set[str], path: str) -> list[FieldError]:
    """A container's resources.claims: named pod claims, each (claim, request) referenced once."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for _index, claim, claim_path in as_dict_entries(claims, path, errs):
        name = as_str(claim.get("name"), f"{claim_path}.name", errs)
        request = as_str(claim.get("request"), f"{claim_path}.request", errs)
        if not name:
            errs.append(required(claim_path))
            continue
        if name in seen:
            # The whole claim was already referenced, so every request of it is too.
            errs.append(duplicate(claim_path, name))
        else:
            key = name
            if request:
                errs += validate_dns1123_label(request, f"{claim_path}.request")
                key = f"{name}/{request}"
            if key in seen:
                errs.append(duplicate(claim_path, key))
            elif not request:
                # A whole-claim reference overlaps any earlier reference to one of its requests.
                errs += [duplicate(claim_path, name) for other in sorted(seen) if other.split("/", 1)[0] == name and "/" in other]
            seen.add(key)
        if name not in pod_claim_names:
            detail = "must be one of the names in pod.spec.resourceClaims"
            detail += ": " + ", ".join(sorted(pod_claim_names)) if pod_claim_names else " which is empty"
            errs.append(FieldError(NOT_FOUND, claim_path, detail, name, True))
    return errs


# ---------------------------------------------------------------------------------------------
# pod spec
# ---------------------------------------------------------------------------------------------


def pod_claim_names(spec: Obj) -> set[str]:
    """Non-empty spec.resourceClaims names (validity is checked separately)."""
    claims = spec.get("resourceClaims")
    if not isinstance(claims, list):
        return set()
    return {c["name"] for c in claims if isinstance(c, dict) and isinstance(c.get("name"), str) and c["name"]}


def validate_pod_resource_claims(claims: object, path: str) -> list[FieldError]:
    """spec.resourceClaims: unique DNS-label names, exactly one source, valid object names."""
    errs: list[FieldError] = []
    names: set[str] = set()
    for _index, claim, claim_path in as_dict_entries(claims, path, errs):
        name = as_str(claim.get("name"), f"{claim_path}.name", errs)
        if not name:
            errs.append(required(f"{claim_path}.name"))
        elif name in names:
            errs.append(duplicate(f"{claim_path}.name", name))
        else:
            errs += validate_dns1123_label(name, f"{claim_path}.name")
            names.add(name)
        claim_name = claim.get("resourceClaimName")
        template_name = claim.get("resourceClaimTemplateName")
        if claim_name is not None and template_name is not None:
            errs.append(invalid(claim_path, claim, "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"))
        if claim_name is None and template_name is None:
            errs.append(invalid(claim_path, claim, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
        for key, value in (("resourceClaimName", claim_name), ("resourceClaimTemplateName", template_name)):
            if value is None:
                continue
            text = as_str(value, f"{claim_path}.{key}", errs)
            if isinstance(value, str):
                errs += [invalid(f"{claim_path}.{key}", text, p) for p in dns1123_subdomain_problems(text)]
    return errs


def _validate_enum(value: object, path: str, allowed: tuple[str, ...]) -> list[FieldError]:
    """Required when empty, Unsupported when not one of ``allowed``."""
    if value is None or value == "":
        return [required(path)]
    if value not in allowed:
        return [not_supported(path, value, allowed)]
    return []


def _privileged_errors(container: Obj, path: str, allow_privileged: bool) -> list[FieldError]:
    """A privileged container only where the server allows them (kube-apiserver's --allow-privileged)."""
    context = container.get("securityContext")
    if allow_privileged or not isinstance(context, dict) or context.get("privileged") is not True:
        return []
    return [forbidden(f"{path}.securityContext.privileged", "disallowed by cluster policy")]


def _validate_container_common(container: Obj, claim_names: set[str], path: str, allow_privileged: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    name = as_str(container.get("name"), f"{path}.name", errs)
    if not name:
        errs.append(required(f"{path}.name"))
    else:
        errs += validate_dns1123_label(name, f"{path}.name")
    image = as_str(container.get("image"), f"{path}.image", errs)
    if not image:
        errs.append(required(f"{path}.image"))
    elif image != image.strip():
        errs.append(invalid(f"{path}.image", image, "must not have leading or trailing whitespace"))
    errs += _validate_enum(container.get("terminationMessagePolicy"), f"{path}.terminationMessagePolicy", TERMINATION_MESSAGE_POLICIES)
    errs += _validate_enum(container.get("imagePullPolicy"), f"{path}.imagePullPolicy", PULL_POLICIES)
    errs += validate_resource_requirements(container.get("resources"), claim_names, f"{path}.resources")
    errs += _privileged_errors(container, path, allow_privileged)
    return errs


def validate_containers(spec: Obj, claim_names: set[str], path: str = "spec", *, allow_privileged: bool) -> list[FieldError]:
    """Regular, init and ephemeral containers: at least one container, unique DNS-label names, images,
    privileged ones only where allowed."""
    errs: list[FieldError] = []
    containers = as_list(spec.get("containers"), f"{path}.containers", errs)
    if not containers and isinstance(spec.get("containers", []), list):
        errs.append(required(f"{path}.containers"))
    names: set[str] = set()
    for _index, container, container_path in as_dict_entries(containers, f"{path}.containers", errs):
        errs += _validate_container_common(container, claim_names, container_path, allow_privileged)
        name = container.get("name")
        if isinstance(name, str):
            if name in names:
                errs.append(duplicate(f"{container_path}.name", name))
            else:
                names.add(name)
        if container.get("restartPolicy") is not None:
            errs.append(forbidden(f"{container_path}.restartPolicy", "may not be set for non-init containers"))
    for _index, container, container_path in as_dict_entries(spec.get("initContainers"), f"{path}.initContainers", errs):
        errs += _validate_container_common(container, claim_names, container_path, allow_privileged)
        policy = container.get("restartPolicy")
        if policy is not None and policy != "Always":
            errs.append(not_supported(f"{container_path}.restartPolicy", policy, ("Always",)))
        name = container.get("name")
        if isinstance(name, str):
            if name in names:
                errs.append(duplicate(f"{container_path}.name", name))
            elif name:
                names.add(name)
        if policy != "Always":
            for probe in ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe"):
                if container.get(probe) is not None:
                    errs.append(forbidden(f"{container_path}.{probe}", "may not be set for init containers without restartPolicy=Always"))
    for _index, container, container_path in as_dict_entries(spec.get("ephemeralContainers"), f"{path}.ephemeralContainers", errs):
        name = container.get("name")
        if isinstance(name, str) and name in names:
            errs.append(duplicate(f"{container_path}.name", name))
        elif isinstance(name, str) and name:
            names.add(name)
        errs += validate_resource_claim_refs(
            as_dict(container.get("resources"), f"{container_path}.resources", errs).get("claims"),
            claim_names,
            f"{container_path}.resources.claims",
        )
        errs += _privileged_errors(container, container_path, allow_privileged)
    return errs


def validate_scheduling_gates(gates: object, path: str) -> list[FieldError]:
    """Each gate name is a qualified name, reported (like duplicates) at the entry's path."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for _index, gate, gate_path in as_dict_entries(gates, path, errs):
        name = as_str(gate.get("name"), f"{gate_path}.name", errs)
        errs += validate_qualified_name(name, gate_path)
        if name in seen:
            errs.append(duplicate(gate_path, name))
        seen.add(name)
    return errs


def validate_scheduling_group(group: object, path: str) -> list[FieldError]:
    """spec.schedulingGroup (GenericWorkload): a union with one member, podGroupName, a DNS subdomain.
    The group need not exist yet; it is a name in the pod's own namespace."""
    if group is None:
        return []
    if not isinstance(group, dict):
        return [invalid(path, group, "must be an object")]
    name = group.get("podGroupName")
    if name is None:
        return [invalid(path, "", "must specify one of: `podGroupName`")]
    if not isinstance(name, str) or not name:
        return [required(f"{path}.podGroupName")] if name == "" else [invalid(f"{path}.podGroupName", name, "must be a string")]
    return validate_dns1123_subdomain(name, f"{path}.podGroupName")


def validate_tolerations(tolerations: object, path: str) -> list[FieldError]:
    """ValidateTolerations: key, operator/value pairing, effect, tolerationSeconds needs NoExecute."""
    errs: list[FieldError] = []
    for _index, tol, tol_path in as_dict_entries(tolerations, path, errs):
        key = as_str(tol.get("key"), f"{tol_path}.key", errs)
        operator = as_str(tol.get("operator"), f"{tol_path}.operator", errs)
        value = as_str(tol.get("value"), f"{tol_path}.value", errs)
        effect = as_str(tol.get("effect"), f"{tol_path}.effect", errs)
        if key:
            errs += validate_qualified_name(key, f"{tol_path}.key")
        if not key and operator != "Exists":
            errs.append(invalid(f"{tol_path}.operator", operator, 'operator must be Exists when `key` is empty, which means "match all values and all keys"'))
        if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
            errs.append(invalid(f"{tol_path}.effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if operator in ("Equal", ""):
            problems = validate_label_value(value, f"{tol_path}.operator")
            if problems:
                errs.append(invalid(f"{tol_path}.operator", value, ";".join(p.detail for p in problems)))
        elif operator == "Exists":
            if value:
                errs.append(invalid(f"{tol_path}.operator", value, "value must be empty when `operator` is 'Exists'"))
        else:
            errs.append(not_supported(f"{tol_path}.operator", operator, TOLERATION_OPERATORS))
        if effect and effect not in TAINT_EFFECTS:
            errs.append(not_supported(f"{tol_path}.effect", effect, TAINT_EFFECTS))
    return errs


# ---- affinity and topology spread ---------------------------------------------------------------


def _validate_weight(term: Obj, path: str) -> list[FieldError]:
    """A preferred term's weight (absent reads as Go's zero) lies in 1-100."""
    weight = term.get("weight", 0)
    if not is_int(weight) or not 1 <= weight <= 100:
        return [invalid(f"{path}.weight", weight, "must be in the range 1-100")]
    return []


def _validate_node_affinity(node_affinity: Obj, path: str) -> list[FieldError]:
    """Required terms form a node selector whose label values must be valid; preferred terms
    carry a weight and may name any value (a lone node can still satisfy them)."""
    errs: list[FieldError] = []
    required_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
    required_selector = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required_selector is not None:
        errs += validate_node_selector(as_dict(required_selector, required_path, errs), required_path, check_values=True)
    preferred_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
    for _index, term, term_path in as_dict_entries(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), preferred_path, errs):
        errs += _validate_weight(term, term_path)
        preference_path = f"{term_path}.preference"
        errs += validate_node_selector_term(as_dict(term.get("preference"), preference_path, errs), preference_path)
    return errs


def _string_list(value: object, path: str, errs: list[FieldError]) -> list[str]:
    return [as_str(item, f"{path}[{index}]", errs) for index, item in enumerate(as_list(value, path, errs))]


def validate_label_keys_against_selector(
    path: str, match_keys: list[str], mismatch_keys: list[str], selector: object
) -> list[FieldError]:
    """Upstream's ValidateMatchLabelKeysAndMismatchLabelKeys. Both key lists need a selector and
    hold label names. The selector has already had matchLabelKeys merged in as ``key In (value)``
    expressions on create, so a key named by matchLabelKeys that the selector also names elsewhere
    shows up as an expression on a key seen before. Upstream reports that one at ``path[i]``
    (not under matchLabelKeys); the same path is kept so clients see the same field."""
    errs: list[FieldError] = []
    for key_path, keys in ((f"{path}.matchLabelKeys", match_keys), (f"{path}.mismatchLabelKeys", mismatch_keys)):
        if not keys:
            continue
        if selector is None:
            errs.append(forbidden(key_path, "must not be specified when labelSelector is not set"))
            continue
        for index, key in enumerate(keys):
            errs += validate_qualified_name(key, f"{key_path}[{index}]")
    if isinstance(selector, dict):
        index_of = {key: index for index, key in enumerate(match_keys)}
        labels = selector.get("matchLabels")
        seen = set(labels) if isinstance(labels, dict) else set()
        expressions = selector.get("matchExpressions")
        for expression in expressions if isinstance(expressions, list) else []:
            expression_key = expression.get("key") if isinstance(expression, dict) else None
            if not isinstance(expression_key, str):
                continue
            if expression_key in index_of and expression_key in seen:
                errs.append(invalid(f"{path}[{index_of[expression_key]}]", expression_key, "exists in both matchLabelKeys and labelSelector"))
            seen.add(expression_key)
    mismatch = set(mismatch_keys)
    for index, key in enumerate(match_keys):
        if key in mismatch:
            errs.append(invalid(f"{path}.matchLabelKeys[{index}]", key, "exists in both matchLabelKeys and mismatchLabelKeys"))
    return errs


def _validate_pod_affinity_term(term: Obj, path: str) -> list[FieldError]:
    """validatePodAffinityTerm: selectors, namespace names, label keys, and a topology key."""
    errs: list[FieldError] = []
    errs += validate_label_selector(as_dict(term.get("labelSelector"), f"{path}.labelSelector", errs), f"{path}.labelSelector")
    errs += validate_label_selector(as_dict(term.get("namespaceSelector"), f"{path}.namespaceSelector", errs), f"{path}.namespaceSelector")
    for namespace in _string_list(term.get("namespaces"), f"{path}.namespaces", errs):
        # Upstream names the field "namespace" (singular, no index) here.
        errs += [invalid(f"{path}.namespace", namespace, problem) for problem in dns1123_label_problems(namespace)]
    match_keys = _string_list(term.get("matchLabelKeys"), f"{path}.matchLabelKeys", errs)
    mismatch_keys = _string_list(term.get("mismatchLabelKeys"), f"{path}.mismatchLabelKeys", errs)
    errs += validate_label_keys_against_selector(path, match_keys, mismatch_keys, term.get("labelSelector"))
    topology_key = as_str(term.get("topologyKey"), f"{path}.topologyKey", errs)
    if not topology_key:
        errs.append(required(f"{path}.topologyKey", "can not be empty"))
    errs += validate_qualified_name(topology_key, f"{path}.topologyKey")
    return errs


def _validate_pod_affinity(affinity: Obj, path: str) -> list[FieldError]:
    """podAffinity or podAntiAffinity: required terms, then weighted preferred terms."""
    errs: list[FieldError] = []
    required_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
    for _index, term, term_path in as_dict_entries(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), required_path, errs):
        errs += _validate_pod_affinity_term(term, term_path)
    preferred_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
    for _index, weighted, weighted_path in as_dict_entries(affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), preferred_path, errs):
        errs += _validate_weight(weighted, weighted_path)
        term_path = f"{weighted_path}.podAffinityTerm"
        errs += _validate_pod_affinity_term(as_dict(weighted.get("podAffinityTerm"), term_path, errs), term_path)
    return errs


def validate_affinity(affinity_value: object, path: str) -> list[FieldError]:
    """validateAffinity: node affinity, pod affinity and pod anti-affinity."""
    errs: list[FieldError] = []
    affinity = as_dict(affinity_value, path, errs)
    if affinity.get("nodeAffinity") is not None:
        node_path = f"{path}.nodeAffinity"
        errs += _validate_node_affinity(as_dict(affinity.get("nodeAffinity"), node_path, errs), node_path)
    for kind in ("podAffinity", "podAntiAffinity"):
        if affinity.get(kind) is not None:
            errs += _validate_pod_affinity(as_dict(affinity.get(kind), f"{path}.{kind}", errs), f"{path}.{kind}")
    return errs


def _positive_int(value: object, path: str) -> list[FieldError]:
    if not is_int(value) or value <= 0:  # type: ignore[operator]
        return [invalid(path, value, "must be greater than zero")]
    return []


def _legacy_spread_label_keys(path: str, match_keys: list[str], selector: object) -> list[FieldError]:
    """ValidateMatchLabelKeysInTopologySpread, the rule while the selector merge is off: each key a
    label name that the (unmerged) selector does not already name."""
    if not match_keys:
        return []
    errs: list[FieldError] = []
    named: set[str] = set()
    if isinstance(selector, dict):
        labels = selector.get("matchLabels")
        named.update(labels if isinstance(labels, dict) else ())
        expressions = selector.get("matchExpressions")
        for expression in expressions if isinstance(expressions, list) else []:
            if isinstance(expression, dict) and isinstance(expression.get("key"), str):
                named.add(expression["key"])
    else:
        errs.append(forbidden(path, "must not be specified when labelSelector is not set"))
    for index, key in enumerate(match_keys):
        errs += validate_qualified_name(key, f"{path}[{index}]")
        if key in named:
            errs.append(invalid(f"{path}[{index}]", key, "exists in both matchLabelKeys and labelSelector"))
    return errs


def validate_topology_spread_constraints(constraints: object, path: str, *, merged_label_keys: bool = True) -> list[FieldError]:
    """validateTopologySpreadConstraints with the options a new pod gets. While
    MatchLabelKeysInPodTopologySpread and its SelectorMerge are on (the defaults,
    ``merged_label_keys``) matchLabelKeys are checked like pod affinity's, against the selector
    they were merged into; otherwise by the older rule against the selector as sent."""
    errs: list[FieldError] = []
    entries = list(as_dict_entries(constraints, path, errs))
    for position, (_index, constraint, constraint_path) in enumerate(entries):
        errs += _positive_int(constraint.get("maxSkew", 0), f"{constraint_path}.maxSkew")
        topology_key = as_str(constraint.get("topologyKey"), f"{constraint_path}.topologyKey", errs)
        if not topology_key:
            errs.append(required(f"{constraint_path}.topologyKey", "can not be empty"))
        action = as_str(constraint.get("whenUnsatisfiable"), f"{constraint_path}.whenUnsatisfiable", errs)
        if action not in UNSATISFIABLE_CONSTRAINT_ACTIONS:
            errs.append(not_supported(f"{constraint_path}.whenUnsatisfiable", action, UNSATISFIABLE_CONSTRAINT_ACTIONS))
        # One constraint per {topologyKey, whenUnsatisfiable}; the first of a repeated pair is reported.
        for _later_index, later, _later_path in entries[position + 1 :]:
            if later.get("topologyKey", "") == topology_key and later.get("whenUnsatisfiable", "") == action:
                errs.append(duplicate(f"{constraint_path}.{{topologyKey, whenUnsatisfiable}}", f"{{{topology_key}, {action}}}"))
                break
        min_domains = constraint.get("minDomains")
        if min_domains is not None:
            errs += _positive_int(min_domains, f"{constraint_path}.minDomains")
            if action != "DoNotSchedule":
                errs.append(invalid(f"{constraint_path}.minDomains", min_domains, f"can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}"))
        for policy_field in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            policy = constraint.get(policy_field)
            if policy is not None and policy not in NODE_INCLUSION_POLICIES:
                errs.append(not_supported(f"{constraint_path}.{policy_field}", policy, NODE_INCLUSION_POLICIES))
        match_keys = _string_list(constraint.get("matchLabelKeys"), f"{constraint_path}.matchLabelKeys", errs)
        if merged_label_keys:
            errs += validate_label_keys_against_selector(constraint_path, match_keys, [], constraint.get("labelSelector"))
        else:
            errs += _legacy_spread_label_keys(f"{constraint_path}.matchLabelKeys", match_keys, constraint.get("labelSelector"))
        selector_path = f"{constraint_path}.labelSelector"
        errs += validate_label_selector(as_dict(constraint.get("labelSelector"), selector_path, errs), selector_path)
    return errs


def validate_pod_spec(
    spec_value: object, path: str = "spec", *, allow_privileged: bool, merged_spread_label_keys: bool = True
) -> list[FieldError]:
    """The parts of ValidatePodSpec this server enforces (see the module docstring of pod.py);
    ``allow_privileged`` is the server's --allow-privileged; ``merged_spread_label_keys`` says
    whether the topology spread selector merge is on (it picks the matchLabelKeys rule)."""
    errs: list[FieldError] = []
    if not isinstance(spec_value, dict):
        return [required(path)] if spec_value is None else [invalid(path, spec_value, "must be an object")]
    spec: Obj = spec_value
    grace = spec.get("terminationGracePeriodSeconds")
    if grace is None:
        errs.append(required(f"{path}.terminationGracePeriodSeconds"))
    elif not is_int(grace):
        errs.append(invalid(f"{path}.terminationGracePeriodSeconds", grace, "must be an integer"))
    claim_names = pod_claim_names(spec)
    errs += validate_pod_resource_claims(spec.get("resourceClaims"), f"{path}.resourceClaims")
    errs += validate_containers(spec, claim_names, path, allow_privileged=allow_privileged)
    if spec.get("resources") is not None:
        errs += validate_resource_requirements(spec.get("resources"), claim_names, f"{path}.resources", pod_level=True)
    errs += _validate_enum(spec.get("restartPolicy"), f"{path}.restartPolicy", RESTART_POLICIES)
    errs += _validate_enum(spec.get("dnsPolicy"), f"{path}.dnsPolicy", DNS_POLICIES)
    errs += validate_labels(spec.get("nodeSelector"), f"{path}.nodeSelector")
    errs += validate_affinity(spec.get("affinity"), f"{path}.affinity")
    errs += validate_scheduling_gates(spec.get("schedulingGates"), f"{path}.schedulingGates")
    errs += validate_topology_spread_constraints(
        spec.get("topologySpreadConstraints"), f"{path}.topologySpreadConstraints", merged_label_keys=merged_spread_label_keys
    )
    errs += validate_scheduling_group(spec.get("schedulingGroup"), f"{path}.schedulingGroup")
    for key in ("serviceAccountName", "nodeName", "priorityClassName"):
        value = as_str(spec.get(key), f"{path}.{key}", errs)
        if value:
            errs += validate_dns1123_subdomain(value, f"{path}.{key}")
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (not is_int(deadline) or not 1 <= deadline <= INT32_MAX):
        errs.append(invalid(f"{path}.activeDeadlineSeconds", deadline, f"must be between 1 and {INT32_MAX}, inclusive"))
    for key in ("hostname", "subdomain"):
        value = as_str(spec.get(key), f"{path}.{key}", errs)
        if value:
            errs += validate_dns1123_label(value, f"{path}.{key}")
    if spec.get("tolerations"):
        errs += validate_tolerations(spec.get("tolerations"), f"{path}.tolerations")
    if spec.get("preemptionPolicy") is not None:
        errs += _validate_enum(spec.get("preemptionPolicy"), f"{path}.preemptionPolicy", PREEMPTION_POLICIES)
    return errs


def validate_pod_create(pod: Obj, *, allow_privileged: bool, merged_spread_label_keys: bool = True) -> list[FieldError]:
    """ValidatePodCreate minus ObjectMeta: the spec, plus nodeName only on ungated pods."""
    errs = validate_pod_spec(pod.get("spec"), allow_privileged=allow_privileged, merged_spread_label_keys=merged_spread_label_keys)
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    if spec.get("nodeName") and spec.get("schedulingGates"):
        errs.append(forbidden("spec.nodeName", "cannot be set until all schedulingGates have been cleared"))
    return errs


# ---- pod update ---------------------------------------------------------------------------------


def _normalized(value: Any) -> Any:
    """Go's semantic equality ignores nil-vs-empty and zero-valued non-pointer fields; dropping
    null, empty, false and "" members approximates it for decoded JSON."""
    if isinstance(value, dict):
        out = {k: _normalized(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, "", False, [], {})}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def _spec_diff(old: Obj, new: Obj) -> str:
    """A short, stable description of the changed spec fields (upstream prints a cmp.Diff)."""
    lines = ["  core.PodSpec{"]
    for key in sorted(set(old) | set(new)):
        if _normalized({"v": old.get(key)}) != _normalized({"v": new.get(key)}):
            if key in old:
                lines.append(f"-   {key}: {json.dumps(old[key], sort_keys=True)},")
            if key in new:
                lines.append(f"+   {key}: {json.dumps(new[key], sort_keys=True)},")
    lines.append("  }")
    return "\n".join(lines)


def _container_update_errors(new: list[Any], old: list[Any], path: str) -> tuple[list[FieldError], bool]:
    if len(new) != len(old):
        return [forbidden(path, "pod updates may not add or remove containers")], True
    errs: list[FieldError] = []
    for index, container in enumerate(new):
        image = container.get("image") if isinstance(container, dict) else None
        if not image:
            errs.append(required(f"{path}[{index}].image"))
    return errs, False


def _only_added_tolerations(new: list[Any], old: list[Any], path: str) -> list[FieldError]:
    def without_seconds(tol: Any) -> Any:
        return {k: v for k, v in tol.items() if k != "tolerationSeconds"} if isinstance(tol, dict) else tol

    new_stripped = [_normalized(without_seconds(t)) for t in new]
    for tol in old:
        if _normalized(without_seconds(tol)) not in new_stripped:
            return [forbidden(path, "existing toleration can not be modified except its tolerationSeconds")]
    return []


def _only_deleted_scheduling_gates(new: list[Any], old: list[Any], path: str) -> list[FieldError]:
    old_names = {g.get("name") for g in old if isinstance(g, dict)}
    added: dict[str, int] = {}
    for index, gate in enumerate(new):
        if isinstance(gate, dict) and isinstance(gate.get("name"), str) and gate["name"] not in old_names:
            added[gate["name"]] = index
    return [
        forbidden(f"{path}[{index}].name", f"only deletion is allowed, but found new scheduling gate '{name}'")
        for name, index in added.items()
    ]


def _restore(munged: Obj, old: Obj, key: str) -> None:
    """Put ``old[key]`` back into ``munged`` (absent stays absent)."""
    if key in old:
        munged[key] = old[key]
    else:
        munged.pop(key, None)


def _validate_node_selector_mutation(new: object, old: object, path: str) -> list[FieldError]:
    """A gated pod's nodeSelector may gain entries; any removed or changed entry is one error."""
    new_selector = new if isinstance(new, dict) else {}
    for key, value in (old if isinstance(old, dict) else {}).items():
        if key not in new_selector or new_selector[key] != value:
            return [invalid(path, new, "only additions to spec.nodeSelector are allowed (no mutations or deletions)")]
    return []


def _selector_terms(node_affinity: object) -> list[Any] | None:
    """requiredDuringScheduling...nodeSelectorTerms, or None when there is no required selector."""
    if not isinstance(node_affinity, dict):
        return None
    required_selector = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(required_selector, dict):
        return None
    terms = required_selector.get("nodeSelectorTerms")
    return terms if isinstance(terms, list) else []


def _term_requirements(term: object) -> tuple[list[Any], list[Any]]:
    """A node selector term's (matchExpressions, matchFields), wrong types read as empty."""
    fields = term if isinstance(term, dict) else {}
    expressions, match_fields = fields.get("matchExpressions"), fields.get("matchFields")
    return (
        expressions if isinstance(expressions, list) else [],
        match_fields if isinstance(match_fields, list) else [],
    )


def _term_has_only_additions(new: object, old: object) -> bool:
    """Existing matchExpressions/matchFields stay as they are (same order); more may follow. An
    empty old term matches no node, so giving it requirements would widen placement, not narrow it."""
    old_lists, new_lists = _term_requirements(old), _term_requirements(new)
    if not any(old_lists) and any(new_lists):
        return False
    for old_list, new_list in zip(old_lists, new_lists, strict=True):
        if old_list and (len(new_list) < len(old_list) or _normalized(new_list[: len(old_list)]) != _normalized(old_list)):
            return False
    return True


def _validate_node_affinity_mutation(new: object, old: object, path: str) -> list[FieldError]:
    """validateNodeAffinityMutation: with no old required selector anything goes; otherwise the
    number of terms is fixed and each term may only gain requirements. Preferred terms are free."""
    old_terms = _selector_terms(old)
    if old_terms is None:
        return []
    new_terms = _selector_terms(new) or []
    terms_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    if old_terms and len(old_terms) != len(new_terms):
        return [invalid(terms_path, new_terms, "no additions/deletions to non-empty NodeSelectorTerms list are allowed")]
    return [
        invalid(f"{terms_path}[{index}]", new_terms[index], "only additions are allowed (no mutations or deletions)")
        for index, old_term in enumerate(old_terms)
        if not _term_has_only_additions(new_terms[index], old_term)
    ]


def _munge_gated_scheduling_directives(munged: Obj, old_spec: Obj) -> list[FieldError]:
    """While the old pod is gated, nodeSelector and node affinity may be tightened (a queueing
    controller decides placement before it lifts its gate). Check those changes, then put the old
    values into ``munged`` so the catch-all comparison ignores them. Pod (anti-)affinity stays
    immutable."""
    errs: list[FieldError] = []
    if _normalized({"v": munged.get("nodeSelector")}) != _normalized({"v": old_spec.get("nodeSelector")}):
        errs += _validate_node_selector_mutation(munged.get("nodeSelector"), old_spec.get("nodeSelector"), "spec.nodeSelector")
        _restore(munged, old_spec, "nodeSelector")
    old_affinity = old_spec.get("affinity") if isinstance(old_spec.get("affinity"), dict) else None
    new_affinity = munged.get("affinity") if isinstance(munged.get("affinity"), dict) else None
    old_node_affinity = old_affinity.get("nodeAffinity") if old_affinity is not None else None
    new_node_affinity = new_affinity.get("nodeAffinity") if new_affinity is not None else None
    if _normalized({"v": new_node_affinity}) == _normalized({"v": old_node_affinity}):
        return errs
    errs += _validate_node_affinity_mutation(new_node_affinity, old_node_affinity, "spec.affinity.nodeAffinity")
    if new_affinity is None:
        if old_node_affinity is not None:
            munged["affinity"] = {"nodeAffinity": old_node_affinity}
    elif old_affinity is None and not new_affinity.get("podAffinity") and not new_affinity.get("podAntiAffinity"):
        munged.pop("affinity", None)  # only nodeAffinity was added
    else:
        _restore(new_affinity, old_affinity or {}, "nodeAffinity")
    return errs


_SCHEDULING_CONSTRAINT_PATHS = ("spec.affinity", "spec.topologySpreadConstraints")


def _error_identity(error: FieldError) -> tuple[str, str, str, str]:
    return (error.reason, error.field, error.detail, repr(error.value))


def _without_inherited_scheduling_errors(errs: list[FieldError], old_spec: Obj, merged_spread_label_keys: bool) -> list[FieldError]:
    """An update may keep an affinity or spread-constraint error the stored pod already has, but
    not add one. Upstream relaxes the same rules for an old pod that breaks them (its validation
    options follow the old spec), and pods stored before this server checked these fields must
    stay updatable (status, labels, tolerations, gates)."""
    inherited = validate_affinity(old_spec.get("affinity"), "spec.affinity")
    inherited += validate_topology_spread_constraints(
        old_spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints", merged_label_keys=merged_spread_label_keys
    )
    if not inherited:
        return errs
    known = {_error_identity(error) for error in inherited}
    return [
        error for error in errs
        if not (error.field.startswith(_SCHEDULING_CONSTRAINT_PATHS) and _error_identity(error) in known)
    ]


def validate_pod_update(new: Obj, old: Obj, *, allow_privileged: bool, merged_spread_label_keys: bool = True) -> list[FieldError]:
    """ValidatePodUpdate minus ObjectMeta: the new spec must be valid and may change only what
    upstream's updatable-fields list (and, while gated, the nodeSelector and node affinity rules) allow."""
    errs = validate_pod_spec(new.get("spec"), allow_privileged=allow_privileged, merged_spread_label_keys=merged_spread_label_keys)
    new_spec = new.get("spec")
    old_spec = old.get("spec")
    if not isinstance(new_spec, dict) or not isinstance(old_spec, dict):
        return errs
    errs = _without_inherited_scheduling_errors(errs, old_spec, merged_spread_label_keys)
    for key in ("containers", "initContainers"):
        new_list = new_spec.get(key) if isinstance(new_spec.get(key), list) else []
        old_list = old_spec.get(key) if isinstance(old_spec.get(key), list) else []
        assert isinstance(new_list, list) and isinstance(old_list, list)
        container_errs, stop = _container_update_errors(new_list, old_list, f"spec.{key}")
        errs += container_errs
        if stop:
            return errs
    new_deadline = new_spec.get("activeDeadlineSeconds")
    old_deadline = old_spec.get("activeDeadlineSeconds")
    if new_deadline is not None:
        if not is_int(new_deadline) or not 0 <= new_deadline <= INT32_MAX:
            errs.append(invalid("spec.activeDeadlineSeconds", new_deadline, f"must be between 0 and {INT32_MAX}, inclusive"))
            return errs
        if is_int(old_deadline) and old_deadline < new_deadline:
            errs.append(invalid("spec.activeDeadlineSeconds", new_deadline, "must be less than or equal to previous value"))
            return errs
    elif old_deadline is not None:
        errs.append(invalid("spec.activeDeadlineSeconds", None, "must not update from a positive integer to nil value"))
    new_tols = new_spec.get("tolerations") if isinstance(new_spec.get("tolerations"), list) else []
    old_tols = old_spec.get("tolerations") if isinstance(old_spec.get("tolerations"), list) else []
    assert isinstance(new_tols, list) and isinstance(old_tols, list)
    errs += _only_added_tolerations(new_tols, old_tols, "spec.tolerations")
    new_gates = new_spec.get("schedulingGates") if isinstance(new_spec.get("schedulingGates"), list) else []
    old_gates = old_spec.get("schedulingGates") if isinstance(old_spec.get("schedulingGates"), list) else []
    assert isinstance(new_gates, list) and isinstance(old_gates, list)
    errs += _only_deleted_scheduling_gates(new_gates, old_gates, "spec.schedulingGates")
    if _normalized(new_spec) == _normalized(old_spec):
        return errs
    # Put back what may change, then anything still different is forbidden.
    munged = copy.deepcopy(new_spec)
    for key in ("containers", "initContainers"):
        for index, container in enumerate(munged.get(key) or []):
            if isinstance(container, dict):
                old_image = old_spec[key][index].get("image") if isinstance(old_spec[key][index], dict) else None
                if old_image is None:
                    container.pop("image", None)
                else:
                    container["image"] = old_image
    for key in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        if key in old_spec:
            munged[key] = old_spec[key]
        else:
            munged.pop(key, None)
    old_grace = old_spec.get("terminationGracePeriodSeconds")
    if isinstance(old_grace, int) and old_grace < 0 and munged.get("terminationGracePeriodSeconds") == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    if old_gates:
        errs += _munge_gated_scheduling_directives(munged, old_spec)
    if _normalized(munged) != _normalized(old_spec):
        message = "pod updates may not change fields other than " + ",".join(UPDATABLE_POD_SPEC_FIELDS)
        errs.append(forbidden("spec", message + "\n" + _spec_diff(old_spec, munged)))
    return errs


# ---- pod status ---------------------------------------------------------------------------------


def validate_pod_resource_claim_statuses(statuses: object, spec: Obj, path: str) -> list[FieldError]:
    """status.resourceClaimStatuses: names of spec.resourceClaims, once each; claim names valid."""
    errs: list[FieldError] = []
    claim_names = pod_claim_names(spec)
    seen: set[str] = set()
    for _index, status, status_path in as_dict_entries(statuses, path, errs):
        name = as_str(status.get("name"), f"{status_path}.name", errs)
        if name not in claim_names:
            errs.append(invalid(f"{status_path}.name", name, "must match the name of an entry in `spec.resourceClaims`"))
        if name in seen:
            errs.append(duplicate(f"{status_path}.name", name))
        seen.add(name)
        claim_name = status.get("resourceClaimName")
        if claim_name is not None:
            text = as_str(claim_name, f"{status_path}.resourceClaimName", errs)
            if isinstance(claim_name, str):
                # Upstream reports a bad generated name at the entry's .name path.
                errs += [invalid(f"{status_path}.name", text, p) for p in dns1123_subdomain_problems(text)]
    return errs


def _validate_node_allocatable_name(name: str, path: str) -> list[FieldError]:
    if not name:
        return [required(path)]
    if not _NODE_ALLOCATABLE_RE.match(name):
        return [invalid(path, name, "must be a node allocatable resource name (cpu, memory, ephemeral-storage or hugepages-<size>)")]
    return []


def _nonnegative_quantity(value: object, path: str, errs: list[FieldError]) -> None:
    quantity = parse_quantity_field(value, path, errs)
    if quantity is not None and quantity.sign < 0:
        errs.append(invalid(path, quantity.canonical(), IS_NEGATIVE))


def validate_node_allocatable_claim_statuses(statuses: object, spec: Obj, path: str) -> list[FieldError]:
    """status.nodeAllocatableResourceClaimStatuses (KEP-5517). Upstream has only declarative tags
    for this list; the rules are the KEP's: a valid, unique claim name, container references to
    this pod's containers, node-allocatable resource names and non-negative quantities."""
    errs: list[FieldError] = []
    containers = {
        c.get("name")
        for key in ("containers", "initContainers")
        for c in (spec.get(key) if isinstance(spec.get(key), list) else [])  # type: ignore[union-attr]
        if isinstance(c, dict)
    }
    seen_claims: set[str] = set()
    for _index, status, status_path in as_dict_entries(statuses, path, errs):
        claim_name = as_str(status.get("resourceClaimName"), f"{status_path}.resourceClaimName", errs)
        if not claim_name:
            errs.append(required(f"{status_path}.resourceClaimName"))
        else:
            errs += validate_dns1123_subdomain(claim_name, f"{status_path}.resourceClaimName")
            if claim_name in seen_claims:
                errs.append(duplicate(f"{status_path}.resourceClaimName", claim_name))
            seen_claims.add(claim_name)
        seen_containers: set[str] = set()
        for c_index, container in enumerate(as_list(status.get("containers"), f"{status_path}.containers", errs)):
            c_path = f"{status_path}.containers[{c_index}]"
            if not isinstance(container, str) or container not in containers:
                errs.append(FieldError(NOT_FOUND, c_path, "", container, True))
            elif container in seen_containers:
                errs.append(duplicate(c_path, container))
            else:
                seen_containers.add(container)
        for key in ("mapping", "overhead"):
            seen_names: set[str] = set()
            for _m_index, entry, entry_path in as_dict_entries(status.get(key), f"{status_path}.{key}", errs):
                name = as_str(entry.get("name"), f"{entry_path}.name", errs)
                errs += _validate_node_allocatable_name(name, f"{entry_path}.name")
                if name and name in seen_names:
                    errs.append(duplicate(f"{entry_path}.name", name))
                seen_names.add(name)
                if key == "mapping":
                    if entry.get("quantity") is None:
                        errs.append(required(f"{entry_path}.quantity"))
                    else:
                        _nonnegative_quantity(entry["quantity"], f"{entry_path}.quantity", errs)
                    continue
                if entry.get("perPod") is None and entry.get("perContainer") is None:
                    errs.append(required(entry_path, "at least one of `perPod` or `perContainer` must be specified"))
                for q_key in ("perPod", "perContainer"):
                    if entry.get(q_key) is not None:
                        _nonnegative_quantity(entry[q_key], f"{entry_path}.{q_key}", errs)
    return errs


def validate_pod_status_update(new: Obj, old: Obj) -> list[FieldError]:
    """ValidatePodStatusUpdate minus ObjectMeta and container state transitions."""
    errs: list[FieldError] = []
    new_spec = new.get("spec") if isinstance(new.get("spec"), dict) else {}
    old_spec = old.get("spec") if isinstance(old.get("spec"), dict) else {}
    assert isinstance(new_spec, dict) and isinstance(old_spec, dict)
    status = as_dict(new.get("status"), "status", errs)
    old_status = old.get("status") if isinstance(old.get("status"), dict) else {}
    assert isinstance(old_status, dict)
    for index, condition, condition_path in as_dict_entries(status.get("conditions"), "status.conditions", errs):
        generation = condition.get("observedGeneration")
        if generation is not None and (not is_int(generation) or generation < 0):
            errs.append(invalid(f"{condition_path}.observedGeneration", generation, "must be a non-negative integer"))
        condition_type = as_str(condition.get("type"), f"{condition_path}.type", errs)
        if condition_type not in SYSTEM_POD_CONDITIONS:
            # Upstream names this path with a capital "Type".
            errs += validate_qualified_name(condition_type, f"status.conditions[{index}].Type")
    if new_spec.get("nodeName") != old_spec.get("nodeName"):
        errs.append(forbidden("status.nodeName", "may not be changed directly"))
    nominated = as_str(status.get("nominatedNodeName"), "status.nominatedNodeName", errs)
    if nominated and nominated != old_status.get("nominatedNodeName"):
        errs += validate_dns1123_subdomain(nominated, "status.nominatedNodeName")
    generation = status.get("observedGeneration")
    if generation is not None and (not is_int(generation) or generation < 0):
        errs.append(invalid("status.observedGeneration", generation, "must be a non-negative integer"))
    errs += validate_immutable(status.get("qosClass") or None, old_status.get("qosClass") or None, "status.qosClass")
    errs += validate_pod_resource_claim_statuses(status.get("resourceClaimStatuses"), new_spec, "status.resourceClaimStatuses")
    errs += validate_node_allocatable_claim_statuses(
        status.get("nodeAllocatableResourceClaimStatuses"), new_spec, "status.nodeAllocatableResourceClaimStatuses"
    )
    return errs


# ---- pod drop rules -----------------------------------------------------------------------------


def _all_containers(spec: Obj) -> Iterator[Obj]:
    for key in ("containers", "initContainers", "ephemeralContainers"):
        containers = spec.get(key)
        if isinstance(containers, list):
            yield from (c for c in containers if isinstance(c, dict))
