"""RBAC on a real server: namespace isolation, escalation prevention through roles and
bindings, impersonation, the access and rules reviews, and aggregated default roles."""

from __future__ import annotations

import time

import httpx

from tests.authcluster import AuthCluster

RBAC = "/apis/rbac.authorization.k8s.io/v1"


def grant(admin: httpx.Client, namespace: str, user: str, rules: list[dict], name: str = "grant") -> None:
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name}, "rules": rules}
    assert admin.post(f"{RBAC}/namespaces/{namespace}/roles", json=role).status_code == 201
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    assert admin.post(f"{RBAC}/namespaces/{namespace}/rolebindings", json=binding).status_code == 201


ROLE_ADMIN = {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["get", "create", "update", "patch"]}
READ_PODS = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}


def test_a_namespace_user_cannot_read_another_namespace(auth_cluster: AuthCluster, admin: httpx.Client, namespace: str) -> None:
    grant(admin, namespace, "dana", [READ_PODS])
    with auth_cluster.as_user("dana") as dana:
        assert dana.get(f"/api/v1/namespaces/{namespace}/pods").status_code == 200
        denied = dana.get("/api/v1/namespaces/default/pods")
        everywhere = dana.get("/api/v1/pods")
        claims = dana.get(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims")
    assert denied.status_code == 403
    assert denied.json() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'pods is forbidden: User "dana" cannot list resource "pods" in API group "" in the namespace "default"',
        "reason": "Forbidden", "details": {"kind": "pods"}, "code": 403,
    }  # fmt: skip
    assert everywhere.json()["message"] == 'pods is forbidden: User "dana" cannot list resource "pods" in API group "" at the cluster scope'
    assert claims.json()["message"] == (
        f'resourceclaims.resource.k8s.io is forbidden: User "dana" cannot list resource "resourceclaims" in API group "resource.k8s.io" in the namespace "{namespace}"'
    )


def test_escalation_through_a_role_update_is_refused_and_nothing_is_stored(auth_cluster: AuthCluster, admin: httpx.Client, namespace: str) -> None:
    grant(admin, namespace, "erin", [ROLE_ADMIN, READ_PODS])
    own = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "mine"}, "rules": [READ_PODS]}
    with auth_cluster.as_user("erin", ("devs",)) as erin:
        created = erin.post(f"{RBAC}/namespaces/{namespace}/roles", json=own)
        assert created.status_code == 201, created.text  # only what erin holds
        wider = created.json()
        wider["rules"] = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "delete"]}]
        refused = erin.put(f"{RBAC}/namespaces/{namespace}/roles/mine", json=wider)
        patched = erin.patch(
            f"{RBAC}/namespaces/{namespace}/roles/mine",
            json={"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]},
            headers={"Content-Type": "application/merge-patch+json"},
        )
    assert refused.status_code == 403
    assert refused.json()["message"] == (
        'roles.rbac.authorization.k8s.io "mine" is forbidden: user "erin" (groups=["devs" "system:authenticated"]) is attempting to grant RBAC '
        'permissions not currently held:\n{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}'
    )
    assert refused.json()["details"] == {"name": "mine", "group": "rbac.authorization.k8s.io", "kind": "roles"}
    assert patched.status_code == 403
    assert admin.get(f"{RBAC}/namespaces/{namespace}/roles/mine").json()["rules"] == [READ_PODS]


def test_escalate_and_bind_verbs_allow_granting_more(auth_cluster: AuthCluster, admin: httpx.Client, namespace: str) -> None:
    grant(admin, namespace, "fred", [ROLE_ADMIN])
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "fred-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "fred"}],
    }
    big = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "big"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}
    with auth_cluster.as_user("fred") as fred:
        refused_binding = fred.post(f"{RBAC}/namespaces/{namespace}/rolebindings", json=binding)
        refused_role = fred.post(f"{RBAC}/namespaces/{namespace}/roles", json=big)
        assert refused_binding.status_code == 403 and "is attempting to grant RBAC permissions not currently held" in refused_binding.json()["message"]
        assert refused_role.status_code == 403
        assert admin.get(f"{RBAC}/namespaces/{namespace}/rolebindings/fred-admin").status_code == 404
        grant(admin, namespace, "fred", [
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["admin"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]},
        ], name="delegate")  # fmt: skip
        assert fred.post(f"{RBAC}/namespaces/{namespace}/rolebindings", json=binding).status_code == 201
        assert fred.post(f"{RBAC}/namespaces/{namespace}/roles", json=big).status_code == 201


def test_impersonation_needs_the_impersonate_verb(auth_cluster: AuthCluster, admin: httpx.Client, namespace: str) -> None:
    with auth_cluster.as_user("gina") as gina:
        denied = gina.get("/api/v1/namespaces", headers={"Impersonate-User": "kubernetes-admin"})
        denied_group = gina.get("/api/v1/namespaces", headers={"Impersonate-User": "gina", "Impersonate-Group": "system:masters"})
    assert denied.status_code == 403
    # With ConstrainedImpersonation on (upstream's default) the first mode that applies answers:
    # user-info, which asks first about what the request does.
    message = 'namespaces is forbidden: User "gina" cannot impersonate-on:user-info:list resource "namespaces" in API group "" at the cluster scope'
    assert denied.json()["message"] == message
    assert denied_group.status_code == 403
    as_other = admin.post(
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        headers={"Impersonate-User": f"system:serviceaccount:{namespace}:x", "Impersonate-Extra-Authentication.kubernetes.io%2fnode-name": "n1"},
    )
    assert as_other.json()["status"]["userInfo"] == {
        "username": f"system:serviceaccount:{namespace}:x",
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/node-name": ["n1"]},
    }


