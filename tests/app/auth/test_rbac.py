"""RBAC: rule matching, bindings by subject, allow reasons, and what escalation checks call covered."""

from __future__ import annotations

from app.auth.attributes import Attributes, request_attributes
from app.auth.authorizers import AlwaysDeny, Decision, PrivilegedGroups, UnionAuthorizer, forbidden
from app.auth.node import NodeAuthorizer, NodeGraph
from app.auth.rbac import CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, ROLE_BINDINGS, ROLES, RBACAuthorizer, RBACIndex
from app.auth.rules import Rule, compact, compact_string, covers
from app.auth.user import UserInfo

ALICE = UserInfo("alice", groups=("dev", "system:authenticated"))


def index_with(*objects: tuple[str, dict]) -> RBACIndex:
    index = RBACIndex()
    for resource, obj in objects:
        index.apply(resource, False, obj)
    return index


def role(name: str, rules: list[dict], namespace: str = "") -> tuple[str, dict]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return (ROLES if namespace else CLUSTER_ROLES), {"metadata": meta, "rules": rules}


def binding(name: str, kind: str, role_name: str, subjects: list[dict], namespace: str = "") -> tuple[str, dict]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return (ROLE_BINDINGS if namespace else CLUSTER_ROLE_BINDINGS), {"metadata": meta, "roleRef": {"kind": kind, "name": role_name}, "subjects": subjects}


def attrs(user: UserInfo, method: str, path: str, query: str = "") -> Attributes:
    return request_attributes(user, method, path, query)


def test_request_attributes_follow_upstream_verbs() -> None:
    assert attrs(ALICE, "GET", "/api/v1/namespaces/ns/pods").verb == "list"
    assert attrs(ALICE, "GET", "/api/v1/namespaces/ns/pods", "watch=true").verb == "watch"
    assert attrs(ALICE, "GET", "/api/v1/namespaces/ns/pods", "watch=0").verb == "list"
    assert attrs(ALICE, "DELETE", "/apis/resource.k8s.io/v1/resourceslices").verb == "deletecollection"
    status = attrs(ALICE, "PUT", "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status")
    assert (status.verb, status.api_group, status.resource, status.subresource, status.namespace, status.name) == (
        "update", "resource.k8s.io", "resourceclaims", "status", "ns", "c",
    )  # fmt: skip
    named = attrs(ALICE, "GET", "/api/v1/nodes", "fieldSelector=metadata.name%3Dn1")
    assert (named.verb, named.name) == ("list", "n1")
    assert attrs(ALICE, "GET", "/healthz").resource_request is False
    assert attrs(ALICE, "PUT", "/api/v1/namespaces/ns/finalize").resource == "namespaces"
    escaped = attrs(ALICE, "GET", "/api/v1/namespaces/team%2Da/pods/p%2D1")
    assert (escaped.namespace, escaped.name) == ("team-a", "p-1")


def test_rbac_allows_through_the_bindings_of_the_users_groups_only() -> None:
    index = index_with(
        role("reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]),
        binding("dev-read", "ClusterRole", "reader", [{"kind": "Group", "name": "dev"}], namespace="team"),
    )
    rbac = RBACAuthorizer(index)
    decision, reason = rbac.authorize(attrs(ALICE, "GET", "/api/v1/namespaces/team/pods"))
    assert decision is Decision.ALLOW
    assert reason == 'RBAC: allowed by RoleBinding "dev-read/team" of ClusterRole "reader" to Group "dev"'
    assert rbac.authorize(attrs(ALICE, "GET", "/api/v1/namespaces/other/pods"))[0] is Decision.NO_OPINION
    assert rbac.authorize(attrs(ALICE, "DELETE", "/api/v1/namespaces/team/pods/p"))[0] is Decision.NO_OPINION
    bob = UserInfo("bob", groups=("system:authenticated",))
    assert rbac.authorize(attrs(bob, "GET", "/api/v1/namespaces/team/pods"))[0] is Decision.NO_OPINION


def test_a_deleted_binding_stops_granting_and_a_missing_role_is_the_reason() -> None:
    index = index_with(binding("b", "ClusterRole", "gone", [{"kind": "User", "name": "alice"}]))
    rbac = RBACAuthorizer(index)
    assert rbac.authorize(attrs(ALICE, "GET", "/api/v1/pods")) == (
        Decision.NO_OPINION, 'RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found',
    )  # fmt: skip
    resource, obj = role("gone", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}])
    index.apply(resource, False, obj)
    assert rbac.authorize(attrs(ALICE, "GET", "/api/v1/pods"))[0] is Decision.ALLOW
    index.apply(CLUSTER_ROLE_BINDINGS, True, binding("b", "ClusterRole", "gone", [])[1])
    assert rbac.authorize(attrs(ALICE, "GET", "/api/v1/pods"))[0] is Decision.NO_OPINION


