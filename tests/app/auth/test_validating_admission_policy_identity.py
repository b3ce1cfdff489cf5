"""ValidatingAdmissionPolicy where identities matter (a server with Node,RBAC and an audit log):
the Audit action and audit annotations in the request's audit event, the authorizer library asking
RBAC about the requester, and who may name a paramKind or a paramRef."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from tests.authcluster import AuthCluster
from tests.helpers import assert_status

GROUP = "/apis/admissionregistration.k8s.io/v1"
POLICIES = f"{GROUP}/validatingadmissionpolicies"
BINDINGS = f"{GROUP}/validatingadmissionpolicybindings"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def policy_body(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]
    constraints = {"resourceRules": rules, "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name}, "spec": {"matchConstraints": constraints, **spec}}


def binding_body(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name}, "spec": {"policyName": name, **spec}}


@pytest.fixture
def name(admin: httpx.Client) -> Iterator[str]:
    name = f"vap-{uuid.uuid4().hex[:8]}"
    yield name
    admin.delete(f"{BINDINGS}/{name}")
    admin.delete(f"{POLICIES}/{name}")


def audit_event(auth_cluster: AuthCluster, uri: str) -> dict[str, Any]:
    """The audit event of the request to ``uri`` (the log is written as the answer completes)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for line in reversed(auth_cluster.audit_log.read_bytes().splitlines()):
            event: dict[str, Any] = orjson.loads(line)
            if event["requestURI"] == uri and event["verb"] == "create":
                return event
        time.sleep(0.05)
    raise AssertionError(f"no audit event for {uri}")


def test_audit_actions_and_annotations_go_to_the_audit_event(auth_cluster: AuthCluster, admin: httpx.Client, namespace: str, name: str) -> None:
    spec = {
        "validations": [{"expression": "size(object.data) < 2", "message": "small <please>"}],
        "auditAnnotations": [{"key": "entries", "valueExpression": "string(size(object.data))"}, {"key": "nothing", "valueExpression": "null"}],
    }
    assert admin.post(POLICIES, json=policy_body(name, namespace, **spec)).status_code == 201
    assert admin.post(BINDINGS, json=binding_body(name, validationActions=["Audit"])).status_code == 201
    uri = f"/api/v1/namespaces/{namespace}/configmaps"
    created = admin.post(uri, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"a": "1", "b": "2"}})
    assert created.status_code == 201 and "warning" not in created.headers
    annotations = audit_event(auth_cluster, uri)["annotations"]
    assert annotations[f"{name}/entries"] == "2"
    assert f"{name}/nothing" not in annotations
    failure = {"message": "small <please>", "policy": name, "binding": name, "expressionIndex": 0, "validationActions": ["Audit"]}
    # Go's JSON, HTML characters escaped.
    assert annotations["validation.policy.admission.k8s.io/validation_failure"] == orjson.dumps([failure]).decode().replace("<", "\\u003c").replace(">", "\\u003e")
    assert annotations["authorization.k8s.io/decision"] == "allow"


def test_an_audit_annotation_that_cannot_be_computed_denies_under_fail(admin: httpx.Client, namespace: str, name: str) -> None:
    spec = {"auditAnnotations": [{"key": "owner", "valueExpression": "object.data.owner"}]}
    assert admin.post(POLICIES, json=policy_body(name, namespace, **spec)).status_code == 422  # must be a string or null
    spec = {"auditAnnotations": [{"key": "owner", "valueExpression": "string(object.data.owner)"}]}
    assert admin.post(POLICIES, json=policy_body(name, namespace, **spec)).status_code == 201
    assert admin.post(BINDINGS, json=binding_body(name, validationActions=["Deny"])).status_code == 201
    refused = assert_status(admin.post(f"/api/v1/namespaces/{namespace}/configmaps", json={"metadata": {"name": "c"}, "data": {}}), 422, "Invalid")
    assert refused["message"].endswith("denied request: expression 'string(object.data.owner)' resulted in error: no such key: owner")


def test_the_authorizer_asks_rbac_about_the_requester(auth_cluster: AuthCluster, admin: httpx.Client, namespace: str, name: str) -> None:
    check = "authorizer.group('').resource('secrets').namespace(request.namespace).check('list').allowed()"
    spec = {"validations": [{"expression": check, "messageExpression": "'only readers of secrets, not ' + request.userInfo.username"}]}
    assert admin.post(POLICIES, json=policy_body(name, namespace, **spec)).status_code == 201
    assert admin.post(BINDINGS, json=binding_body(name, validationActions=["Deny"])).status_code == 201
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]}
    assert admin.post(f"{RBAC}/namespaces/{namespace}/roles", json=role).status_code == 201
    bound = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}, "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "writer"}]}
    assert admin.post(f"{RBAC}/namespaces/{namespace}/rolebindings", json=bound).status_code == 201
    with auth_cluster.as_user("writer") as writer:
        refused = assert_status(writer.post(f"/api/v1/namespaces/{namespace}/configmaps", json={"metadata": {"name": "c"}}), 422, "Invalid")
    assert refused["message"].endswith("denied request: only readers of secrets, not writer")
    assert admin.post(f"/api/v1/namespaces/{namespace}/configmaps", json={"metadata": {"name": "c"}}).status_code == 201  # system:masters may list them


def test_naming_params_needs_permission_to_read_them(auth_cluster: AuthCluster, admin: httpx.Client, namespace: str, name: str) -> None:
    rules = [{"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingadmissionpolicies", "validatingadmissionpolicybindings"], "verbs": ["create"]}]
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules}
    assert admin.post(f"{RBAC}/clusterroles", json=role).status_code == 201
    subjects = [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": f"{name}-author"}]
    bound = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}, "subjects": subjects}
    assert admin.post(f"{RBAC}/clusterrolebindings", json=bound).status_code == 201
    try:
        body = policy_body(name, namespace, paramKind={"apiVersion": "v1", "kind": "ConfigMap"}, validations=[{"expression": "true"}])
        with auth_cluster.as_user(f"{name}-author") as author:
            refused = assert_status(author.post(POLICIES, json=body), 422, "Invalid")
            user = f"&{{{name}-author  [system:authenticated] map[]}}"
            assert refused["details"]["causes"] == [
                {
                    "reason": "FieldValueForbidden",
                    "message": f'Forbidden: user {user} must have "get" permission on all objects of the referenced paramKind (kind=ConfigMap, apiVersion=v1)',
                    "field": "spec.paramKind",
                }
            ]
            assert admin.post(POLICIES, json=body).status_code == 201
            ref = {"name": "limits", "namespace": namespace, "parameterNotFoundAction": "Deny"}
            refused = assert_status(author.post(BINDINGS, json=binding_body(name, validationActions=["Deny"], paramRef=ref)), 422, "Invalid")
            assert refused["details"]["causes"][0]["message"] == f'Forbidden: user {user} does not have "get" permission on the object referenced by paramRef'
            # Without a paramRef nothing is asked.
            assert author.post(BINDINGS, json=binding_body(name, validationActions=["Deny"])).status_code == 201
    finally:
        admin.delete(f"{RBAC}/clusterrolebindings/{name}")
        admin.delete(f"{RBAC}/clusterroles/{name}")
