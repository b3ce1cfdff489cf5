"""RBAC policy rules: whether a rule allows a request, whether rules cover other rules (what
escalation prevention asks), and how upstream prints a rule in its messages."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from app.auth.attributes import Attributes

ALL = "*"


@dataclass(frozen=True, slots=True)
class Rule:
    """One rbac.authorization.k8s.io/v1 PolicyRule."""

    verbs: tuple[str, ...] = ()
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    @classmethod
    def from_api(cls, rule: Any) -> Rule:
        """A rule from its API form (malformed parts read as empty: validation refuses them on write)."""
        if not isinstance(rule, dict):
            return cls()

        def strings(key: str) -> tuple[str, ...]:
            value = rule.get(key)
            return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()

        return cls(strings("verbs"), strings("apiGroups"), strings("resources"), strings("resourceNames"), strings("nonResourceURLs"))

    def to_api(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {"verbs": list(self.verbs)}
        if self.api_groups:
            out["apiGroups"] = list(self.api_groups)
        if self.resources:
            out["resources"] = list(self.resources)
        if self.resource_names:
            out["resourceNames"] = list(self.resource_names)
        if self.non_resource_urls:
            out["nonResourceURLs"] = list(self.non_resource_urls)
        return out

    def allows(self, attrs: Attributes) -> bool:
        if ALL not in self.verbs and attrs.verb not in self.verbs:
            return False
        if not attrs.resource_request:
            return any(url == attrs.path or (url.endswith(ALL) and attrs.path.startswith(url[:-1])) for url in self.non_resource_urls)
        if ALL not in self.api_groups and attrs.api_group not in self.api_groups:
            return False
        if not self._resource_matches(attrs.resource, attrs.subresource):
            return False
        return not self.resource_names or attrs.name in self.resource_names

    def _resource_matches(self, resource: str, subresource: str) -> bool:
        combined = f"{resource}/{subresource}" if subresource else resource
        for candidate in self.resources:
            if candidate in (ALL, combined):
                return True
            # "*/status" grants the status subresource of every resource.
            if subresource and candidate == f"*/{subresource}":
                return True
        return False


def _go_strings(values: Iterable[str]) -> str:
    """A string list as Go's %q prints it: ``["a" "b"]``."""
    return "[" + " ".join(json.dumps(v, ensure_ascii=False) for v in values) + "]"


def compact_string(rule: Rule) -> str:
    """How upstream names a rule in escalation errors: ``{APIGroups:["g"], Resources:["r"], Verbs:["get"]}``."""
    parts = []
    for label, values in (
        ("APIGroups", rule.api_groups),
        ("Resources", rule.resources),
        ("NonResourceURLs", rule.non_resource_urls),
        ("ResourceNames", rule.resource_names),
        ("Verbs", rule.verbs),
    ):
        if values:
            parts.append(f"{label}:{_go_strings(values)}")
    return "{" + ", ".join(parts) + "}"


def breakdown(rule: Rule) -> list[Rule]:
    """A rule as single-verb, single-resource (and single-name) rules."""
    out: list[Rule] = []
    for group in rule.api_groups:
        for resource in rule.resources:
            for verb in rule.verbs:
                if rule.resource_names:
                    out.extend(Rule((verb,), (group,), (resource,), (name,)) for name in rule.resource_names)
                else:
                    out.append(Rule((verb,), (group,), (resource,)))
    for url in rule.non_resource_urls:
        out.extend(Rule((verb,), non_resource_urls=(url,)) for verb in rule.verbs)
    return out


def _has_all(owned: Sequence[str], wanted: Sequence[str]) -> bool:
    return all(w in owned for w in wanted)


def _resources_cover(owned: Sequence[str], wanted: Sequence[str]) -> bool:
    if ALL in owned:
        return True
    for resource in wanted:
        if resource in owned:
            continue
        if "/" not in resource:
            return False
        if f"*/{resource.split('/', 1)[1]}" not in owned:
            return False
    return True


def _urls_cover(owned: Sequence[str], wanted: Sequence[str]) -> bool:
    return all(any(o == w or (o.endswith(ALL) and w.startswith(o.rstrip(ALL))) for o in owned) for w in wanted)


def _rule_covers(owner: Rule, sub: Rule) -> bool:
    if not (ALL in owner.verbs or _has_all(owner.verbs, sub.verbs)):
        return False
    if not (ALL in owner.api_groups or _has_all(owner.api_groups, sub.api_groups)):
        return False
    if not _resources_cover(owner.resources, sub.resources) or not _urls_cover(owner.non_resource_urls, sub.non_resource_urls):
        return False
    if not sub.resource_names:
        return not owner.resource_names
    return not owner.resource_names or _has_all(owner.resource_names, sub.resource_names)


def covers(owner_rules: Sequence[Rule], wanted_rules: Iterable[Rule]) -> list[Rule]:
    """The parts of ``wanted_rules`` that ``owner_rules`` do not grant (empty: fully covered)."""
    return [sub for rule in wanted_rules for sub in breakdown(rule) if not any(_rule_covers(owner, sub) for owner in owner_rules)]


def compact(rules: Sequence[Rule]) -> list[Rule]:
    """Rules on one group and one resource (and at most one name) that differ only by verb, merged."""
    merged: dict[tuple[str, str, str], Rule] = {}
    out: list[Rule] = []
    for rule in rules:
        simple = len(rule.api_groups) == 1 and len(rule.resources) == 1 and len(rule.resource_names) <= 1 and not rule.non_resource_urls
        if not simple:
            out.append(rule)
            continue
        key = (rule.api_groups[0], rule.resources[0], rule.resource_names[0] if rule.resource_names else "")
        known = merged.get(key)
        merged[key] = rule if known is None else Rule(known.verbs + rule.verbs, known.api_groups, known.resources, known.resource_names)
    return out + list(merged.values())