def test_service_account_subjects_default_to_the_bindings_namespace() -> None:
    index = index_with(
        role("r", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}], namespace="ns"),
        binding("b", "Role", "r", [{"kind": "ServiceAccount", "name": "sa"}], namespace="ns"),
    )
    sa = UserInfo("system:serviceaccount:ns:sa", groups=("system:serviceaccounts", "system:serviceaccounts:ns"))
    decision, reason = RBACAuthorizer(index).authorize(attrs(sa, "GET", "/api/v1/namespaces/ns/pods/p"))
    assert decision is Decision.ALLOW
    assert reason.endswith('to ServiceAccount "sa/ns"')


def test_rule_matching_of_subresources_names_and_urls() -> None:
    status_rule = Rule(("update",), ("resource.k8s.io",), ("*/status",))
    assert status_rule.allows(attrs(ALICE, "PUT", "/apis/resource.k8s.io/v1/namespaces/n/resourceclaims/c/status"))
    assert not status_rule.allows(attrs(ALICE, "PUT", "/apis/resource.k8s.io/v1/namespaces/n/resourceclaims/c"))
    named = Rule(("get",), ("",), ("nodes",), ("n1",))
    assert named.allows(attrs(ALICE, "GET", "/api/v1/nodes/n1"))
    assert not named.allows(attrs(ALICE, "GET", "/api/v1/nodes/n2"))
    urls = Rule(("get",), non_resource_urls=("/apis/*",))
    assert urls.allows(attrs(ALICE, "GET", "/apis/resource.k8s.io"))
    assert not urls.allows(attrs(ALICE, "GET", "/healthz"))


def test_covers_reports_what_is_not_held_in_upstreams_words() -> None:
    owner = [Rule(("get", "list"), ("",), ("pods",)), Rule(("*",), ("resource.k8s.io",), ("resourceclaims",))]
    assert covers(owner, [Rule(("get",), ("",), ("pods",))]) == []
    missing = covers(owner, [Rule(("get", "delete", "create"), ("",), ("pods",)), Rule(("update",), ("resource.k8s.io",), ("resourceclaims/status",))])
    texts = sorted(compact_string(r) for r in compact(missing))
    assert texts == [
        '{APIGroups:[""], Resources:["pods"], Verbs:["delete" "create"]}',
        '{APIGroups:["resource.k8s.io"], Resources:["resourceclaims/status"], Verbs:["update"]}',
    ]


def test_forbidden_status_has_upstreams_message_shape() -> None:
    a = attrs(UserInfo("u"), "PUT", "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status")
    error = forbidden(a)
    assert error.code == 403 and error.reason == "Forbidden"
    assert error.message == (
        'resourceclaims.resource.k8s.io "c" is forbidden: User "u" cannot update resource "resourceclaims/status" in API group "resource.k8s.io" in the namespace "ns"'
    )
    assert error.details == {"name": "c", "group": "resource.k8s.io", "kind": "resourceclaims"}
    cluster = forbidden(attrs(UserInfo("u"), "GET", "/api/v1/nodes"), "some reason")
    assert cluster.message == 'nodes is forbidden: User "u" cannot list resource "nodes" in API group "" at the cluster scope: some reason'
    assert forbidden(attrs(UserInfo("u"), "GET", "/metrics")).message == 'forbidden: User "u" cannot get path "/metrics"'


def test_union_takes_the_first_decision_and_joins_the_reasons() -> None:
    graph = NodeGraph()
    union = UnionAuthorizer([NodeAuthorizer(graph), RBACAuthorizer(RBACIndex())])
    node = UserInfo("system:node:n1", groups=("system:nodes", "system:authenticated"))
    assert union.authorize(attrs(node, "GET", "/api/v1/nodes/n1"))[0] is Decision.ALLOW
    decision, reason = union.authorize(attrs(node, "GET", "/api/v1/nodes/n2"))
    assert decision is Decision.NO_OPINION
    assert reason == "node 'n1' cannot read 'n2', only its own Node object"


