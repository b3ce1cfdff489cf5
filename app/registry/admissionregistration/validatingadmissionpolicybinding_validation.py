"""ValidatingAdmissionPolicyBinding: defaults and validation, and who may name a paramRef.

The policy a binding names and the object its paramRef names are looked up when a request is
admitted, not here: a binding may come before its policy, as upstream allows."""

from __future__ import annotations

from typing import Any

from app.registry.accessors import Errs
from app.registry.admissionregistration.common import (
    GROUP,
    POLICIES,
    default_match_resources,
    go_param_kind,
    go_user,
    split_api_version,
    validate_match_resources,
)
from app.registry.base import Obj
from app.registry.common import validate_label_selector
from app.registry.objectmeta import dns1123_subdomain_problems, path_segment_problems
from kube.errors import duplicate, forbidden, invalid, not_supported, required

SUPPORTED_ACTIONS = ("Audit", "Deny", "Warn")
PARAMETER_NOT_FOUND_ACTIONS = ("Deny", "Allow")


def default_binding(obj: Obj) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        default_match_resources(spec.get("matchResources"))


def validate_binding(obj: Obj) -> Errs:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = {}
    errs: Errs = []
    policy = str(spec.get("policyName") or "")
    if not policy:
        errs.append(required("spec.policyName"))
    else:
        errs += [invalid("spec.policyName", policy, problem) for problem in dns1123_subdomain_problems(policy)]
    errs += _validate_param_ref(spec.get("paramRef"))
    errs += validate_match_resources(spec.get("matchResources"), "spec.matchResources")
    errs += _validate_actions(spec.get("validationActions"))
    return errs


def _validate_param_ref(ref: Any) -> Errs:
    errs: Errs = []
    if not isinstance(ref, dict):
        return errs
    name = str(ref.get("name") or "")
    selector = ref.get("selector")
    if name:
        errs += [invalid("spec.paramRef.name", name, problem) for problem in path_segment_problems(name)]
        if selector is not None:
            errs.append(forbidden("spec.paramRef.name", "name and selector are mutually exclusive"))
    if selector is not None:
        errs += validate_label_selector(selector, "spec.paramRef.selector")
        if name:
            errs.append(forbidden("spec.paramRef.selector", "name and selector are mutually exclusive"))
    if not name and selector is None:
        errs.append(required("spec.paramRef", "one of name or selector must be specified"))
    action = ref.get("parameterNotFoundAction")
    if not action:
        errs.append(required("spec.paramRef.parameterNotFoundAction"))
    elif action not in PARAMETER_NOT_FOUND_ACTIONS:
        errs.append(not_supported("spec.paramRef.parameterNotFoundAction", action, PARAMETER_NOT_FOUND_ACTIONS))
    return errs


def _validate_actions(actions: Any) -> Errs:
    errs: Errs = []
    actions = actions if isinstance(actions, list) else []
    seen: set[str] = set()
    for index, action in enumerate(actions):
        if action not in SUPPORTED_ACTIONS:
            errs.append(not_supported(f"spec.validationActions[{index}]", action, SUPPORTED_ACTIONS))
        if action in seen:
            errs.append(duplicate(f"spec.validationActions[{index}]", action))
        seen.add(action)
    if "Deny" in seen and "Warn" in seen:
        detail = "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"
        errs.append(invalid("spec.validationActions", actions, detail))
    if not seen:
        errs.append(required("spec.validationActions", "at least one validation action is required"))
    return errs


def param_ref_refusal(binding: Obj, requester: Any, lookup: Any, resolve: Any) -> str | None:
    """Why the requester may not name the binding's paramRef: they must be able to get it (list
    what a selector selects), as upstream's authorizeCreate demands; system:masters always may."""
    spec = binding.get("spec") or {}
    ref = spec.get("paramRef")
    if requester is None or requester.privileged or not isinstance(ref, dict):
        return None
    policy_name = str(spec.get("policyName") or "")
    policy = lookup(GROUP, POLICIES, "", policy_name) if lookup is not None else None
    group = resource = "*"
    parse_failed = resolve_failed = False
    param_kind = ((policy or {}).get("spec") or {}).get("paramKind")
    if policy is not None and isinstance(param_kind, dict):
        api_version, kind = str(param_kind.get("apiVersion") or ""), str(param_kind.get("kind") or "")
        parsed = split_api_version(api_version)
        if parsed is None:
            parse_failed = True
        else:
            group = parsed[0]
            resolved = resolve(api_version, kind)
            resolve_failed = resolved is None
            resource = resolved or "*"
    name = str(ref.get("name") or "")
    verb = "get" if name else "list"
    if requester.authorize(verb, group, resource, namespace=str(ref.get("namespace") or ""), name=name) is None:
        return None
    user = go_user(requester.user)
    everything = f'user {user} does not have "{verb}" permission for all groups, versions and resources'
    if policy is None:
        return f"unable to get policy {policy_name} to determine minimum required permissions and {everything}"
    if parse_failed:
        return f"unable to parse paramKind {go_param_kind(param_kind)} to determine minimum required permissions and {everything}"
    if resolve_failed:
        return f"unable to resolve paramKind {go_param_kind(param_kind)} to determine minimum required permissions and {everything}"
    return f'user {user} does not have "{verb}" permission on the object referenced by paramRef'
