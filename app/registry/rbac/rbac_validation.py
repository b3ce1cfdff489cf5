"""Validation shared by the four RBAC kinds (upstream's pkg/apis/rbac/validation)."""

from __future__ import annotations

from typing import Any

from app.registry.objectmeta import dns1123_subdomain_problems, path_segment_problems
from kube.errors import FieldError, invalid, not_supported, required

GROUP = "rbac.authorization.k8s.io"


def validate_rules(rules: Any, namespaced: bool, path: str = "rules") -> list[FieldError]:
    errs: list[FieldError] = []
    if rules is None:
        return errs
    if not isinstance(rules, list):
        return [invalid(path, rules, "must be a list")]
    for i, rule in enumerate(rules):
        here = f"{path}[{i}]"
        if not isinstance(rule, dict):
            errs.append(invalid(here, rule, "must be an object"))
            continue
        if not rule.get("verbs"):
            errs.append(required(f"{here}.verbs", "verbs must contain at least one value"))
        urls = rule.get("nonResourceURLs") or []
        if urls:
            if namespaced:
                errs.append(invalid(f"{here}.nonResourceURLs", urls, "namespaced rules cannot apply to non-resource URLs"))
            if rule.get("apiGroups") or rule.get("resources"):
                errs.append(invalid(f"{here}.nonResourceURLs", urls, "rules cannot apply to both regular resources and non-resource URLs"))
            continue
        if not rule.get("apiGroups"):
            errs.append(required(f"{here}.apiGroups", "resource rules must supply at least one api group"))
        if not rule.get("resources"):
            errs.append(required(f"{here}.resources", "resource rules must supply at least one resource"))
    return errs


def validate_role_ref(ref: Any, kinds: tuple[str, ...]) -> list[FieldError]:
    if not isinstance(ref, dict):
        return [required("roleRef", "")]
    errs: list[FieldError] = []
    if ref.get("apiGroup") != GROUP:
        errs.append(not_supported("roleRef.apiGroup", ref.get("apiGroup") or "", [GROUP]))
    if ref.get("kind") not in kinds:
        errs.append(not_supported("roleRef.kind", ref.get("kind") or "", list(kinds)))
    name = ref.get("name")
    if not name:
        errs.append(required("roleRef.name", ""))
    else:
        errs.extend(invalid("roleRef.name", name, p) for p in path_segment_problems(str(name)))
    return errs


def validate_subjects(subjects: Any, cluster: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    if subjects is None:
        return errs
    if not isinstance(subjects, list):
        return [invalid("subjects", subjects, "must be a list")]
    for i, subject in enumerate(subjects):
        path = f"subjects[{i}]"
        if not isinstance(subject, dict):
            errs.append(invalid(path, subject, "must be an object"))
            continue
        name = subject.get("name") or ""
        kind = subject.get("kind") or ""
        if not name:
            errs.append(required(f"{path}.name", ""))
        if kind == "ServiceAccount":
            if name:
                errs.extend(invalid(f"{path}.name", name, p) for p in dns1123_subdomain_problems(str(name)))
            if subject.get("apiGroup"):
                errs.append(not_supported(f"{path}.apiGroup", subject.get("apiGroup"), [""]))
            if cluster and not subject.get("namespace"):
                errs.append(required(f"{path}.namespace", ""))
        elif kind in ("User", "Group"):
            if subject.get("apiGroup") != GROUP:
                errs.append(not_supported(f"{path}.apiGroup", subject.get("apiGroup") or "", [GROUP]))
        else:
            errs.append(not_supported(f"{path}.kind", kind, ["ServiceAccount", "User", "Group"]))
    return errs


def validate_role_ref_update(new: Any, old: Any) -> list[FieldError]:
    if new.get("roleRef") != old.get("roleRef"):
        return [invalid("roleRef", new.get("roleRef"), "cannot change roleRef")]
    return []