def test_a_decision_examines_only_the_bindings_that_name_the_user_among_ten_thousand() -> None:
    index = index_with(
        role("reader", [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]}]),
        *(binding(f"user-{i}", "ClusterRole", "reader", [{"kind": "User", "name": f"user-{i}"}], namespace=f"ns-{i % 50}") for i in range(5_000)),
        *(binding(f"cluster-{i}", "ClusterRole", "reader", [{"kind": "Group", "name": f"group-{i}"}]) for i in range(5_000)),
    )
    rbac = RBACAuthorizer(index)
    user = UserInfo("user-7", groups=("group-3", "system:authenticated"))
    claim = "/apis/resource.k8s.io/v1/namespaces/ns-7/resourceclaims/c"

    decision, reason = rbac.authorize(attrs(user, "GET", claim))
    assert (decision, reason) == (Decision.ALLOW, 'RBAC: allowed by ClusterRoleBinding "cluster-3" of ClusterRole "reader" to Group "group-3"')
    assert index.bindings_examined == 2  # cluster-3, then user-7 in ns-7
    assert rbac.authorize(attrs(UserInfo("user-7"), "GET", claim))[1] == 'RBAC: allowed by RoleBinding "user-7/ns-7" of ClusterRole "reader" to User "user-7"'
    examined = index.bindings_examined
    for _ in range(100):
        rbac.authorize(attrs(user, "GET", claim))
        rbac.authorize(attrs(user, "DELETE", claim))
    assert index.bindings_examined == examined  # the same user and namespace again: nothing looked up


def test_remembered_decisions_follow_changes_and_object_names() -> None:
    index = index_with(
        role("one-claim", [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "resourceNames": ["mine"], "verbs": ["get"]}]),
        binding("alice", "ClusterRole", "one-claim", [{"kind": "User", "name": "alice"}], namespace="team"),
    )
    rbac = RBACAuthorizer(index)
    claims = "/apis/resource.k8s.io/v1/namespaces/team/resourceclaims"
    assert rbac.authorize(attrs(ALICE, "GET", f"{claims}/mine"))[0] is Decision.ALLOW
    assert rbac.authorize(attrs(ALICE, "GET", f"{claims}/theirs"))[0] is Decision.NO_OPINION
    index.apply(ROLE_BINDINGS, True, {"metadata": {"name": "alice", "namespace": "team"}})
    assert rbac.authorize(attrs(ALICE, "GET", f"{claims}/mine"))[0] is Decision.NO_OPINION


def test_a_changed_role_decides_the_next_request_anew() -> None:
    claims = "/apis/resource.k8s.io/v1/namespaces/team/resourceclaims"
    index = index_with(
        role("claims", [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list"]}], namespace="team"),
        binding("alice", "Role", "claims", [{"kind": "Group", "name": "dev"}], namespace="team"),
    )
    rbac = RBACAuthorizer(index)
    assert rbac.authorize(attrs(ALICE, "GET", f"{claims}/c"))[0] is Decision.ALLOW
    resource, changed = role("claims", [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["list"]}], namespace="team")
    index.apply(resource, False, changed)
    assert rbac.authorize(attrs(ALICE, "GET", f"{claims}/c"))[0] is Decision.NO_OPINION
    assert rbac.authorize(attrs(ALICE, "GET", claims))[0] is Decision.ALLOW
    index.apply(ROLES, True, {"metadata": {"name": "claims", "namespace": "team"}})
    assert rbac.authorize(attrs(ALICE, "GET", claims)) == (Decision.NO_OPINION, 'RBAC: role.rbac.authorization.k8s.io "claims" not found')


def test_system_masters_are_allowed_before_any_mode_decides() -> None:
    union = UnionAuthorizer([PrivilegedGroups("system:masters"), AlwaysDeny()])
    admin = UserInfo("root", groups=("system:masters", "system:authenticated"))
    assert union.authorize(attrs(admin, "DELETE", "/api/v1/nodes/n1")) == (Decision.ALLOW, "")
    assert union.authorize(attrs(ALICE, "DELETE", "/api/v1/nodes/n1")) == (Decision.NO_OPINION, "Everything is forbidden.")