def test_access_and_rules_reviews(auth_cluster: AuthCluster, admin: httpx.Client, namespace: str) -> None:
    grant(admin, namespace, "hank", [READ_PODS])
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": {"namespace": namespace, "verb": "list", "resource": "pods"}}}
    with auth_cluster.as_user("hank") as hank:
        allowed = hank.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=review)
        review["spec"]["resourceAttributes"]["verb"] = "delete"
        denied = hank.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=review)
        rules = hank.post("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", json={"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": namespace}})
        invalid = hank.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json={"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {}})
        other = hank.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json={"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {"user": "x", "resourceAttributes": {"verb": "get", "resource": "pods"}}})
    assert allowed.status_code == 201
    assert allowed.json()["status"] == {"allowed": True, "reason": f'RBAC: allowed by RoleBinding "grant/{namespace}" of Role "grant" to User "hank"'}
    assert denied.json()["status"] == {"allowed": False}
    assert READ_PODS in rules.json()["status"]["resourceRules"]
    assert {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"]} in rules.json()["status"]["nonResourceRules"]
    assert invalid.status_code == 422
    assert "exactly one of nonResourceAttributes or resourceAttributes must be specified" in invalid.json()["message"]
    assert other.status_code == 403  # SubjectAccessReview is for those who may create it
    sar = admin.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json={"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {"user": "hank", "resourceAttributes": {"namespace": namespace, "verb": "get", "resource": "pods"}}})
    assert sar.status_code == 201 and sar.json()["status"]["allowed"] is True


def test_local_subject_access_reviews_answer_within_their_namespace(auth_cluster: AuthCluster, admin: httpx.Client, namespace: str) -> None:
    grant(admin, namespace, "hank", [READ_PODS])
    grant(admin, namespace, "nadia", [{"apiGroups": ["authorization.k8s.io"], "resources": ["localsubjectaccessreviews"], "verbs": ["create"]}], name="reviewer")
    reviews = f"/apis/authorization.k8s.io/v1/namespaces/{namespace}/localsubjectaccessreviews"

    def review(verb: str, review_namespace: str | None = namespace, **spec: object) -> dict:
        attributes = {"verb": verb, "resource": "pods", **({"namespace": review_namespace} if review_namespace is not None else {})}
        return {"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview", "spec": {"user": "hank", "resourceAttributes": attributes, **spec}}

    with auth_cluster.as_user("nadia") as nadia:
        allowed = nadia.post(reviews, json=review("list"))
        denied = nadia.post(reviews, json=review("delete"))
        elsewhere = nadia.post(reviews, json=review("list", "default"))
        unnamed = nadia.post(reviews, json=review("list", None))
        paths = nadia.post(reviews, json={**review("get"), "spec": {"user": "hank", "nonResourceAttributes": {"verb": "get", "path": "/healthz"}}})
        other_namespace = nadia.post("/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews", json=review("list", "default"))
        mismatched = nadia.post(reviews, json={**review("list"), "metadata": {"namespace": "default"}})
    assert allowed.status_code == 201, allowed.text
    assert allowed.json()["metadata"] == {"namespace": namespace}
    assert allowed.json()["status"] == {"allowed": True, "reason": f'RBAC: allowed by RoleBinding "grant/{namespace}" of Role "grant" to User "hank"'}
    assert denied.json()["status"] == {"allowed": False}
    for refused in (elsewhere, unnamed):
        assert refused.status_code == 422
        assert "spec.resourceAttributes.namespace: Invalid value" in refused.json()["message"] and "must match metadata.namespace" in refused.json()["message"]
    assert paths.status_code == 422 and "spec.nonResourceAttributes: Invalid value" in paths.json()["message"]
    assert other_namespace.status_code == 403  # nadia may review only in her namespace
    assert mismatched.status_code == 400
    assert mismatched.json()["message"] == "the namespace of the provided object does not match the namespace sent on the request"
    # A namespace that does not exist can still be asked about, as upstream allows.
    missing = admin.post("/apis/authorization.k8s.io/v1/namespaces/no-such-ns/localsubjectaccessreviews", json=review("list", "no-such-ns"))
    assert missing.status_code == 201 and missing.json()["status"]["allowed"] is False


def test_aggregated_roles_follow_the_roles_they_select(admin: httpx.Client) -> None:
    extra = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "widgets-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}],
    }
    assert admin.post(f"{RBAC}/clusterroles", json=extra).status_code == 201
    deadline = time.monotonic() + 10
    while True:
        view = admin.get(f"{RBAC}/clusterroles/view").json()
        admin_role = admin.get(f"{RBAC}/clusterroles/admin").json()
        if extra["rules"][0] in view["rules"] and extra["rules"][0] in admin_role["rules"]:
            break
        assert time.monotonic() < deadline, view["rules"]
        time.sleep(0.1)
    assert admin.delete(f"{RBAC}/clusterroles/widgets-view").status_code == 200
    while extra["rules"][0] in admin.get(f"{RBAC}/clusterroles/view").json()["rules"]:
        assert time.monotonic() < deadline + 10
        time.sleep(0.1)


def test_rbac_objects_are_validated(admin: httpx.Client, namespace: str) -> None:
    bad = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "bad"}, "rules": [{"apiGroups": [""], "resources": ["pods"]}, {"nonResourceURLs": ["/x"], "verbs": ["get"]}]}
    response = admin.post(f"{RBAC}/namespaces/{namespace}/roles", json=bad)
    assert response.status_code == 422
    assert response.json()["message"] == (
        'Role.rbac.authorization.k8s.io "bad" is invalid: [rules[0].verbs: Required value: verbs must contain at least one value, '
        'rules[1].nonResourceURLs: Invalid value: ["/x"]: namespaced rules cannot apply to non-resource URLs]'
    )
