"""Which requests an admission policy or binding is about (k8s.io/apiserver's policy/matching and
the webhook predicates it shares): namespace and object selectors, resource rules and the rules
excluded, and with ``matchPolicy: Equivalent`` the same objects reached by another version or group.

A rule matches a request by scope, operation, group, version and resource/subresource; a rule
naming resourceNames matches only requests naming one of them (a create by generateName names
none, as upstream). Selector errors count only for requests the rules match.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube.errors import ApiError, internal_error
from kube.labels import LabelSelector, selector_from_label_selector_object


@dataclass(frozen=True, slots=True)
class GroupVersionResource:
    group: str
    version: str
    resource: str


@dataclass(frozen=True, slots=True)
class GroupVersionKind:
    group: str
    version: str
    kind: str

    def __str__(self) -> str:
        """As Go prints a schema.GroupVersionKind: ``apps/v1, Kind=Deployment``."""
        return f"{self.group}/{self.version}, Kind={self.kind}"


@dataclass(frozen=True, slots=True)
class Target:
    """What matching reads of a request (upstream's admission.Attributes). ``namespace`` is a
    namespace's own name for requests about that namespace, as upstream's request info has it."""

    operation: str
    resource: GroupVersionResource
    subresource: str
    kind: GroupVersionKind
    namespace: str
    name: str
    obj: Mapping[str, Any] | None
    old: Mapping[str, Any] | None

    @property
    def is_namespace(self) -> bool:
        return self.resource.group == "" and self.resource.resource == "namespaces"


# (resource, subresource) -> the same objects under every version and group serving them, each
# with its kind (upstream's EquivalentResourceMapper).
Equivalents = Callable[[GroupVersionResource, str], Sequence[tuple[GroupVersionResource, GroupVersionKind]]]
# namespace name -> its labels; raises ApiError (404) when there is no such namespace.
NamespaceLabels = Callable[[str], Mapping[str, str]]

_EVERYTHING = "*"


def _exact_or_wildcard(items: Any, wanted: str) -> bool:
    return isinstance(items, list) and any(item in (_EVERYTHING, wanted) for item in items)


def rule_matches(rule: Mapping[str, Any], target: Target, resource: GroupVersionResource | None = None) -> bool:
    """One rule (scope, operations, apiGroups, apiVersions, resources) against the request, or
    against ``resource`` standing in for the request's resource."""
    gvr = resource or target.resource
    scope = rule.get("scope")
    if scope == "Namespaced":
        if (gvr.group == "" and gvr.version == "v1" and gvr.resource == "namespaces") or not target.namespace:
            return False
    elif scope == "Cluster":
        if not ((gvr.group == "" and gvr.version == "v1" and gvr.resource == "namespaces") or not target.namespace):
            return False
    elif scope not in (None, _EVERYTHING):
        return False
    operations = rule.get("operations")
    if not (isinstance(operations, list) and (_EVERYTHING in operations or target.operation in operations)):
        return False
    if not _exact_or_wildcard(rule.get("apiGroups"), gvr.group) or not _exact_or_wildcard(rule.get("apiVersions"), gvr.version):
        return False
    for entry in rule.get("resources") or ():
        name, _, subresource = str(entry).partition("/")
        if (name == _EVERYTHING or name == gvr.resource) and (subresource == _EVERYTHING or subresource == target.subresource):
            return True
    return False


def _named(rule: Mapping[str, Any], target: Target) -> bool:
    names = rule.get("resourceNames")
    return not names or target.name in names


def _rules_match(
    rules: list[dict[str, Any]], match_policy: Any, target: Target, equivalents: Equivalents
) -> tuple[GroupVersionResource, GroupVersionKind] | None:
    """The resource and kind a rule list matches the request as, or None."""
    for rule in rules:
        if rule_matches(rule, target) and _named(rule, target):
            return target.resource, target.kind
    if match_policy != "Equivalent":
        return None
    others = [(gvr, gvk) for gvr, gvk in equivalents(target.resource, target.subresource) if gvr != target.resource]
    for rule in rules:
        for gvr, gvk in others:
            if rule_matches(rule, target, gvr) and _named(rule, target):
                return gvr, gvk
    return None


class MatchResources:
    """A policy's matchConstraints or a binding's matchResources, its selectors parsed once (a
    selector that does not parse is an internal error of each request the rules match, as upstream's)."""

    __slots__ = ("exclude", "match_policy", "namespace_selector", "object_selector", "rules")

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.match_policy = raw.get("matchPolicy")
        self.rules = [r for r in raw.get("resourceRules") or () if isinstance(r, dict)]
        self.exclude = [r for r in raw.get("excludeResourceRules") or () if isinstance(r, dict)]
        self.namespace_selector = _selector(raw.get("namespaceSelector"))
        self.object_selector = _selector(raw.get("objectSelector"))


def _selector(raw: Any) -> LabelSelector | ApiError:
    try:
        return selector_from_label_selector_object(raw if isinstance(raw, dict) else {})
    except ApiError as exc:
        return internal_error(exc.message)


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, str] | None:
    if obj is None:
        return None
    return (obj.get("metadata") or {}).get("labels") or {}


def matches(
    constraints: MatchResources, target: Target, namespace_labels: NamespaceLabels, equivalents: Equivalents
) -> tuple[GroupVersionResource, GroupVersionKind] | None:
    """Whether ``constraints`` select the request: the resource and kind it is matched as, or None.
    Raises ApiError when the request matches the rules but a selector could not be judged (a
    namespace that does not exist: 404; a selector that does not parse: 500)."""
    namespace_error: ApiError | None = None
    namespace_ok = True
    if target.namespace or target.is_namespace:
        selector = constraints.namespace_selector
        if isinstance(selector, ApiError):
            namespace_error, namespace_ok = selector, False
        elif not selector.empty:
            try:
                if target.is_namespace and not target.subresource and target.operation in ("CREATE", "UPDATE"):
                    labels = _labels(target.obj) or {}
                else:
                    labels = namespace_labels(target.namespace)
                namespace_ok = selector.matches(labels)
            except ApiError as exc:
                namespace_error, namespace_ok = exc, False
    if not namespace_ok and namespace_error is None:
        return None
    object_error: ApiError | None = None
    object_ok = True
    selector = constraints.object_selector
    if isinstance(selector, ApiError):
        object_error, object_ok = selector, False
    elif not selector.empty:
        object_ok = any(labels is not None and selector.matches(labels) for labels in (_labels(target.obj), _labels(target.old)))
    if not object_ok and object_error is None:
        return None
    if constraints.exclude and _rules_match(constraints.exclude, constraints.match_policy, target, equivalents) is not None:
        return None
    rules = constraints.rules
    matched = (target.resource, target.kind) if not rules else _rules_match(rules, constraints.match_policy, target, equivalents)
    if matched is None:
        return None
    if namespace_error is not None:
        raise namespace_error
    if object_error is not None:
        raise object_error
    return matched


def rule_resources(constraints: Mapping[str, Any]) -> frozenset[str] | None:
    """The resource names (plurals) a MatchResources' rules can select, or None when they can
    select any (no rules, or a wildcard): requests for other resources need no look at the policy.
    Equivalent resources share their plural in every version and group this server serves."""
    rules = constraints.get("resourceRules")
    if not rules:
        return None
    names: set[str] = set()
    for rule in rules:
        for entry in (rule.get("resources") if isinstance(rule, dict) else None) or ():
            name = str(entry).partition("/")[0]
            if name == _EVERYTHING:
                return None
            names.add(name)
    return frozenset(names)
