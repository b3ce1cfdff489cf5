"""Which requests a policy's matchConstraints (or a binding's matchResources) select, as upstream's
policy/matching and the webhook predicates decide it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from app.auth.policymatching import GroupVersionKind, GroupVersionResource, MatchResources, Target, matches, rule_matches, rule_resources
from kube.errors import ApiError, not_found

SLICES_V1 = GroupVersionResource("resource.k8s.io", "v1", "resourceslices")
SLICES_V1BETA2 = GroupVersionResource("resource.k8s.io", "v1beta2", "resourceslices")
SLICE_V1 = GroupVersionKind("resource.k8s.io", "v1", "ResourceSlice")
SLICE_V1BETA2 = GroupVersionKind("resource.k8s.io", "v1beta2", "ResourceSlice")
PODS = GroupVersionResource("", "v1", "pods")
NAMESPACES = GroupVersionResource("", "v1", "namespaces")
NAMESPACE_LABELS = {"team-a": {"team": "a"}, "team-b": {"team": "b"}}


def target(
    resource: GroupVersionResource = PODS,
    kind: str = "Pod",
    operation: str = "CREATE",
    namespace: str = "team-a",
    name: str = "x",
    subresource: str = "",
    obj: Mapping[str, Any] | None = None,
    old: Mapping[str, Any] | None = None,
) -> Target:
    return Target(operation, resource, subresource, GroupVersionKind(resource.group, resource.version, kind), namespace, name, obj, old)


def rule(resources: Sequence[str] = ("pods",), groups: Sequence[str] = ("",), versions: Sequence[str] = ("v1",), operations: Sequence[str] = ("*",), **more: Any) -> dict[str, Any]:
    return {"apiGroups": list(groups), "apiVersions": list(versions), "operations": list(operations), "resources": list(resources), **more}


def labels_of(name: str) -> Mapping[str, str]:
    if name not in NAMESPACE_LABELS:
        raise not_found("namespaces", name, "", "namespaces")
    return NAMESPACE_LABELS[name]


def equivalents(resource: GroupVersionResource, subresource: str) -> list[tuple[GroupVersionResource, GroupVersionKind]]:
    if resource.resource == "resourceslices":
        return [(SLICES_V1, SLICE_V1), (SLICES_V1BETA2, SLICE_V1BETA2)]
    return [(resource, GroupVersionKind(resource.group, resource.version, "Pod"))]


def match(constraints: dict[str, Any], request: Target) -> tuple[GroupVersionResource, GroupVersionKind] | None:
    return matches(MatchResources({"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {}, **constraints}), request, labels_of, equivalents)


@pytest.mark.parametrize(
    ("scope", "namespace", "resource", "expected"),
    [
        ("*", "", PODS, True),
        ("Namespaced", "team-a", PODS, True),
        ("Namespaced", "", PODS, False),
        ("Namespaced", "team-a", NAMESPACES, False),  # a namespace's own requests carry its name
        ("Cluster", "", PODS, True),
        ("Cluster", "team-a", NAMESPACES, True),
        ("Cluster", "team-a", PODS, False),
    ],
)
def test_scope(scope: str, namespace: str, resource: GroupVersionResource, expected: bool) -> None:
    assert rule_matches(rule(resources=["*"], scope=scope), target(resource, namespace=namespace)) is expected


@pytest.mark.parametrize(
    ("resources", "subresource", "expected"),
    [
        (["pods"], "", True),
        (["pods"], "status", False),
        (["pods/status"], "status", True),
        (["pods/*"], "binding", True),
        (["pods/*"], "", True),  # the resource itself too, as upstream's rule matcher has it
        (["*/status"], "status", True),
        (["*"], "status", False),
        (["*/*"], "status", True),
        (["*/*"], "", True),
    ],
)
def test_resources_and_subresources(resources: list[str], subresource: str, expected: bool) -> None:
    assert rule_matches(rule(resources=resources), target(subresource=subresource)) is expected


def test_operations_groups_and_versions() -> None:
    assert rule_matches(rule(operations=["CREATE"]), target(operation="CREATE"))
    assert not rule_matches(rule(operations=["CREATE"]), target(operation="DELETE"))
    assert not rule_matches(rule(groups=["apps"]), target())
    assert rule_matches(rule(groups=["*"], versions=["*"]), target())
    assert not rule_matches(rule(versions=["v2"]), target())


def test_resource_names_match_only_named_requests() -> None:
    named = {"resourceRules": [rule(resourceNames=["x"])]}
    assert match(named, target(name="x")) == (PODS, GroupVersionKind("", "v1", "Pod"))
    assert match(named, target(name="y")) is None
    assert match(named, target(name="")) is None  # a create by generateName names nothing yet


def test_excluded_rules_win() -> None:
    constraints = {"resourceRules": [rule(resources=["*"])], "excludeResourceRules": [rule(operations=["DELETE"])]}
    assert match(constraints, target(operation="CREATE")) is not None
    assert match(constraints, target(operation="DELETE")) is None


def test_equivalent_versions_are_matched_as_the_rules_version_unless_exact() -> None:
    constraints = {"resourceRules": [rule(resources=["resourceslices"], groups=["resource.k8s.io"], versions=["v1"])]}
    request = target(SLICES_V1BETA2, "ResourceSlice", namespace="")
    assert match(constraints, request) == (SLICES_V1, SLICE_V1)
    assert match({**constraints, "matchPolicy": "Exact"}, request) is None
    assert match(constraints, target(SLICES_V1, "ResourceSlice", namespace="")) == (SLICES_V1, SLICE_V1)


def test_namespace_selector() -> None:
    constraints = {"resourceRules": [rule(resources=["*"], groups=["*"], versions=["*"])], "namespaceSelector": {"matchLabels": {"team": "a"}}}
    assert match(constraints, target(namespace="team-a")) is not None
    assert match(constraints, target(namespace="team-b")) is None
    # Cluster-scoped requests are never exempted by a namespace selector.
    assert match(constraints, target(SLICES_V1, "ResourceSlice", namespace="")) is not None
    # A namespace is judged by its own labels: on create and update those of the object.
    created = target(NAMESPACES, "Namespace", namespace="", name="new", obj={"metadata": {"labels": {"team": "a"}}})
    assert match(constraints, created) is not None
    assert match(constraints, target(NAMESPACES, "Namespace", operation="DELETE", namespace="team-b", name="team-b")) is None


def test_a_missing_namespace_is_an_error_only_where_the_rules_match() -> None:
    selected = {"namespaceSelector": {"matchLabels": {"team": "a"}}}
    with pytest.raises(ApiError) as refused:
        match({**selected, "resourceRules": [rule()]}, target(namespace="gone"))
    assert (refused.value.code, refused.value.message) == (404, 'namespaces "gone" not found')
    assert match({**selected, "resourceRules": [rule(groups=["apps"])]}, target(namespace="gone")) is None


def test_object_selector_matches_the_new_or_the_old_object() -> None:
    constraints = {"resourceRules": [rule()], "objectSelector": {"matchExpressions": [{"key": "guarded", "operator": "Exists"}]}}
    guarded = {"metadata": {"labels": {"guarded": ""}}}
    assert match(constraints, target(obj=guarded)) is not None
    assert match(constraints, target(operation="DELETE", old=guarded)) is not None
    assert match(constraints, target(operation="UPDATE", obj={"metadata": {}}, old=guarded)) is not None
    assert match(constraints, target(obj={"metadata": {"labels": {"other": ""}}})) is None


def test_no_rules_match_every_request() -> None:
    assert match({}, target()) == (PODS, GroupVersionKind("", "v1", "Pod"))


def test_rule_resources_index_policies_by_the_resources_they_name() -> None:
    assert rule_resources({"resourceRules": [rule(resources=["pods", "pods/status"]), rule(resources=["configmaps"])]}) == frozenset({"pods", "configmaps"})
    assert rule_resources({"resourceRules": [rule(resources=["*/status"])]}) is None
    assert rule_resources({}) is None
